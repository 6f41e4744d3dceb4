"""GradDiff: ascend the forget NLL while descending a retain loss (docs/methods.md, ``grad_diff.py``).

``L = γ·(−NLL(forget)) + α·L_retain`` with ``L_retain`` = NLL(retain) or KL(p_ref ‖ p_model). Defaults γ=1, α=1,
NLL. ``compat``: the KL retain term averages over attended positions (remnant) or over all B·T positions,
padding included (OpenUnlearning); the NLL form is the same under both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from remnant.registry import register
from remnant.train.losses import mean_nll
from remnant.train.methods.base import LossTerms, MethodBatch, StepContext
from remnant.train.methods.retain import ForgetRetainMethod

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@register("method", "grad_diff", "1")
class GradDiff(ForgetRetainMethod):
    """Gradient difference: forget ascent plus retain descent (KL retain masks padding unless compat says not)."""

    kind = "loss"
    formula = "L = gamma*(-NLL(forget)) + alpha*L_retain (NLL or KL)"
    source = "docs/methods.md (GradDiff: grad_diff.py, configs/trainer/GradDiff.yaml)"

    def __init__(
        self,
        *,
        gamma: float = 1.0,
        alpha: float = 1.0,
        retain_loss_type: str = "NLL",
        compat: str = "remnant",
        **common: Any,
    ) -> None:
        super().__init__(**common)
        self._set_weights("grad_diff", gamma, alpha, retain_loss_type, compat)

    def loss(self, model: PreTrainedModel, batch: MethodBatch, ctx: StepContext) -> LossTerms:
        nll_f = mean_nll(model, batch.forget)
        parts = {"forget_nll": float(nll_f.detach())}
        return self._total(-nll_f, parts, model, batch, ctx)
