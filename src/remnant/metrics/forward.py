"""The one teacher-forced pass every log-probability metric reads (openunlearning.md §7: theirs runs one per metric).

Given (prompt+answer ids, first labelled position) sequences, :func:`teacher_forced_pass` returns, per sequence,
the log-probability of each labelled token, the argmax prediction at each labelled position, and — only when asked
— the per-position vocabulary statistics min-k++ needs (μ_t, σ²_t), computed row by row so the float32 B×T×V
tensor is never kept. Forget Prob, truth ratio, ES, EM, LOSS, zlib, min-k and min-k++ all read these.

Batching: sequences are sorted by length (longest first, so memory peaks on the first batch), right-padded to the
longest in the batch, with an explicit attention mask built from the lengths (never from ``pad == eos``; their
collator masks every in-sequence token equal to the pad id, openunlearning.md §6.2). Where the model accepts
``logits_to_keep``, only the positions from the batch's earliest label onward are projected to the vocabulary.
Log-softmax is computed in float32 from the model's logits, so bf16 models are safe.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from remnant.metrics.scores import FloatArray, IntArray, TokenScores


@dataclass(frozen=True)
class ScoredSequence:
    """One sequence to score: its ids, and the first labelled position (≥ 1: position 0 has no prediction)."""

    input_ids: tuple[int, ...]
    label_start: int

    def __post_init__(self) -> None:
        if not 1 <= self.label_start <= len(self.input_ids):
            raise ValueError(f"label_start {self.label_start} outside [1, {len(self.input_ids)}]")


def _device(model: Any) -> torch.device:
    device: torch.device = next(model.parameters()).device
    return device


def _keep_kwarg(model: Any) -> str | None:
    params = inspect.signature(model.forward).parameters
    for name in ("logits_to_keep", "num_logits_to_keep"):
        if name in params:
            return name
    return None


def _vocab_stats(logp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """μ_t and σ²_t of log p under p, by their formula Σ p (log p)² − μ², summed in float64: on a flat
    distribution μ² is ~(log V)² while σ² is tiny, and in float32 the subtraction keeps few of σ²'s digits
    (min-k++ divides by √σ²). One row of positions at a time, so the float64 copy is L×V, never B×T×V."""
    lp = logp.double()
    p = lp.exp()
    mu = (p * lp).sum(-1)
    return mu, (p * lp.square()).sum(-1) - mu.square()


def _floats(t: torch.Tensor) -> FloatArray:
    return np.asarray(t.detach().to("cpu", torch.float64).numpy(), dtype=np.float64)


def _ints(t: torch.Tensor) -> IntArray:
    return np.asarray(t.detach().to("cpu", torch.int64).numpy(), dtype=np.int64)


def _score_batch(
    model: Any, batch: Sequence[ScoredSequence], vocab_stats: bool, pad_id: int
) -> list[TokenScores]:
    width = max(len(s.input_ids) for s in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for r, s in enumerate(batch):
        ids[r, : len(s.input_ids)] = torch.tensor(s.input_ids, dtype=torch.long)
        mask[r, : len(s.input_ids)] = 1
    device = _device(model)
    kwargs: dict[str, Any] = {"use_cache": False}
    keep_name = _keep_kwarg(model)
    if keep_name is not None:
        kwargs[keep_name] = width - (min(s.label_start for s in batch) - 1)
    with torch.inference_mode():
        logits = model(input_ids=ids.to(device), attention_mask=mask.to(device), **kwargs).logits
        offset = width - logits.shape[1]  # logits[:, j] predicts the token at position offset + j + 1
        out = []
        for r, s in enumerate(batch):
            n = len(s.input_ids)
            logp = torch.log_softmax(logits[r, s.label_start - 1 - offset : n - 1 - offset].float(), dim=-1)
            labels = ids[r, s.label_start : n].to(logp.device)
            token_lp = logp.gather(-1, labels[:, None])[:, 0]
            mu = var = None
            if vocab_stats:
                mu_t, var_t = _vocab_stats(logp)
                mu, var = _floats(mu_t), _floats(var_t)
            out.append(
                TokenScores(
                    labels=_ints(labels),
                    logprobs=_floats(token_lp),
                    argmax=_ints(logp.argmax(-1)),
                    mu=mu,
                    var=var,
                )
            )
    return out


def teacher_forced_pass(
    model: Any,
    sequences: Sequence[ScoredSequence],
    *,
    batch_size: int,
    vocab_stats: bool = False,
    pad_id: int = 0,
    progress: bool = False,
    desc: str = "teacher-forced pass",
) -> list[TokenScores]:
    """Score every sequence (returned in input order); ``pad_id`` only fills padding the mask hides."""
    from tqdm.auto import tqdm  # type: ignore[import-untyped]

    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    order = sorted(range(len(sequences)), key=lambda i: -len(sequences[i].input_ids))
    results: list[TokenScores | None] = [None] * len(sequences)
    starts = range(0, len(order), batch_size)
    for start in tqdm(starts, desc=desc, disable=not progress, leave=False):
        chunk = order[start : start + batch_size]
        scored = _score_batch(model, [sequences[i] for i in chunk], vocab_stats, pad_id)
        for i, scores in zip(chunk, scored, strict=True):
            results[i] = scores
    done = [r for r in results if r is not None]
    if len(done) != len(sequences):  # every index is filled by construction; this guards the bookkeeping
        raise RuntimeError("teacher-forced pass lost a sequence")
    return done


__all__ = ["ScoredSequence", "teacher_forced_pass"]
