"""Gradient-norm membership scores (their ``GradNormAttack``, p = 2; docs/metrics.md).

Per sample: loss = −mean of the labelled tokens' log-probabilities *without the last one* (their
``tokenwise_logprobs`` drops it), its gradient with respect to every parameter, and the score is the **mean over
parameter tensors of each tensor's p-norm** (not one global norm), signed like a loss (higher = less
member-like). Tied parameters count once (``model.parameters()`` deduplicates them, in both).

Differences from theirs, on purpose (docs/metrics.md, "Where numbers can still differ"): eval mode (their
``model.train()`` turns dropout on where a config has it); ``torch.autograd.grad``, so ``.grad`` is left as it
was; a one-token answer scores 0 (theirs feeds NaN to the AUC); each norm in float64 (a float32 reduction over an
embedding's millions of entries is off by up to about 1e-4 relative). With p = 2 a batch runs one forward and one
backward through the activations only (:mod:`remnant.metrics.persample`); a use of a parameter the hooks did not
see sends the run to one backward per sequence."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from remnant.metrics.forward import ScoredSequence, TokenScores, logits_kept, token_scores
from remnant.metrics.persample import LossFn, Unsupported, per_sample_sq_norms
from remnant.models.device import model_device
from remnant.models.grads import grad_required
from remnant.models.prompts import padded

if TYPE_CHECKING:
    from transformers import PreTrainedModel

#: Padded positions per batched backward: the activations kept for the backward grow with it (a 2,048-token
#: MUSE passage is a batch of its own).
TOKENS_PER_BACKWARD = 4096

#: The p-norms their attack accepts.
NORMS = (1.0, 2.0, float("inf"))


def _one_norms(
    model: PreTrainedModel, params: list[torch.nn.Parameter], seq: ScoredSequence, p: float
) -> list[float]:
    """The p-norm of each used parameter's gradient for one sequence, from its own backward (in float64)."""
    n = len(seq.input_ids)
    device = params[0].device
    ids = torch.tensor([seq.input_ids], dtype=torch.long, device=device)
    # the output head (forward and backward) only where the loss reads it
    kwargs = {"use_cache": False, **logits_kept(model, n, seq.label_start)}
    with grad_required(params, True), torch.enable_grad():
        logits = model(input_ids=ids, attention_mask=torch.ones_like(ids), **kwargs).logits
        loss = _batch_losses([seq])(logits, n - logits.shape[1])[0]
        grads = torch.autograd.grad(loss, params, allow_unused=True)
    return [float(g.detach().double().norm(p=p)) for g in grads if g is not None]


def _batch_losses(batch: Sequence[ScoredSequence], readings: Readings | None = None) -> LossFn:
    """Each row's loss: −mean log-probability of its labelled tokens but the last (module docstring); with
    ``readings``, each row's teacher-forced readings are taken from the same logits and appended there."""

    def losses(logits: torch.Tensor, offset: int) -> torch.Tensor:
        # logits[:, j] predicts the token at position offset + j + 1; positions label_start-1 .. n-3 are read.
        rows: list[int] = []
        positions: list[int] = []
        targets: list[int] = []
        for r, seq in enumerate(batch):
            n = len(seq.input_ids)
            if readings is not None:
                with torch.no_grad():
                    readings.scores.append(
                        token_scores(
                            logits[r, seq.label_start - 1 - offset : n - 1 - offset].detach(),
                            torch.tensor(seq.input_ids[seq.label_start :], dtype=torch.long),
                            readings.stats[r],
                        )
                    )
            rows += [r] * (n - 1 - seq.label_start)
            positions += range(seq.label_start - 1 - offset, n - 2 - offset)
            targets += seq.input_ids[seq.label_start : n - 1]
        # One gather of every read position: indexing each row apart made the backward write a zero tensor of
        # the whole batch's logits per row.
        device = logits.device
        at = torch.tensor(rows, dtype=torch.long, device=device)
        logp = torch.log_softmax(
            logits[at, torch.tensor(positions, dtype=torch.long, device=device)].float(), -1
        )
        picked = logp.gather(-1, torch.tensor(targets, dtype=torch.long, device=device)[:, None])[:, 0]
        sums = torch.zeros(len(batch), dtype=picked.dtype, device=device).index_add(0, at, picked)
        counts = torch.bincount(at, minlength=len(batch)).to(picked.dtype)
        return -sums / counts

    return losses


