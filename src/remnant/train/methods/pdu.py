"""PDU: logit-margin flattening under a retain-loss constraint, solved primal-dual (docs/methods.md).

OpenUnlearning's ``pdu.py`` (Entesari et al. 2025, "Constrained Entropic Unlearning"). The forget term flattens
the output distribution: ``L_f = mean_t (max_v z_t − mean_v z_t)²`` over the positions whose label is an answer
token — the mask is *not* shifted against the logits, as in the reference, so the positions flattened are those
holding answer tokens (predicting the token after each). The retain NLL (or KL) is held under ``ε``
(``retain_loss_eps``) by a dual variable ``λ`` (starting at ``α``):
``L = γ·L_f + λ·(L_r − ε)``, then ``λ ← max(0, λ + η·(L_r − ε))`` after every micro-batch (the reference's
``compute_loss`` call, so under gradient accumulation several times per optimizer step) once
``dual_warmup_epochs`` epochs have completed. With ``primal_dual=False`` λ stays at α.

Defaults from ``configs/trainer/PDU.yaml``: primal_dual on, η (``dual_step_size``) 1, updates per step, dual
warm-up 5 epochs, γ=1, α=1, NLL retain. ``retain_loss_eps`` is required there (``???``) and here when
``primal_dual`` is on: choose it a little above the starting model's retain loss (their TOFU ``run.sh``: ε=0.3,
α=100, η=5). ``dual_update_upon="epoch"`` (λ updated from the mean retain loss over a fresh pass of the whole
data after each epoch) needs the data at the epoch's end, which a loss hook does not see; it is refused.

λ and the epoch count live in the step context's state, which the loop does not checkpoint: a resumed PDU run
restarts λ at α and the dual warm-up at epoch 0, so it is not bitwise the uninterrupted run. ``compat``: the
forget term is the same; a KL retain term masks padding (remnant) or averages over all B·T positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from remnant.errors import ConfigError
from remnant.models.prompts import IGNORE_INDEX
from remnant.registry import register
from remnant.train.losses import forward_logits, retain_loss
from remnant.train.methods.base import LossTerms, MethodBatch, StepContext
from remnant.train.methods.compat import kl_positions
from remnant.train.methods.retain import ForgetRetainMethod

if TYPE_CHECKING:
    from transformers import PreTrainedModel

_DUAL, _EPOCH, _SEEN = "pdu_dual", "pdu_epoch", "pdu_seen"


def logit_margin_flattening(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``mean over positions with labels != -100 of (max_v z − mean_v z)²`` (mask not shifted, as the reference).

    A batch without answer tokens gives 0 (the reference divides by zero; ``encode_pair`` cannot produce one).
    """
    z = logits.float()
    margin = (z.max(dim=-1).values - z.mean(dim=-1)).pow(2)
    mask = (labels != IGNORE_INDEX).to(margin.dtype)
    return (margin * mask).sum() / mask.sum().clamp(min=1.0)


def completed_epochs(state: dict[str, Any], indices: Sequence[int]) -> int:
    """Epochs completed before this micro-batch, told from the forget indices the loop hands over.

    The loop visits a permutation of every forget item each epoch, so a micro-batch holding an index already
    seen in the current epoch is the first of the next one.
    """
    seen: set[int] = state.setdefault(_SEEN, set())
    if seen.intersection(indices):
        state[_EPOCH] = int(state.get(_EPOCH, 0)) + 1
        seen.clear()
    seen.update(indices)
    return int(state.get(_EPOCH, 0))


@register("method", "pdu", "1")
class PDU(ForgetRetainMethod):
    """Primal-dual unlearning: flatten forget logits, keep the retain loss under eps with a dual variable."""

    kind = "loss"
    formula = (
        "L = gamma*mean_{t in ans} (max_v z_t - mean_v z_t)^2 + lambda*(L_retain - eps); "
        "lambda <- max(0, lambda + eta*(L_retain - eps)) each micro-batch after the dual warm-up, lambda_0 = alpha"
    )
    source = "docs/methods.md (PDU: pdu.py, configs/trainer/PDU.yaml, community/methods/PDU)"

    def __init__(
        self,
        *,
        retain_loss_eps: float | None = None,
        primal_dual: bool = True,
        dual_step_size: float = 1.0,
        dual_update_upon: str = "step",
        dual_warmup_epochs: float = 5,
        gamma: float = 1.0,
        alpha: float = 1.0,
        retain_loss_type: str = "NLL",
        compat: str = "remnant",
        **common: Any,
    ) -> None:
        super().__init__(**common)
        if dual_update_upon == "epoch":
            raise ConfigError(
                "pdu: dual_update_upon='epoch' needs a pass over the data at each epoch's end, which the training "
                "loop does not offer a removal method; use 'step' (OpenUnlearning's default)"
            )
        if dual_update_upon != "step":
            raise ConfigError(f"pdu: dual_update_upon must be 'step', not {dual_update_upon!r}")
        if primal_dual and retain_loss_eps is None:
            raise ConfigError(
                "pdu: retain_loss_eps is required with primal_dual (OpenUnlearning's YAML leaves it ???): set it a "
                "little above the starting model's retain loss (their TOFU run: 0.3)",
                requirement="R23",
            )
        if dual_step_size < 0 or dual_warmup_epochs < 0:
            raise ConfigError("pdu: dual_step_size and dual_warmup_epochs must be >= 0")
        self.retain_loss_eps = retain_loss_eps
        self.primal_dual = primal_dual
        self.dual_step_size = dual_step_size
        self.dual_update_upon = dual_update_upon
        self.dual_warmup_epochs = dual_warmup_epochs
        self._set_weights("pdu", gamma, alpha, retain_loss_type, compat)

    def loss(self, model: PreTrainedModel, batch: MethodBatch, ctx: StepContext) -> LossTerms:
        epoch = completed_epochs(ctx.state, batch.forget_index)
        dual = float(ctx.state.setdefault(_DUAL, float(self.alpha)))
        forget = logit_margin_flattening(forward_logits(model, batch.forget), batch.forget["labels"])
        total = self.gamma * forget
        parts = {"forget": float(forget.detach()), "dual": dual}
        if batch.retain is not None:
            ret = retain_loss(
                model, batch.retain, ctx.reference, self.retain_loss_type, kl_positions(self.compat)
            )
            slack = ret - (self.retain_loss_eps or 0.0)
            total = total + dual * slack
            parts["retain"] = float(ret.detach())
            if self.primal_dual and epoch >= self.dual_warmup_epochs:
                ctx.state[_DUAL] = max(0.0, dual + self.dual_step_size * float(slack.detach()))
        return LossTerms(loss=total, parts=parts)


__all__ = ["PDU", "completed_epochs", "logit_margin_flattening"]
