"""The one teacher-forced pass every log-probability metric reads (docs/metrics.md, "One pass, shared": theirs runs
one per metric): per sequence, each labelled token's log-probability, the argmax there and, only when asked, the
vocabulary statistics min-k++ needs (μ_t, σ²_t, row by row so the float32 B×T×V tensor is never kept).

Sequences are sorted longest first (memory peaks on the first batch), right-padded, with the attention mask built
from the lengths (never from ``pad == eos``); log-softmax is float32 from the model's logits, so bf16 models are
safe. Sequences sharing a prompt run it once, with their answers' common start: its cache is copied to each
member's row and only the rest of each member runs, at its true positions (the tests hold it to the naive pass at
1e-5). Sequences that need the vocabulary statistics always go in plain batches, whose rows equal a one-sequence
forward's: min-k++ divides by √σ²_t, a small difference of large sums the shared path's rounding would move."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from remnant.metrics.scores import FloatArray, IntArray, TokenScores
from remnant.models.device import model_device
from remnant.models.forward_keywords import cache_kwarg, keep_last_logits, output_cache
from remnant.models.prompts import padded

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@dataclass(frozen=True)
class ScoredSequence:
    """One sequence to score: its ids, and the first labelled position (≥ 1: position 0 has no prediction)."""

    input_ids: tuple[int, ...]
    label_start: int

    def __post_init__(self) -> None:
        if not 1 <= self.label_start <= len(self.input_ids):
            raise ValueError(f"label_start {self.label_start} outside [1, {len(self.input_ids)}]")


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


def logits_kept(model: PreTrainedModel, width: int, first_label: int) -> dict[str, int]:
    """The model's ``logits_to_keep`` keyword, where it takes one: only the logits from the one predicting position
    ``first_label`` of a ``width``-wide batch onward are projected to the vocabulary."""
    return keep_last_logits(model, width - (first_label - 1))


def token_scores(logits: torch.Tensor, labels: torch.Tensor, vocab_stats: bool) -> TokenScores:
    """One sequence's readings from the logits that predict its ``labels`` (one row of logits per label)."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    labels = labels.to(logp.device)
    token_lp = logp.gather(-1, labels[:, None])[:, 0]
    mu = var = None
    if vocab_stats:
        mu_t, var_t = _vocab_stats(logp)
        mu, var = _floats(mu_t), _floats(var_t)
    return TokenScores(
        labels=_ints(labels), logprobs=_floats(token_lp), argmax=_ints(logp.argmax(-1)), mu=mu, var=var
    )


def _score_batch(
    model: PreTrainedModel, batch: Sequence[ScoredSequence], stats: Sequence[bool], pad_id: int
) -> list[TokenScores]:
    ids, mask = padded([s.input_ids for s in batch], pad_id, "right")
    width = ids.shape[1]
    device = model_device(model)
    kwargs = {"use_cache": False, **logits_kept(model, width, min(s.label_start for s in batch))}
    with torch.inference_mode():
        logits = model(input_ids=ids.to(device), attention_mask=mask.to(device), **kwargs).logits
        offset = width - logits.shape[1]  # logits[:, j] predicts the token at position offset + j + 1
        return [
            token_scores(
                logits[r, s.label_start - 1 - offset : len(s.input_ids) - 1 - offset],
                ids[r, s.label_start : len(s.input_ids)],
                stats[r],
            )
            for r, s in enumerate(batch)
        ]


def _prefix(s: ScoredSequence) -> tuple[int, ...]:
    """The ids before the first position whose logits are read (shared by a question's answers)."""
    return s.input_ids[: s.label_start - 1]


def _common_start(group: Sequence[ScoredSequence]) -> int:
    """How many leading ids every member of a group holds, short of each member's last: the prompt and the
    answers' common start ("X grew up in the town of" before each perturbed town)."""
    ids = [s.input_ids for s in group]
    n = min(len(x) for x in ids) - 1
    for j in range(len(_prefix(group[0])), n):
        if any(x[j] != ids[0][j] for x in ids):
            return j
    return n


