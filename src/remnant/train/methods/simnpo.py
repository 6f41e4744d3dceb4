"""SimNPO: reference-free, length-normalised NPO (openunlearning.md §2, ``simnpo.py``).

``a = S(y_f)/|y_f| − δ`` (mean answer-token NLL minus a margin); ``L_f = −(2/β)·mean log σ(β·a)``;
``L = γ·L_f + α·L_retain``. Defaults δ=0, β=4.5, γ=0.125, α=1, NLL retain. As in OpenUnlearning, δ sits inside
the β scaling (the paper's additive γ); the two agree at δ=0.
"""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F

from remnant.registry import register
from remnant.train.losses import answer_lengths, retain_loss, sequence_nll
from remnant.train.methods.base import LossTerms, MethodBatch, RemovalMethod, StepContext


@register("method", "simnpo", "1")
class SimNPO(RemovalMethod):
    """Simple NPO (Fan et al. 2024): no reference model."""

    kind = "loss"
    formula = "L = gamma*(-(2/beta)*mean log sigmoid(beta*(S(y_f)/|y_f| - delta))) + alpha*L_retain"

    def __init__(
        self,
        *,
        delta: float = 0.0,
        beta: float = 4.5,
        gamma: float = 0.125,
        alpha: float = 1.0,
        **common: Any,
    ) -> None:
        super().__init__(**common)
        self.delta = delta
        self.beta = beta
        self.gamma = gamma
        self.alpha = alpha

    def loss(self, model: Any, batch: MethodBatch, ctx: StepContext) -> LossTerms:
        a = sequence_nll(model, batch.forget) / answer_lengths(batch.forget).clamp(min=1.0) - self.delta
        forget = -(2.0 / self.beta) * F.logsigmoid(self.beta * a).mean()
        total = self.gamma * forget
        parts = {"forget": float(forget.detach()), "mean_nll": float(a.detach().mean() + self.delta)}
        if batch.retain is not None and self.alpha:
            ret = retain_loss(model, batch.retain, None, "NLL")
            total = total + self.alpha * ret
            parts["retain"] = float(ret.detach())
        return LossTerms(loss=total, parts=parts)
