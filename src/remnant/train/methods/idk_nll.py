"""IdkNLL: teach the forget questions an "I don't know" answer (docs/methods.md, "methods not in HEAD").

The OpenUnlearning paper's IdkNLL has no trainer at their HEAD; the report specifies it as
``L = gamma * NLL(y_idk | x_f) + alpha * NLL(retain)`` on ``QAwithIdkDataset(return_original=False)``: the forget
question with a refusal drawn at random from the IDK bank each time the item is visited, and nothing pushed
away from the original answer. The bank is :mod:`remnant.train.methods.idk` (versioned, digest recorded).
Defaults gamma = 1, alpha = 1, NLL retain, the common training defaults. ``compat``: the IDK term is the same;
the KL retain term masks padding (remnant) or averages over all B·T positions (OpenUnlearning's GradDiff KL).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from remnant.registry import register
from remnant.train.losses import mean_nll
from remnant.train.methods.base import LossTerms, MethodBatch, StepContext
from remnant.train.methods.idk import IDK_BANK_VERSION, bank_digest, check_idk_bank
from remnant.train.methods.retain import ForgetRetainMethod

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@register("method", "idk_nll", "1")
class IdkNLL(ForgetRetainMethod):
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
        self._set_weights("idk_nll", gamma, alpha, retain_loss_type, compat)
        self.idk_bank = check_idk_bank("idk_nll", idk_bank)
        self.idk_bank_digest = bank_digest()

    def loss(self, model: PreTrainedModel, batch: MethodBatch, ctx: StepContext) -> LossTerms:
        if batch.alternate is None:
            raise ValueError("idk_nll: the batch carries no IDK answers")
        idk = mean_nll(model, batch.alternate)
        parts = {"idk_nll": float(idk.detach())}
        return self._total(idk, parts, model, batch, ctx)


__all__ = ["IdkNLL"]
