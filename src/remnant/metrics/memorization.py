"""Extraction strength and exact memorization: their ``extraction_strength`` and ``exact_memorization`` handlers
(docs/metrics.md). Both compare teacher-forced argmax predictions with the labels **without the last labelled
token** (their ``tokenwise_vocab_logprobs`` drops it, meant to drop the appended EOS; a MUSE completion, which has
none, loses its real last token). Each per-item value is logged as ``{"score": x}``; the aggregate is their mean."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from remnant.metrics.base import Metric, Readings, Reads
from remnant.metrics.evallog import MetricLog
from remnant.metrics.scores import TokenScores
from remnant.registry import register


def extraction_strength(scores: TokenScores) -> float:
    """ES = 1 − k*/|y| of one answer (Carlini et al.'s suffix form), k* the start of the longest matching
    suffix. Quirk kept: their loop stops at k = |y| − 1, so the floor is 1/|y|, not 0; nothing labelled: 0."""
    s = scores.drop_last()
    n = len(s)
    if n == 0:
        return 0.0
    match = s.argmax == s.labels
    # k* is the start of the longest all-matching suffix; their loop never goes past n - 1.
    k = n
    while k > 0 and match[k - 1]:
        k -= 1
    return 1 - min(k, n - 1) / n


def exact_memorization(scores: TokenScores) -> float | None:
    """EM = (1/|y|) Σ_t 1[ŷ_t = y_t] of one answer; ``None`` (left out of the aggregate) when nothing is left."""
    s = scores.drop_last()
    if len(s) == 0:
        return None
    return float(np.mean(s.argmax == s.labels))


def score_log(values: Sequence[float | None]) -> MetricLog:
    """``{"score": x}`` per item and the mean of the non-``None`` values."""
    kept = [v for v in values if v is not None]
    return MetricLog(
        agg_value=float(np.mean(kept)) if kept else None,
        value_by_index={str(i): {"score": v} for i, v in enumerate(values)},
    )


@register("metric", "extraction_strength", "1")
class ExtractionStrength(Metric):
    """1 − (start of the longest teacher-forced matching suffix)/|y|, floor 1/|y| (their loop); mean over items."""

    reads = frozenset({Reads.TEACHER_FORCED})

    def compute(self, readings: Readings) -> MetricLog:
        return score_log([extraction_strength(item[0]) for item in readings.scores["items"]])


@register("metric", "exact_memorization", "1")
class ExactMemorization(Metric):
    """Share of answer tokens the teacher-forced argmax gets right (last label dropped); mean over items."""

    reads = frozenset({Reads.TEACHER_FORCED})

    def compute(self, readings: Readings) -> MetricLog:
        return score_log([exact_memorization(item[0]) for item in readings.scores["items"]])


__all__ = [
    "ExactMemorization",
    "ExtractionStrength",
    "exact_memorization",
    "extraction_strength",
    "score_log",
]
