"""UNDIAL's self-distillation loss as a pure tensor function (docs/methods.md, ``compute_undial_loss``).

The teacher is the frozen reference with its logit of the token that actually comes next lowered by ``beta``,
``q = softmax(z_ref - beta * onehot(y_t))``; the student is trained by cross-entropy toward ``q``, so the
forget token's probability falls while the rest of the teacher's distribution is kept. Which positions are
averaged, and the reference's own unmasked arithmetic (a defect docs/methods.md lists), are
:func:`undial_loss` and :func:`undial_loss_openunlearning`.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F

from remnant.models.prompts import IGNORE_INDEX

UndialPositions = Literal["answer", "all"]


def undial_targets(ref_logits: torch.Tensor, next_labels: torch.Tensor, beta: float) -> torch.Tensor:
    """``softmax(z_ref - beta * onehot(y))`` per position; positions whose label is ``-100`` get no reduction.

    ``ref_logits`` is ``[B, T, V]`` and ``next_labels`` ``[B, T]`` (already shifted: the token each position
    predicts).
    """
    z = ref_logits.float()
    valid = next_labels != IGNORE_INDEX
    index = next_labels.clamp(min=0).unsqueeze(-1)
    penalty = torch.zeros_like(z).scatter_(-1, index, beta)
    penalty = penalty * valid.unsqueeze(-1).to(z.dtype)
    return F.softmax(z - penalty, dim=-1)


def undial_loss(
    logits: torch.Tensor,
    ref_logits: torch.Tensor,
    labels: torch.Tensor,
    beta: float,
    positions: UndialPositions = "answer",
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean cross-entropy of the student's logits against the adjusted teacher distribution.

    ``logits``/``ref_logits`` are ``[B, T, V]``, ``labels`` ``[B, T]`` aligned with the inputs (the shift is
    applied here). With ``positions="answer"`` the mean runs over answer positions; with ``"all"`` over every
    position whose next input token is real (``attention_mask``; all positions when no mask is given), with
    the reduction only where a label exists: pure self-distillation elsewhere, as the reference intends there.
    """
    if positions not in ("answer", "all"):
        raise ValueError(f"positions must be 'answer' or 'all', got {positions!r}")
    student = logits[:, :-1, :].float()
    teacher = ref_logits[:, :-1, :]
    next_labels = labels[:, 1:]
    q = undial_targets(teacher, next_labels, beta)
    per_position = -(q * F.log_softmax(student, dim=-1)).sum(dim=-1)
    if positions == "answer":
        keep = next_labels != IGNORE_INDEX
    elif attention_mask is not None:
        keep = attention_mask[:, 1:].bool()
    else:
        keep = torch.ones_like(next_labels, dtype=torch.bool)
    k = keep.to(per_position.dtype)
    return (per_position * k).sum() / k.sum().clamp(min=1.0)


def undial_loss_openunlearning(
    logits: torch.Tensor, ref_logits: torch.Tensor, labels: torch.Tensor, beta: float
) -> torch.Tensor:
    """``compute_undial_loss`` as coded: the mean over all ``B x (T-1)`` positions, padding included.

    The one-hot is written at ``labels[t+1]`` taken as a vocabulary index, so a ``-100`` label lowers index
    ``V - 100`` (negative indices wrap), and positions after the sequence's end are averaged in like any other.
    A vocabulary under 100 tokens cannot hold index ``-100``; the reference fails there, and so does this.
    """
    student = logits[:, :-1, :].float()
    teacher = ref_logits[:, :-1, :].float()
    next_labels = labels[:, 1:]
    vocab = teacher.shape[-1]
    if bool((next_labels < -vocab).any()) or bool((next_labels >= vocab).any()):
        raise ValueError(
            f"a label is out of range for a vocabulary of {vocab} (the reference fails here too)"
        )
    index = torch.remainder(next_labels, vocab).unsqueeze(-1)  # Python-style wrap of negative indices
    penalty = torch.zeros_like(teacher).scatter_(-1, index, beta)
    q = F.softmax(teacher - penalty, dim=-1)
    return (-(q * F.log_softmax(student, dim=-1)).sum(dim=-1)).mean()


__all__ = ["UndialPositions", "undial_loss", "undial_loss_openunlearning", "undial_targets"]
