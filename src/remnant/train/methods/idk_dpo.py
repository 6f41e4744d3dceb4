"""IdkDPO: prefer a refusal over the forget answer, against the frozen reference (docs/methods.md, ``dpo.py``).

``L_f = -(2/beta) * mean log sigmoid(beta * [r(y_idk|x) - r(y_f|x)])`` with ``r`` the answer log-ratio against
the starting model and ``y_idk`` drawn from the IDK bank per visit (``QAwithIdkDataset``);
``L = gamma * L_f + alpha * L_retain``. Defaults beta = 0.1, gamma = 1, alpha = 1, NLL retain. ``compat``: the
preference term is the same; the KL retain term masks padding (remnant) or averages over all B·T positions
(OpenUnlearning).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from remnant.errors import ConfigError
from remnant.models.prompts import PromptFormat
from remnant.registry import register
from remnant.train.methods.base import QA, LossTerms, MethodBatch, RemovalMethod, StepContext
from remnant.train.methods.compat import check_compat
from remnant.train.methods.idk import IDK_BANK_VERSION, bank_digest
from remnant.train.methods.idk_nll import idk_alternates
from remnant.train.methods.preference import dpo_forget_loss
from remnant.train.methods.retain import add_retain, check_retain_type

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


@register("method", "idk_dpo", "1")
class IdkDPO(RemovalMethod):
    """DPO with a refusal preferred and the forget answer rejected (compat: only the KL retain term differs)."""

    kind = "loss"
    formula = (
        "L = gamma*(-(2/beta)*mean log sigmoid(beta*(r(y_idk|x) - r(y_f|x)))) + alpha*L_retain, "
        "r = log pi - log pi_ref over answer tokens"
    )
    needs_reference = True
    needs_alternates = "idk"

    def __init__(
        self,
        *,
        beta: float = 0.1,
        gamma: float = 1.0,
        alpha: float = 1.0,
        retain_loss_type: str = "NLL",
        compat: str = "remnant",
        idk_bank: str = f"remnant-idk-v{IDK_BANK_VERSION}",
        **common: Any,
    ) -> None:
        super().__init__(**common)
        if beta <= 0:
            raise ConfigError(f"idk_dpo: beta must be positive, not {beta}")
        if idk_bank != f"remnant-idk-v{IDK_BANK_VERSION}":
            raise ConfigError(f"idk_dpo: idk_bank must be remnant-idk-v{IDK_BANK_VERSION} (the bundled bank)")
        self.beta = beta
        self.gamma = gamma
        self.alpha = alpha
        self.retain_loss_type = check_retain_type("idk_dpo", retain_loss_type)
        self.compat = check_compat("idk_dpo", compat)
        self.idk_bank = idk_bank
        self.idk_bank_digest = bank_digest()

    def alternates(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        fmt: PromptFormat,
        forget: Sequence[QA],
        generator: torch.Generator,
    ) -> list[list[str]]:
        return idk_alternates(forget)

    def loss(self, model: PreTrainedModel, batch: MethodBatch, ctx: StepContext) -> LossTerms:
        if batch.alternate is None or ctx.reference is None:
            raise ValueError("idk_dpo: needs IDK answers and the reference model")
        forget, parts = dpo_forget_loss(model, ctx.reference, batch.alternate, batch.forget, self.beta)
        parts["forget"] = float(forget.detach())
        total = add_retain(
            self.gamma * forget, parts, model, batch, ctx, self.alpha, self.retain_loss_type, self.compat
        )
        return LossTerms(loss=total, parts=parts)


__all__ = ["IdkDPO"]