def _score_shared(
    model: PreTrainedModel, groups: Sequence[Sequence[ScoredSequence]], pad_id: int, cache_name: str
) -> list[list[TokenScores]]:
    """Groups of sequences with one prefix each, extended by their answers' common start: the prefixes in one
    forward (right-padded; the logits of their answer positions read once for all members), their cache copied to
    every member's row, then the members' continuations in one forward at positions prefix length + j."""
    shared = [_common_start(g) for g in groups]
    first = [g[0].label_start - 1 for g in groups]  # the first position whose logits are read
    owner = [gi for gi, g in enumerate(groups) for _ in g]
    members = [s for g in groups for s in g]
    conts = [s.input_ids[shared[gi] :] for gi, s in zip(owner, members, strict=True)]
    pre_ids, pre_mask = padded(
        [g[0].input_ids[:n] for g, n in zip(groups, shared, strict=True)], pad_id, "right"
    )
    ids, mask = padded(conts, pad_id, "right")
    starts = torch.tensor([shared[gi] for gi in owner], dtype=torch.long)
    positions = starts[:, None] + torch.arange(ids.shape[1], dtype=torch.long)[None, :]
    device = model_device(model)
    width = pre_ids.shape[1]
    keep = keep_last_logits(model, max(1, width - min(first)))
    with torch.inference_mode():
        out = model(input_ids=pre_ids.to(device), attention_mask=pre_mask.to(device), use_cache=True, **keep)
        cache: Any = output_cache(out)
        if not hasattr(cache, "batch_select_indices"):  # a legacy tuple cache: score these groups plainly
            return [_score_batch(model, g, [False] * len(g), pad_id) for g in groups]
        offset = width - out.logits.shape[1]  # out.logits[:, j] is the prediction at position offset + j
        pre_logits = [out.logits[gi, first[gi] - offset : shared[gi] - offset] for gi in range(len(groups))]
        cache.batch_select_indices(torch.tensor(owner, dtype=torch.long, device=device))
        logits = model(
            input_ids=ids.to(device),
            attention_mask=torch.cat([pre_mask[owner], mask], dim=1).to(device),
            position_ids=positions.to(device),
            use_cache=True,
            **{cache_name: cache},
        ).logits
        flat = [
            token_scores(
                torch.cat([pre_logits[gi], logits[r, : len(c) - 1]]),
                torch.tensor(s.input_ids[s.label_start :], dtype=torch.long),
                False,
            )
            for r, (gi, s, c) in enumerate(zip(owner, members, conts, strict=True))
        ]
    out_groups, at = [], 0
    for g in groups:
        out_groups.append(flat[at : at + len(g)])
        at += len(g)
    return out_groups


def _plan_shared(
    sequences: Sequence[ScoredSequence], candidates: Sequence[int], batch_size: int
) -> tuple[list[list[list[int]]], list[int]]:
    """Batches of prefix groups (each a list of sequence indices; at most ``batch_size`` rows per batch, longest
    prefixes first) for the ``candidates`` that share a non-empty prefix with another, and the candidates left over."""
    by_prefix: dict[tuple[int, ...], list[int]] = {}
    for i in candidates:
        by_prefix.setdefault(_prefix(sequences[i]), []).append(i)
    groups: list[list[int]] = []
    rest: list[int] = []
    for prefix, members in by_prefix.items():
        for k in range(0, len(members), batch_size):
            chunk = members[k : k + batch_size]
            if prefix and len(chunk) > 1:
                groups.append(chunk)
            else:  # nothing to share: a lone sequence costs the same in a plain batch
                rest.extend(chunk)
    groups.sort(key=lambda g: -_common_start([sequences[i] for i in g]))  # similar prefix widths together
    batches: list[list[list[int]]] = []
    rows = 0
    for g in groups:
        if not batches or rows + len(g) > batch_size:
            batches.append([])
            rows = 0
        batches[-1].append(g)
        rows += len(g)
    return batches, rest


def teacher_forced_pass(
    model: PreTrainedModel,
    sequences: Sequence[ScoredSequence],
    *,
    batch_size: int,
    vocab_stats: bool | Sequence[bool] = False,
    pad_id: int = 0,
    progress: bool = False,
    desc: str = "teacher-forced pass",
) -> list[TokenScores]:
    """Score every sequence (returned in input order); ``pad_id`` only fills padding the mask hides. ``vocab_stats``:
    μ_t and σ²_t for every sequence (True), or one flag per sequence."""
    from tqdm.auto import tqdm  # type: ignore[import-untyped]

    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    stats = [vocab_stats] * len(sequences) if isinstance(vocab_stats, bool) else list(vocab_stats)
    if len(stats) != len(sequences):
        raise ValueError(f"{len(stats)} vocab_stats flags for {len(sequences)} sequences")
    results: list[TokenScores | None] = [None] * len(sequences)
    cache_name = cache_kwarg(model)
    # sequences that need μ_t and σ²_t stay in plain batches (module docstring)
    candidates = [i for i in range(len(sequences)) if not stats[i]]
    shared, rest = _plan_shared(sequences, candidates, batch_size) if cache_name else ([], candidates)
    order = sorted(
        [*rest, *(i for i in range(len(sequences)) if stats[i])], key=lambda i: -len(sequences[i].input_ids)
    )
    plain = [order[k : k + batch_size] for k in range(0, len(order), batch_size)]
    with tqdm(total=len(shared) + len(plain), desc=desc, disable=not progress, leave=False) as bar:
        for groups in shared:
            scored = _score_shared(
                model, [[sequences[i] for i in g] for g in groups], pad_id, str(cache_name)
            )
            for g, group_scores in zip(groups, scored, strict=True):
                for i, scores in zip(g, group_scores, strict=True):
                    results[i] = scores
            bar.update(1)
        for chunk in plain:
            batch = [sequences[i] for i in chunk]
            for i, scores in zip(
                chunk, _score_batch(model, batch, [stats[i] for i in chunk], pad_id), strict=True
            ):
                results[i] = scores
            bar.update(1)
    done = [r for r in results if r is not None]
    if len(done) != len(sequences):  # every index is filled by construction; this guards the bookkeeping
        raise RuntimeError("teacher-forced pass lost a sequence")
    return done


__all__ = [
    "ScoredSequence",
    "TokenScores",
    "teacher_forced_pass",
    "token_scores",
]
