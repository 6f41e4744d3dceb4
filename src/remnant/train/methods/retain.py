"""The retain term shared by every method that has one (docs/methods.md, GradDiff's retain loss).

``retain_loss_type`` is ``"NLL"`` (answer NLL on a retain item) or ``"KL"`` (KL(p_ref || p_model)); KL needs the
frozen reference, so a method that otherwise works without one asks for it only then. Unknown values are refused
rather than mapped to a default (a misspelt setting must not train something else, R15). Under
``compat="openunlearning"`` the KL term averages over every position of the padded batch, as their
``compute_kl_divergence`` does (:mod:`remnant.train.methods.compat`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, cast

import torch

from remnant.errors import ConfigError
from remnant.train.losses import retain_loss, reweighted_ascent
from remnant.train.methods.base import LossTerms, MethodBatch, RemovalMethod, StepContext
from remnant.train.methods.compat import Compat, check_compat, kl_positions

if TYPE_CHECKING:
    from transformers import PreTrainedModel

RetainLossType = Literal["NLL", "KL"]


def check_retain_type(method: str, value: str) -> RetainLossType:
    """``value`` as a retain-loss type, or a ConfigError naming the method and parameter."""
    if value not in ("NLL", "KL"):
        raise ConfigError(f"method {method!r}: retain_loss_type must be 'NLL' or 'KL', not {value!r}")
    return cast(RetainLossType, value)


def add_retain(
    total: torch.Tensor,
    parts: dict[str, float],
    model: PreTrainedModel,
    batch: MethodBatch,
    ctx: StepContext,
    alpha: float,
    kind: RetainLossType,
    compat: Compat = "remnant",
) -> torch.Tensor:
    """``total + alpha * L_retain`` (no forward pass at all when ``alpha`` is 0 or there is no retain set)."""
    if batch.retain is None or not alpha:
        return total
    ret = retain_loss(model, batch.retain, ctx.reference, kind, kl_positions(compat))
    parts["retain"] = float(ret.detach())
    return total + alpha * ret


class ForgetRetainMethod(RemovalMethod):
    """A loss method of the form ``L = gamma * L_f + alpha * L_retain`` (GradDiff's retain loss, docs/methods.md).

    One place checks the four parameters such a method records (R23) and forms its total, so no method can
    weigh or mask its retain term differently from the others.
    """

    gamma: float
    alpha: float
    retain_loss_type: RetainLossType
    compat: Compat

    def _set_weights(
        self, method: str, gamma: float, alpha: float, retain_loss_type: str, compat: str
    ) -> None:
        self.gamma = gamma
        self.alpha = alpha
        self.retain_loss_type = check_retain_type(method, retain_loss_type)
        self.compat = check_compat(method, compat)
        if not type(self).needs_reference:  # set on the class (NPO, UNDIAL, DPO)
            self.needs_reference = self.retain_loss_type == "KL"

    def _total(
        self,
        forget: torch.Tensor,
        parts: dict[str, float],
        model: PreTrainedModel,
        batch: MethodBatch,
        ctx: StepContext,
    ) -> LossTerms:
        """``gamma * forget`` plus the weighted retain term, with ``parts`` (gaining ``retain``) logged."""
        total = add_retain(
            self.gamma * forget, parts, model, batch, ctx, self.alpha, self.retain_loss_type, self.compat
        )
        return LossTerms(loss=total, parts=parts)


class ReweightedAscent(ForgetRetainMethod):
    """WGA and SatImp: ``gamma * reweighted_ascent(forget, _weight) + alpha * L_retain`` (their weights differ)."""

    def _weight(self, p: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def loss(self, model: PreTrainedModel, batch: MethodBatch, ctx: StepContext) -> LossTerms:
        forget, mean_weight = reweighted_ascent(model, batch.forget, self._weight)
        parts = {"forget": float(forget.detach()), "mean_weight": float(mean_weight)}
        return self._total(forget, parts, model, batch, ctx)


__all__ = ["ForgetRetainMethod", "ReweightedAscent", "RetainLossType", "add_retain", "check_retain_type"]
