"""UNDIAL: self-distil toward the reference with the forget token's logit lowered (docs/methods.md).

Teacher = the frozen starting model; ``L = gamma * L_f + alpha * NLL(retain)`` with ``L_f`` the mean over
answer positions of :func:`~remnant.train.methods.undial_loss.undial_loss` (``positions="all"``: every
attended position, the reference's unmasked behaviour minus its index-wrap quirk). Defaults beta=10, gamma=1,
alpha=0 (no retain, as in the paper), lr 1e-4 (the reference's UNDIAL override; its README grid: lr {1e-5,
1e-4, 3e-4}, beta {3, 10, 30}). ``compat="openunlearning"`` computes their ``compute_undial_loss`` exactly
(:func:`~remnant.train.methods.undial_loss.undial_loss_openunlearning`; ``positions`` then has no effect); a
KL retain term masks padding (remnant) or averages over all B·T positions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from remnant.errors import ConfigError
from remnant.registry import register
from remnant.train.losses import forward_logits
from remnant.train.methods.base import LossTerms, MethodBatch, StepContext
from remnant.train.methods.retain import ForgetRetainMethod
from remnant.train.methods.undial_loss import undial_loss, undial_loss_openunlearning

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@register("method", "undial", "1")
class UNDIAL(ForgetRetainMethod):
    """Self-distillation on adjusted logits (Dong et al.), reference as teacher; compat: all positions, as theirs."""

    kind = "loss"
    formula = "L = gamma*mean_{t in ans} CE(z_model, softmax(z_ref - beta*onehot(y_t))) + alpha*L_retain (alpha=0: none)"
    source = "docs/methods.md (undial.py, compute_undial_loss, configs/trainer/UNDIAL.yaml)"
    needs_reference = True

    def __init__(
        self,
        *,
        beta: float = 10.0,
        gamma: float = 1.0,
        alpha: float = 0.0,
        retain_loss_type: str = "NLL",
        positions: str = "answer",
        compat: str = "remnant",
        lr: float = 1e-4,
        **common: Any,
    ) -> None:
        super().__init__(lr=lr, **common)
        if positions not in ("answer", "all"):
            raise ConfigError(f"undial: positions must be 'answer' or 'all', not {positions!r}")
        self.beta = beta
        self._set_weights("undial", gamma, alpha, retain_loss_type, compat)
        self.positions = positions

    def loss(self, model: PreTrainedModel, batch: MethodBatch, ctx: StepContext) -> LossTerms:
        if ctx.reference is None:
            raise ValueError("undial: needs the reference model")
        logits = forward_logits(model, batch.forget)
        with torch.no_grad():
            ref_logits = forward_logits(ctx.reference, batch.forget)
        if self.compat == "openunlearning":
            forget = undial_loss_openunlearning(logits, ref_logits, batch.forget["labels"], self.beta)
        else:
            forget = undial_loss(
                logits,
                ref_logits,
                batch.forget["labels"],
                self.beta,
                "all" if self.positions == "all" else "answer",
                attention_mask=batch.forget["attention_mask"],
            )
        parts = {"forget": float(forget.detach())}
        return self._total(forget, parts, model, batch, ctx)


__all__ = ["UNDIAL"]
