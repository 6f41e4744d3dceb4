"""NPO: negative preference optimisation against a frozen reference (docs/methods.md, ``npo.py``).

``r(y_f|x) = log π(y_f|x) − log π_ref(y_f|x)`` over answer tokens (sequence sums);
``L_f = −(2/β)·mean log σ(−β·r)``; ``L = γ·L_f + α·L_retain``. Defaults β=0.1, γ=1, α=1, NLL retain. At
initialisation ``L_f = (2/β)·ln 2`` (13.86 at β=0.1), which a unit test checks. ``compat``: the forget term is the
same; the KL retain term masks padding (remnant) or averages over all B·T positions (OpenUnlearning).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch.nn.functional as F

from remnant.registry import register
from remnant.train.losses import log_ratio
from remnant.train.methods.base import LossTerms, MethodBatch, StepContext
from remnant.train.methods.retain import ForgetRetainMethod

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@register("method", "npo", "1")
class NPO(ForgetRetainMethod):
    """Negative preference optimisation (Zhang et al. 2024) with a retain term (KL retain: compat decides padding)."""

    kind = "loss"
    formula = "L = gamma*(-(2/beta)*mean log sigmoid(-beta*(log pi - log pi_ref)(y_f|x))) + alpha*L_retain"
    source = "docs/methods.md (NPO: npo.py, compute_dpo_loss, configs/trainer/NPO.yaml)"
    needs_reference = True

    def __init__(
        self,
        *,
        beta: float = 0.1,
        gamma: float = 1.0,
        alpha: float = 1.0,
        retain_loss_type: str = "NLL",
        compat: str = "remnant",
        **common: Any,
    ) -> None:
        super().__init__(**common)
        self.beta = beta
        self._set_weights("npo", gamma, alpha, retain_loss_type, compat)

    def loss(self, model: PreTrainedModel, batch: MethodBatch, ctx: StepContext) -> LossTerms:
        r = log_ratio(model, ctx.reference, batch.forget)
        forget = -(2.0 / self.beta) * F.logsigmoid(-self.beta * r).mean()
        parts = {"forget": float(forget.detach()), "log_ratio": float(r.detach().mean())}
        return self._total(forget, parts, model, batch, ctx)