@dataclass
class Readings:
    """Teacher-forced readings taken from the gradient pass's forward, one per row, with their μ_t/σ²_t flags."""

    stats: Sequence[bool]
    scores: list[TokenScores] = field(default_factory=list)


def _batched_norms(
    model: PreTrainedModel, batch: Sequence[ScoredSequence], pad_id: int, readings: Readings | None = None
) -> list[list[float]]:
    """Each sequence's per-parameter 2-norms from one forward and backward (:mod:`remnant.metrics.persample`), laid out
    as the teacher-forced pass lays out a plain batch, so readings taken here are the ones that pass would give."""
    ids, mask = padded([s.input_ids for s in batch], pad_id, "right")  # no real position attends to a pad
    width = ids.shape[1]
    device = model_device(model)
    forward = logits_kept(model, width, min(s.label_start for s in batch))
    losses = _batch_losses(batch, readings)
    table = per_sample_sq_norms(model, ids.to(device), mask.to(device), losses, **forward)
    return [[math.sqrt(v) for v in row] for row in table]


def _scored(seq: ScoredSequence) -> bool:
    return len(seq.input_ids) - seq.label_start >= 2


def _score(norms: list[float]) -> float:
    return math.fsum(norms) / len(norms)


def _batches(sequences: Sequence[ScoredSequence], live: list[int], batch_size: int) -> list[list[int]]:
    """Longest first (a batch's first row sets its width), at most ``batch_size`` rows and the token budget."""
    batches: list[list[int]] = []
    for i in sorted(live, key=lambda i: -len(sequences[i].input_ids)):
        last = batches[-1] if batches else []
        rows = len(last) + 1
        if last and rows <= batch_size and rows * len(sequences[last[0]].input_ids) <= TOKENS_PER_BACKWARD:
            last.append(i)
        else:
            batches.append([i])
    return batches


def _batched_scores(
    model: PreTrainedModel,
    sequences: Sequence[ScoredSequence],
    batch_size: int,
    pad_id: int,
    stats: Sequence[bool] | None,
    progress: bool,
) -> tuple[list[float], dict[int, TokenScores]] | None:
    """p = 2 scores by batches (and each scored sequence's readings when ``stats`` is given), or None where the
    batched path does not apply (:class:`~remnant.metrics.persample.Unsupported`)."""
    from tqdm.auto import tqdm  # type: ignore[import-untyped]

    scores = [0.0] * len(sequences)
    found: dict[int, TokenScores] = {}
    batches = _batches(sequences, [i for i, s in enumerate(sequences) if _scored(s)], batch_size)
    for chunk in tqdm(batches, desc="gradient norms", disable=not progress, leave=False):
        readings = Readings([stats[i] for i in chunk]) if stats is not None else None
        try:
            norms = _batched_norms(model, [sequences[i] for i in chunk], pad_id, readings)
        except Unsupported:
            return None
        for i, row in zip(chunk, norms, strict=True):
            scores[i] = _score(row)
        if readings is not None:
            found.update(zip(chunk, readings.scores, strict=True))
    return scores, found


def gradnorm_pass(
    model: PreTrainedModel,
    sequences: Sequence[ScoredSequence],
    *,
    p: float = 2.0,
    batch_size: int = 1,
    pad_id: int = 0,
    vocab_stats: Sequence[bool] | None = None,
    progress: bool = False,
) -> tuple[list[float], dict[int, TokenScores]]:
    """One score per sequence (module docstring) and, when ``vocab_stats`` flags are given and the batched path ran
    (p = 2, ``batch_size`` > 1, :mod:`remnant.metrics.persample`), the teacher-forced readings of the sequences it
    scored (by index), so the caller need not run them again; otherwise one backward per sequence."""
    from tqdm.auto import tqdm

    if float(p) not in NORMS:
        raise ValueError(f"gradient norm p must be one of 1, 2, inf, not {p!r}")
    if float(p) == 2.0 and batch_size > 1:
        fast = _batched_scores(model, sequences, batch_size, pad_id, vocab_stats, progress)
        if fast is not None:
            return fast
    params = list(model.parameters())
    scores = [
        _score(_one_norms(model, params, s, float(p))) if _scored(s) else 0.0
        for s in tqdm(sequences, desc="gradient norms", disable=not progress, leave=False)
    ]
    return scores, {}


__all__ = ["NORMS", "Readings", "gradnorm_pass"]
