"""Loss pieces shared by the training loop and the removal methods (docs/methods.md notation).

All work on right-padded collated batches (``remnant.models.prompts.collate``) whose ``labels`` are -100 on the
prompt and padding, so every loss is answer-only. Logits are upcast to fp32 before the softmax so a bf16
autocast forward does not change what is averaged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import torch
import torch.nn.functional as F

from remnant.models.forward_keywords import answer_logits

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def forward_logits(model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The model's logits on a collated batch, upcast to fp32 (``[B, T, V]``)."""
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    logits: torch.Tensor = out.logits
    return logits.float()


def token_nll(model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token NLL of the next token ``[B, T-1]`` (0 off the answer) and the answer mask (float) it is valid on."""
    logits, at = answer_logits(model, batch)
    targets = batch["labels"][:, 1:][at]
    nll = torch.zeros(at.shape, dtype=logits.dtype, device=logits.device)
    nll[at] = F.cross_entropy(logits, targets, reduction="none")
    return nll, at.float()


def sequence_nll(model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """``S(b)``: per-sequence sum of answer-token NLL, ``[B]`` (OpenUnlearning's ``compute_batch_nll``)."""
    nll, _ = token_nll(model, batch)
    return nll.sum(dim=1)


def answer_lengths(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """``|y|``: answer tokens per sequence (float, shape ``[B]``)."""
    return (batch["labels"][:, 1:] != -100).float().sum(dim=1)


def mean_nll(model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """``NLL(b)``: mean cross-entropy over every answer token in the batch (HF ``labels=`` loss)."""
    nll, mask = token_nll(model, batch)
    return nll.sum() / mask.sum().clamp(min=1.0)


def log_ratio(model: PreTrainedModel, reference: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """``r(y|x) = log π(y|x) − log π_ref(y|x)`` over answer tokens, shape ``[B]`` (reference without grad)."""
    with torch.no_grad():
        s_ref = sequence_nll(reference, batch)
    return -(sequence_nll(model, batch) - s_ref)


#: Where the KL retain term is averaged: attended positions (remnant) or every position of the padded batch.
KLPositions = Literal["attended", "all"]


def kl_to_reference(
    model: PreTrainedModel, reference: Any, batch: dict[str, torch.Tensor], over: KLPositions = "attended"
) -> torch.Tensor:
    """KL(p_ref ‖ p_model) of the next-token distributions, averaged over positions.

    ``over="attended"`` averages over positions whose ``attention_mask`` is 1 (prompt and answer, not padding).
    ``over="all"`` divides the sum over every one of the ``B·T`` positions by ``B·T``, padding included: that is
    ``F.kl_div(log p_model, log p_ref, reduction="batchmean", log_target=True)`` on the flattened ``[B·T, V]``
    rows, OpenUnlearning's ``compute_kl_divergence`` (docs/methods.md). The two agree on unpadded batches.
    """
    if over not in ("attended", "all"):
        raise ValueError(f"KL positions must be 'attended' or 'all', not {over!r}")
    logp = F.log_softmax(forward_logits(model, batch), dim=-1)
    with torch.no_grad():
        logq = F.log_softmax(forward_logits(reference, batch), dim=-1)
    kl = (logq.exp() * (logq - logp)).sum(-1)
    if over == "all":
        return kl.mean()
    mask = batch["attention_mask"].float()
    return (kl * mask).sum() / mask.sum().clamp(min=1.0)


def retain_loss(
    model: PreTrainedModel,
    batch: dict[str, torch.Tensor],
    reference: Any | None = None,
    kind: Literal["NLL", "KL"] = "NLL",
    kl_over: KLPositions = "attended",
) -> torch.Tensor:
    """Retain term: NLL, or KL(p_ref ‖ p_model) averaged as ``kl_over`` says (:func:`kl_to_reference`)."""
    if kind == "NLL":
        return mean_nll(model, batch)
    if kind != "KL":
        raise ValueError(f"retain loss must be 'NLL' or 'KL', not {kind!r}")
    if reference is None:
        raise ValueError("retain loss 'KL' needs the reference model")
    return kl_to_reference(model, reference, batch, kl_over)


def reweighted_ascent(
    model: PreTrainedModel, batch: dict[str, torch.Tensor], weight: Callable[[torch.Tensor], torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """``−mean_{t in ans} w_t·ℓ_t`` with ``w_t = weight(p_t)``, ``p_t = exp(−ℓ_t)``, weights detached.

    The mean runs over every answer token of the batch (a token mean, not a mean of sequence means), as
    OpenUnlearning's ``compute_wga_loss`` / ``compute_satimp_loss``. Returns the loss and the mean weight (for
    logging). A batch without answer tokens gives 0 (the reference's empty mean is NaN; ``encode_pair`` always
    appends an end token, so it cannot arise here).
    """
    nll, mask = token_nll(model, batch)
    w = weight(torch.exp(-nll.detach())).detach()
    count = mask.sum().clamp(min=1.0)
    loss = -(w * nll * mask).sum() / count
    return loss, (w * mask).sum() / count


__all__ = [
    "KLPositions",
    "answer_lengths",
    "forward_logits",
    "kl_to_reference",
    "log_ratio",
    "mean_nll",
    "retain_loss",
    "reweighted_ascent",
    "sequence_nll",
    "token_nll",
]
