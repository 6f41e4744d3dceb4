"""CE-U: cross-entropy toward the model's own distribution with the true token removed (docs/methods.md).

OpenUnlearning's ``ceu.py`` (Yang et al. 2025, arXiv:2503.01224): at each answer position the target is
``softmax(stopgrad(z))`` with the true next token's logit set to ``−inf``, and ``L = mean_t CE(z_t, target_t)``
over answer positions — the true token's probability is driven to zero while the rest of the distribution is
kept. The first ``ignore_first_n_answer_tokens`` answer tokens are not targets (the paper's footnote: the first
answer token is often a template token). No retain term and no reference model; defaults
``configs/trainer/CEU.yaml`` (``ignore_first_n_answer_tokens=1``) and the common training defaults.
``compat``: no difference (an all-prompt batch gives 0 here and NaN there; ``encode_pair`` cannot produce one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from remnant.errors import ConfigError
from remnant.models.prompts import IGNORE_INDEX
from remnant.registry import register
from remnant.train.losses import forward_logits
from remnant.train.methods.base import LossTerms, MethodBatch, RemovalMethod, StepContext
from remnant.train.methods.compat import check_compat

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def ceu_loss(
    logits: torch.Tensor, labels: torch.Tensor, ignore_first_n_answer_tokens: int = 1
) -> torch.Tensor:
    """Mean over kept answer positions of ``CE(z_t, softmax(stopgrad(z_t) with z_t[y_t] = −inf))``.

    ``logits`` is ``[B, T, V]`` and ``labels`` ``[B, T]`` aligned with the inputs (the shift is applied here). The
    first ``n`` answer tokens of each sequence (by label position) are dropped before the shift, as the reference
    does.
    """
    valid = labels != IGNORE_INDEX
    first_n = (valid.cumsum(dim=-1) <= ignore_first_n_answer_tokens) & valid
    next_labels = labels.masked_fill(first_n, IGNORE_INDEX)[:, 1:]
    keep = next_labels != IGNORE_INDEX
    z = logits[:, :-1, :].float()[keep]
    y = next_labels[keep]
    target_logits = z.detach().scatter(-1, y.unsqueeze(-1), float("-inf"))
    target = F.softmax(target_logits, dim=-1)
    per_position = -(target * F.log_softmax(z, dim=-1)).sum(dim=-1)
    return per_position.sum() / max(int(y.numel()), 1)


@register("method", "ceu", "1")
class CEU(RemovalMethod):
    """Cross-entropy unlearning: push the true token's probability to zero, keep the rest (compat: same loss)."""

    kind = "loss"
    formula = "L = mean_{t in ans, t > n} CE(z_t, softmax(stopgrad(z_t) with z_t[y_t] = -inf))"
    source = "docs/methods.md (CE-U: ceu.py, configs/trainer/CEU.yaml)"

    def __init__(
        self, *, ignore_first_n_answer_tokens: int = 1, compat: str = "remnant", **common: Any
    ) -> None:
        super().__init__(**common)
        n = ignore_first_n_answer_tokens
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ConfigError(
                f"ceu: ignore_first_n_answer_tokens must be an integer >= 0, not {ignore_first_n_answer_tokens!r}"
            )
        self.ignore_first_n_answer_tokens = n
        self.compat = check_compat("ceu", compat)

    def loss(self, model: PreTrainedModel, batch: MethodBatch, ctx: StepContext) -> LossTerms:
        logits = forward_logits(model, batch.forget)
        forget = ceu_loss(logits, batch.forget["labels"], self.ignore_first_n_answer_tokens)
        return LossTerms(loss=forget, parts={"forget": float(forget.detach())})


__all__ = ["CEU", "ceu_loss"]
