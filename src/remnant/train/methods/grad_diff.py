"""GradDiff: ascend the forget NLL while descending a retain loss (openunlearning.md §2, ``grad_diff.py``).

``L = γ·(−NLL(forget)) + α·L_retain`` with ``L_retain`` = NLL(retain) or KL(p_ref ‖ p_model). Defaults γ=1, α=1,
NLL.
"""

from __future__ import annotations

from typing import Any, Literal

from remnant.registry import register
from remnant.train.losses import mean_nll, retain_loss
from remnant.train.methods.base import LossTerms, MethodBatch, RemovalMethod, StepContext


@register("method", "grad_diff", "1")
class GradDiff(RemovalMethod):
    """Gradient difference: forget ascent plus retain descent."""

    kind = "loss"
    formula = "L = gamma*(-NLL(forget)) + alpha*L_retain (NLL or KL)"

    def __init__(
        self, *, gamma: float = 1.0, alpha: float = 1.0, retain_loss_type: str = "NLL", **common: Any
    ) -> None:
        super().__init__(**common)
        self.gamma = gamma
        self.alpha = alpha
        if retain_loss_type not in ("NLL", "KL"):
            raise ValueError(f"grad_diff: retain_loss_type must be 'NLL' or 'KL', not {retain_loss_type!r}")
        self.retain_loss_type: Literal["NLL", "KL"] = "KL" if retain_loss_type == "KL" else "NLL"
        self.needs_reference = self.retain_loss_type == "KL"

    def loss(self, model: Any, batch: MethodBatch, ctx: StepContext) -> LossTerms:
        nll_f = mean_nll(model, batch.forget)
        total = self.gamma * -nll_f
        parts = {"forget_nll": float(nll_f.detach())}
        if batch.retain is not None and self.alpha:
            r = retain_loss(model, batch.retain, ctx.reference, self.retain_loss_type)
            total = total + self.alpha * r
            parts["retain"] = float(r.detach())
        return LossTerms(loss=total, parts=parts)
