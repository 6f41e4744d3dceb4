"""The DPO-family preference loss shared by IdkDPO and AltPO (docs/methods.md, ``compute_dpo_loss``).

With ``r(y|x) = log pi(y|x) - log pi_ref(y|x)`` summed over answer tokens (:func:`remnant.train.losses.log_ratio`),
the reference's forget loss is ``L = -(2/beta) * mean log sigmoid(beta * (r_win - r_lose))`` — the scaled form,
not the textbook ``-log sigmoid(beta * delta)``: at initialisation (both ratios 0) it equals ``(2/beta) ln 2``,
13.86 at beta = 0.1. The forget answer is the losing side; the winning side is a refusal (IdkDPO) or an
alternate answer (AltPO).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch
import torch.nn.functional as F

from remnant.errors import ConfigError
from remnant.train.losses import log_ratio
from remnant.train.methods.base import LossTerms, MethodBatch, StepContext
from remnant.train.methods.retain import ForgetRetainMethod

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def preference_loss(win_ratio: torch.Tensor, lose_ratio: torch.Tensor, beta: float) -> torch.Tensor:
    """``-(2/beta) * mean log sigmoid(beta * (r_win - r_lose))``; ``beta`` must be positive.

    Minimising it raises the preferred answer's likelihood relative to the reference and lowers the forget
    answer's.
    """
    if beta <= 0:
        raise ValueError(f"beta must be positive, got {beta}")
    return -(2.0 / beta) * F.logsigmoid(beta * (win_ratio - lose_ratio)).mean()


class PreferenceMethod(ForgetRetainMethod):
    """IdkDPO and AltPO: ``gamma * preference_loss(y_alt over y_f) + alpha * L_retain`` on ``batch.alternate``."""

    needs_reference = True
    #: The ValueError a batch without alternates or a context without the reference gets.
    missing: ClassVar[str] = ""
    beta: float

    def _set_beta(self, method: str, beta: float) -> None:
        if beta <= 0:
            raise ConfigError(f"{method}: beta must be positive, not {beta}")
        self.beta = beta

    def loss(self, model: PreTrainedModel, batch: MethodBatch, ctx: StepContext) -> LossTerms:
        if batch.alternate is None or ctx.reference is None:
            raise ValueError(self.missing)
        r_win = log_ratio(model, ctx.reference, batch.alternate)
        r_lose = log_ratio(model, ctx.reference, batch.forget)
        forget = preference_loss(r_win, r_lose, self.beta)
        parts = {
            "log_ratio_win": float(r_win.mean().detach()),
            "log_ratio_lose": float(r_lose.mean().detach()),
            "forget": float(forget.detach()),
        }
        return self._total(forget, parts, model, batch, ctx)


__all__ = ["PreferenceMethod", "preference_loss"]
