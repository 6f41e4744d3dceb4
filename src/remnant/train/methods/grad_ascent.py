"""GradAscent: ascend the forget set's NLL (openunlearning.md §2, ``grad_ascent.py``).

``L = −NLL(forget)``; no retain term. Defaults: the shared finetune defaults.
"""

from __future__ import annotations

from typing import Any

from remnant.registry import register
from remnant.train.losses import mean_nll
from remnant.train.methods.base import LossTerms, MethodBatch, RemovalMethod, StepContext


@register("method", "grad_ascent", "1")
class GradAscent(RemovalMethod):
    """Gradient ascent on the forget answers."""

    kind = "loss"
    formula = "L = -NLL(forget)"

    def __init__(self, **common: Any) -> None:
        super().__init__(**common)

    def loss(self, model: Any, batch: MethodBatch, ctx: StepContext) -> LossTerms:
        nll = mean_nll(model, batch.forget)
        return LossTerms(loss=-nll, parts={"forget_nll": float(nll.detach())})
