"""A state read under a perturbation: NF4 fake quantisation (R25) or a relearned copy (C-W1, C-W5).

With :mod:`remnant.states.builder` (install, removal, the controls) this is the only place that makes a model
state: a pool's ``nf4`` and ``relearn`` perturbations, the assessment's relearning curves, the Class D battery's
relearning cells and the studies' relearning criterion all read their perturbed states from here. A perturbed
state's digest is its state's digest and the perturbation's settings (:func:`remnant.states.recipe.perturbed_state`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import nn
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from remnant.models.prompts import EncodedPair
    from remnant.train.loop import CheckpointCallback, TrainOutcome
    from remnant.train.relearn import RelearnSpec

#: NF4 as bitsandbytes does it: blocks of 64, no double quantisation (remnant.attacks.quantize).
NF4_SCHEME, NF4_BLOCKSIZE = "nf4", 64
#: What an NF4 state's digest hashes beside its state's (R23).
NF4_SETTINGS: dict[str, object] = {"scheme": NF4_SCHEME, "blocksize": NF4_BLOCKSIZE}


@contextmanager
def nf4(model: nn.Module) -> Iterator[nn.Module]:
    """``model`` with its decoder linear weights fake-quantised to NF4 inside the block, restored after (R25)."""
    from remnant.attacks.quantize import fake_quantized

    with fake_quantized(model, NF4_SCHEME, blocksize=NF4_BLOCKSIZE):
        yield model


def relearned_copy(
    start: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    pairs: Sequence[EncodedPair],
    spec: RelearnSpec,
    *,
    label: str,
    progress: bool,
    on_checkpoint: CheckpointCallback,
) -> tuple[TrainOutcome, PreTrainedModel]:
    """The one relearned copy (C-W1, C-W3, C-W5): a copy of ``start`` fine-tuned on ``pairs`` (encoded, in
    order) under ``spec``, ``on_checkpoint`` called at step 0 and at every declared checkpoint inside the first
    epoch. ``start`` is never modified; the trained copy is returned beside the outcome (attack-stage utility
    reads it, R12)."""
    from remnant.models.prompts import pad_id
    from remnant.train.loop import prepare_model, train
    from remnant.train.objectives import PairsObjective

    cfg = spec.train_config(progress, label)
    model = prepare_model(copy.deepcopy(start), cfg)
    outcome = train(model, PairsObjective(pairs, pad_id(tokenizer)), cfg, on_checkpoint=on_checkpoint)
    return outcome, model


__all__ = ["NF4_BLOCKSIZE", "NF4_SCHEME", "NF4_SETTINGS", "nf4", "relearned_copy"]
