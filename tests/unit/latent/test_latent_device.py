"""The one-prompt block-capture forward (:func:`remnant.models.hooks.block_outputs`) puts the prompt's ids on the
model's device (R24), so J-Access, direction survival, the logit lens and the Goodhart surrogates run on a GPU
model. Checked here without a GPU: the model is moved to the ``meta`` device and a forward pre-hook records the
device the ids reach it on, then stops the forward (ids built on the CPU would reach it on ``cpu``)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import torch

from remnant.latent.direction import activations
from remnant.latent.inputs import EncodedExample
from remnant.latent.jaccess import AccessConfig, Probe, _band_logits, _read_variants
from remnant.latent.logit_lens import layer_logprobs
from remnant.studies.goodhart_objective import AccessSurrogate, PatchSurrogate

PROMPT = (1, 5, 9, 13, 17, 21)
PROBE = Probe("p", PROMPT, frozenset({3, 4}))
EXAMPLE = EncodedExample("e", PROMPT, 3, (0, 2))


class _Reached(Exception):
    """Raised by the pre-hook once it has seen the ids: nothing runs on the meta device."""


PATHS: dict[str, Callable[[Any], object]] = {
    "direction.activations": lambda m: activations(m, [PROMPT], [0], ["last"]),
    "jaccess._band_logits": lambda m: list(_band_logits(m, PROMPT, [0], None, 8)),
    "jaccess._read_variants": lambda m: _read_variants(
        m, [([PROBE], None)], AccessConfig(layers=(0,)), [[False]], None
    ),
    "logit_lens.layer_logprobs": lambda m: layer_logprobs(m, m, EXAMPLE, [0]),
    "goodhart.AccessSurrogate": lambda m: AccessSurrogate([PROBE], [0])(m, [0]),
    "goodhart.PatchSurrogate": lambda m: PatchSurrogate(m, [EXAMPLE], [0])(m, [0]),
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_prompt_ids_reach_the_model_on_its_device(path: str, tiny_llama: Any) -> None:
    model = copy.deepcopy(tiny_llama.model).to("meta")
    seen: list[torch.device] = []

    def pre_hook(_m: object, _args: object, kwargs: dict[str, Any]) -> None:
        seen.append(kwargs["input_ids"].device)
        raise _Reached

    model.register_forward_pre_hook(pre_hook, with_kwargs=True)
    with pytest.raises(_Reached):
        PATHS[path](model)
    assert seen == [torch.device("meta")]
