"""IdkNLL: teach the forget questions an "I don't know" answer (docs/methods.md, "methods not in HEAD").

The OpenUnlearning paper's IdkNLL has no trainer at their HEAD; the report specifies it as
``L = gamma * NLL(y_idk | x_f) + alpha * NLL(retain)`` on ``QAwithIdkDataset(return_original=False)``: the forget
question with a refusal drawn at random from the IDK bank each time the item is visited, and nothing pushed
away from the original answer. The bank is :mod:`remnant.train.methods.idk` (versioned, digest recorded).
Defaults gamma = 1, alpha = 1, NLL retain, the common training defaults. ``compat``: the IDK term is the same;
the KL retain term masks padding (remnant) or averages over all B·T positions (OpenUnlearning's GradDiff KL).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from remnant.errors import ConfigError
from remnant.models.prompts import PromptFormat
from remnant.registry import register
from remnant.train.losses import mean_nll
from remnant.train.methods.base import QA, LossTerms, MethodBatch, RemovalMethod, StepContext
from remnant.train.methods.compat import check_compat
from remnant.train.methods.idk import IDK_BANK, IDK_BANK_VERSION, bank_digest
from remnant.train.methods.retain import add_retain, check_retain_type

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


def idk_alternates(forget: Sequence[QA]) -> list[list[str]]:
    """The whole bank for every forget item: the loop draws one per visit from its sampling generator."""
    return [list(IDK_BANK) for _ in forget]


@register("method", "idk_nll", "1")
class IdkNLL(RemovalMethod):
    """Fine-tune the forget questions toward a refusal from the IDK bank, with a retain term (compat: KL only)."""

    kind = "loss"
    formula = "L = gamma*NLL(y_idk|x_f) + alpha*L_retain (NLL or KL); y_idk drawn from the IDK bank per visit"
    source = "docs/methods.md (IdkNLL, OpenUnlearning paper; no trainer at their HEAD)"
    needs_alternates = "idk"

    def __init__(
        self,
        *,
        gamma: float = 1.0,
        alpha: float = 1.0,
        retain_loss_type: str = "NLL",
        compat: str = "remnant",
        idk_bank: str = f"remnant-idk-v{IDK_BANK_VERSION}",
        **common: Any,
    ) -> None:
        super().__init__(**common)
        self.gamma = gamma
        self.alpha = alpha
        self.retain_loss_type = check_retain_type("idk_nll", retain_loss_type)
        self.compat = check_compat("idk_nll", compat)
        if idk_bank != f"remnant-idk-v{IDK_BANK_VERSION}":
            raise ConfigError(f"idk_nll: idk_bank must be remnant-idk-v{IDK_BANK_VERSION} (the bundled bank)")
        self.idk_bank = idk_bank
        self.idk_bank_digest = bank_digest()

    @property
    def needs_reference(self) -> bool:  # type: ignore[override]
        return self.retain_loss_type == "KL"

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
        if batch.alternate is None:
            raise ValueError("idk_nll: the batch carries no IDK answers")
        idk = mean_nll(model, batch.alternate)
        parts = {"idk_nll": float(idk.detach())}
        total = add_retain(
            self.gamma * idk, parts, model, batch, ctx, self.alpha, self.retain_loss_type, self.compat
        )
        return LossTerms(loss=total, parts=parts)


__all__ = ["IdkNLL", "idk_alternates"]
