"""Objectives the loop trains on: plain answer-only NLL over pairs, and a removal method's loss hook.

An objective maps a list of anchor indices (one micro-batch, in the loop's data order) to :class:`LossTerms`.
The method objective assembles :class:`MethodBatch`: the forget items, one retain item drawn per forget item and
one alternate answer per forget item, both drawn from the loop's sampling generator (checkpointed, so a resumed
run draws the same ones).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from remnant.models.prompts import EncodedPair, collate
from remnant.train.losses import mean_nll
from remnant.train.methods.base import EncodedData, LossTerms, MethodBatch, RemovalMethod, StepContext

if TYPE_CHECKING:
    from transformers import PreTrainedModel


class PairsObjective:
    """Answer-only mean NLL over ``pairs`` (installation, retraining, relearning)."""

    def __init__(self, pairs: Sequence[EncodedPair], pad_id: int) -> None:
        self.pairs = list(pairs)
        self.pad_id = pad_id
        self.n = len(self.pairs)

    def __call__(
        self, model: PreTrainedModel, indices: Sequence[int], generator: torch.Generator
    ) -> LossTerms:
        batch = collate([self.pairs[i] for i in indices], pad_id=self.pad_id, side="right")
        loss = mean_nll(model, batch)
        return LossTerms(loss=loss, parts={"nll": float(loss.detach())})


class MethodObjective:
    """A loss method's ``loss`` hook over forget anchors with sampled retain and alternate rows."""

    def __init__(self, method: RemovalMethod, data: EncodedData, ctx: StepContext) -> None:
        self.method = method
        self.data = data
        self.ctx = ctx
        self.n = len(data.forget)
        if method.needs_alternates and len(data.alternates) != self.n:
            raise ValueError(f"method needs {self.n} alternate-answer lists, got {len(data.alternates)}")

    def batch(self, indices: Sequence[int], generator: torch.Generator) -> MethodBatch:
        d = self.data
        forget = collate([d.forget[i] for i in indices], pad_id=d.pad_id, side="right")
        retain = None
        if d.retain:
            picks = torch.randint(len(d.retain), (len(indices),), generator=generator).tolist()
            retain = collate([d.retain[j] for j in picks], pad_id=d.pad_id, side="right")
        alternate = None
        if self.method.needs_alternates:
            options = [d.alternates[i] for i in indices]
            rows = [o[int(torch.randint(len(o), (1,), generator=generator))] for o in options]
            alternate = collate(rows, pad_id=d.pad_id, side="right")
        return MethodBatch(forget=forget, retain=retain, alternate=alternate, forget_index=tuple(indices))

    def __call__(
        self, model: PreTrainedModel, indices: Sequence[int], generator: torch.Generator
    ) -> LossTerms:
        return self.method.loss(model, self.batch(indices, generator), self.ctx)


__all__ = ["MethodObjective", "PairsObjective"]
