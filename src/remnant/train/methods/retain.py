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
from remnant.train.losses import retain_loss
from remnant.train.methods.base import MethodBatch, StepContext
from remnant.train.methods.compat import Compat, kl_positions

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


__all__ = ["RetainLossType", "add_retain", "check_retain_type"]
