"""SimNPO: reference-free, length-normalised NPO (docs/methods.md, ``simnpo.py``).

``a = S(y_f)/|y_f| − δ`` (mean answer-token NLL minus a margin); ``L_f = −(2/β)·mean log σ(β·a)``;
``L = γ·L_f + α·L_retain``. Defaults δ=0, β=4.5, γ=0.125, α=1, NLL retain. As in OpenUnlearning, δ sits inside
the β scaling (the paper's additive γ); the two agree at δ=0.

``compat``: remnant counts ``|y_f|`` on the shifted labels (the tokens S sums over) and floors it at 1;
OpenUnlearning counts the unshifted labels with no floor — equal whenever the first token is a prompt token,
which ``encode_pair`` guarantees. The KL retain term masks padding (remnant) or averages over all B·T
positions (OpenUnlearning).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch.nn.functional as F

from remnant.registry import register
from remnant.train.losses import answer_lengths, sequence_nll
from remnant.train.methods.base import LossTerms, MethodBatch, StepContext
from remnant.train.methods.retain import ForgetRetainMethod

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@register("method", "simnpo", "1")
class SimNPO(ForgetRetainMethod):
    """Simple NPO (Fan et al. 2024): no reference model (one only for a KL retain term)."""

    kind = "loss"
    formula = "L = gamma*(-(2/beta)*mean log sigmoid(beta*(S(y_f)/|y_f| - delta))) + alpha*L_retain"
    source = "docs/methods.md (SimNPO: simnpo.py, configs/trainer/SimNPO.yaml)"

    def __init__(
        self,
        *,
        delta: float = 0.0,
        beta: float = 4.5,
        gamma: float = 0.125,
        alpha: float = 1.0,
        retain_loss_type: str = "NLL",
        compat: str = "remnant",
        **common: Any,
    ) -> None:
        super().__init__(**common)
        self.delta = delta
        self.beta = beta
        self._set_weights("simnpo", gamma, alpha, retain_loss_type, compat)

    def loss(self, model: PreTrainedModel, batch: MethodBatch, ctx: StepContext) -> LossTerms:
        if self.compat == "openunlearning":
            length = (batch.forget["labels"] != -100).sum(dim=-1).float()
        else:
            length = answer_lengths(batch.forget).clamp(min=1.0)
        a = sequence_nll(model, batch.forget) / length - self.delta
        forget = -(2.0 / self.beta) * F.logsigmoid(self.beta * a).mean()
        parts = {"forget": float(forget.detach()), "mean_nll": float(a.detach().mean() + self.delta)}
        return self._total(forget, parts, model, batch, ctx)
