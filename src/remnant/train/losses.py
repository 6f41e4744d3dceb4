"""Loss pieces shared by the training loop and the removal methods (openunlearning.md §2 notation).

All work on right-padded collated batches (``remnant.models.prompts.collate``) whose ``labels`` are -100 on the
prompt and padding, so every loss is answer-only. Logits are upcast to fp32 before the softmax so a bf16
autocast forward does not change what is averaged.

* ``S(b)`` :func:`sequence_nll` — per-sequence *sum* NLL over answer tokens (``compute_batch_nll``);
* ``NLL(b)`` :func:`mean_nll` — mean token cross-entropy over all answer tokens of the batch (HF's loss);
* ``r(y|x)`` :func:`log_ratio` — ``−(S_model − S_ref) = log π(y|x) − log π_ref(y|x)``;
* :func:`retain_loss` — NLL on the retain batch, or KL(p_ref ‖ p_model) over attended positions.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
import torch.nn.functional as F


def _forward_logits(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    logits: torch.Tensor = out.logits
    return logits.float()


def token_nll(model: Any, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token NLL of the next token ``[B, T-1]`` and the answer mask (float) it is valid on."""
    logits = _forward_logits(model, batch)[:, :-1]
    labels = batch["labels"][:, 1:]
    mask = (labels != -100).float()
    safe = labels.clamp(min=0)
    # flat (N, V) rows: a transposed (B, V, T) view makes the softmax stride across the vocabulary (slow)
    flat = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), safe.reshape(-1), reduction="none")
    return flat.view(labels.shape) * mask, mask


def sequence_nll(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """``S(b)``: per-sequence sum of answer-token NLL, shape ``[B]``."""
    nll, _ = token_nll(model, batch)
    return nll.sum(dim=1)


def answer_lengths(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """``|y|``: answer tokens per sequence (float, shape ``[B]``)."""
    return (batch["labels"][:, 1:] != -100).float().sum(dim=1)


def mean_nll(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """``NLL(b)``: mean cross-entropy over every answer token in the batch (HF ``labels=`` loss)."""
    nll, mask = token_nll(model, batch)
    return nll.sum() / mask.sum().clamp(min=1.0)


def log_ratio(model: Any, reference: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """``r(y|x) = log π(y|x) − log π_ref(y|x)`` over answer tokens, shape ``[B]`` (reference without grad)."""
    with torch.no_grad():
        s_ref = sequence_nll(reference, batch)
    return -(sequence_nll(model, batch) - s_ref)


def retain_loss(
    model: Any,
    batch: dict[str, torch.Tensor],
    reference: Any | None = None,
    kind: Literal["NLL", "KL"] = "NLL",
) -> torch.Tensor:
    """Retain term: NLL, or KL(p_ref ‖ p_model) averaged over attended positions.

    OpenUnlearning's KL averages over all B·T positions including padding (openunlearning.md §2); here padding
    is masked, which differs only on padded batches.
    """
    if kind == "NLL":
        return mean_nll(model, batch)
    if kind != "KL":
        raise ValueError(f"retain loss must be 'NLL' or 'KL', not {kind!r}")
    if reference is None:
        raise ValueError("retain loss 'KL' needs the reference model")
    logp = F.log_softmax(_forward_logits(model, batch), dim=-1)
    with torch.no_grad():
        logq = F.log_softmax(_forward_logits(reference, batch), dim=-1)
    kl = (logq.exp() * (logq - logp)).sum(-1)
    mask = batch["attention_mask"].float()
    return (kl * mask).sum() / mask.sum().clamp(min=1.0)


__all__ = ["answer_lengths", "log_ratio", "mean_nll", "retain_loss", "sequence_nll", "token_nll"]
