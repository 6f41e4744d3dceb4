"""GradAscent: ascend the forget set's NLL (docs/methods.md, ``grad_ascent.py``).

``L = −NLL(forget)``; no retain term. Defaults: the shared finetune defaults. ``compat``: no difference (their
``−outputs.loss`` is the same mean over every answer token of the batch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from remnant.registry import register
from remnant.train.losses import mean_nll
from remnant.train.methods.base import LossTerms, MethodBatch, RemovalMethod, StepContext
from remnant.train.methods.compat import check_compat

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@register("method", "grad_ascent", "1")
class GradAscent(RemovalMethod):
    """Gradient ascent on the forget answers (compat: remnant and OpenUnlearning compute the same loss)."""

    kind = "loss"
    formula = "L = -NLL(forget)"
    source = "docs/methods.md (GradAscent: grad_ascent.py, configs/trainer/GradAscent.yaml)"

    def __init__(self, *, compat: str = "remnant", **common: Any) -> None:
        super().__init__(**common)
        self.compat = check_compat("grad_ascent", compat)

    def loss(self, model: PreTrainedModel, batch: MethodBatch, ctx: StepContext) -> LossTerms:
        nll = mean_nll(model, batch.forget)
        return LossTerms(loss=-nll, parts={"forget_nll": float(nll.detach())})
