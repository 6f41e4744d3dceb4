"""Annex B control states (C-H7(c), deprecated C-H3a/b): what a latent statistic must be read against.

* **Procedure control** — the removal procedure applied to a never-installed model: identical method,
  parameters, data and seed, starting from the control. Movement it shows is caused by the procedure, not by
  the target.
* **Content control** — the control installed with the content-shuffled twin of the target
  (``remnant.packs.splits.shuffled_twin``: same entities, templates and format, attributes re-paired) under the
  identical installation recipe. Movement it shares with the real install is the footprint of training on the
  target's topic and format (Annex B.6).

Both start from a deep copy, so the control passed in is never modified. With task-vector negation from an
install-minus-control vector, the procedure control is the control itself (its vector is zero); say so.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from remnant.statement.canonical import derive_seed
from remnant.train.data import split_qa
from remnant.train.install import InstallResult, InstallSpec, install
from remnant.train.methods.base import RemovalData, RemovalMethod
from remnant.train.removal import RemovalResult, apply_removal

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from remnant.models.prompts import PromptFormat
    from remnant.packs.schema import Pack


@dataclass(frozen=True)
class ControlState:
    """A built control state: which one, and the record of how it was made."""

    kind: str
    model: Any
    record: dict[str, Any]


def procedure_control(
    method: RemovalMethod,
    control: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    data: RemovalData,
    *,
    seed: int,
    fmt: PromptFormat | None = None,
    progress: bool = False,
) -> tuple[ControlState, RemovalResult]:
    """Apply ``method`` to a copy of the never-installed ``control`` (same data, parameters and seed)."""
    model, result = apply_removal(
        method,
        copy.deepcopy(control),
        tokenizer,
        data,
        seed=seed,
        fmt=fmt,
        control=control,
        progress=progress,
    )
    return ControlState("procedure", model, {"removal": result.to_dict()}), result


def content_control(
    control: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    pack: Pack,
    spec: InstallSpec,
    *,
    seed: int,
    attributes: list[str] | None = None,
    fmt: PromptFormat | None = None,
    progress: bool = False,
) -> tuple[ControlState, InstallResult]:
    """Install the content-shuffled twin of ``pack`` into a copy of ``control`` with the install recipe."""
    from remnant.packs.splits import shuffled_twin

    twin = shuffled_twin(pack, random.Random(derive_seed(seed, "shuffled-twin")))
    items = split_qa(twin, "install", attributes)
    model, result = install(
        copy.deepcopy(control), tokenizer, items, spec, seed=seed, fmt=fmt, progress=progress
    )
    record = {"twin_pack_id": twin.manifest.id, "twin_digest": twin.digest, "install": result.to_dict()}
    return ControlState("content", model, record), result


__all__ = ["ControlState", "content_control", "procedure_control"]
