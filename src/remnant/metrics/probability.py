"""Answer probability (``*_Q_A_Prob``, ``*_PARA_Prob``, ``*_PERT_Prob``) and its normalised-over-options variant
(``ra_/wf_Q_A_Prob_normalised``): their ``probability`` and ``probability_w_options`` handlers (docs/metrics.md).

Per answer ``prob`` = exp(−``avg_loss``) over the labelled tokens **including the appended EOS** (TOFU's
P(a|q)^(1/|a|)); several answers per item give lists, and the aggregate is the mean over items of the mean over
answers. An item with nothing labelled (their 0/0 → NaN) is logged ``None`` and left out of the aggregate, which
their ``is not None`` filter meant to do."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from remnant.metrics.base import Metric, Readings, Reads
from remnant.metrics.evallog import MetricLog
from remnant.metrics.scores import TokenScores
from remnant.registry import register


def _finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


def probability_log(items: Sequence[Sequence[TokenScores]], *, multi: bool) -> MetricLog:
    """The ``probability`` entry for items of one answer (``multi=False``) or several (``multi=True``)."""
    by_index: dict[str, dict[str, object]] = {}
    item_means: list[float] = []
    for i, answers in enumerate(items):
        if not multi and len(answers) != 1:
            raise ValueError("a single-answer metric needs exactly one answer per item")
        losses = [a.avg_loss for a in answers]
        probs = [math.exp(-x) if math.isfinite(x) else math.nan for x in losses]
        if multi:
            by_index[str(i)] = {
                "prob": [_finite_or_none(p) for p in probs],
                "avg_loss": [_finite_or_none(x) for x in losses],
            }
        else:
            by_index[str(i)] = {"prob": _finite_or_none(probs[0]), "avg_loss": _finite_or_none(losses[0])}
        if all(math.isfinite(p) for p in probs):
            item_means.append(float(np.mean(probs)))
    agg = float(np.mean(item_means)) if item_means else None
    return MetricLog(agg_value=agg, value_by_index=by_index)


def _probs(log: MetricLog, name: str) -> dict[str, Any]:
    if log.value_by_index is None:
        raise ValueError(f"{name} has no per-item values")
    return {k: v.get("prob") for k, v in log.value_by_index.items()}


def normalised_probability_log(correct: MetricLog, wrong: MetricLog) -> MetricLog:
    """``probability_w_options`` from the true answer's and the perturbed answers' ``probability`` entries."""
    c, w = _probs(correct, "correct"), _probs(wrong, "wrong")
    if list(c) != list(w):
        raise ValueError("correct and wrong answers cover different items")
    by_index: dict[str, dict[str, float]] = {}
    values = []
    for idx in c:
        pc, pw = c[idx], w[idx]
        wrongs = pw if isinstance(pw, list) else [pw]
        if pc is None or any(p is None for p in wrongs):
            continue
        value = pc / (pc + float(np.sum(wrongs)) + 1e-10)
        by_index[idx] = {"prob": value}
        values.append(value)
    return MetricLog(agg_value=float(np.mean(values)) if values else None, value_by_index=by_index)


@register("metric", "probability", "1")
class Probability(Metric):
    """Answer probability exp(−mean NLL over the labelled tokens, EOS included), per answer; mean over items."""

    reads = frozenset({Reads.TEACHER_FORCED})

    def compute(self, readings: Readings) -> MetricLog:
        return probability_log(readings.scores["items"], multi=readings.multi())


@register("metric", "probability_w_options", "1")
class ProbabilityWithOptions(Metric):
    """True answer's probability over the sum with the perturbed answers' (+1e-10); mean over items."""

    reads = frozenset({Reads.DEPENDENCIES})

    def compute(self, readings: Readings) -> MetricLog:
        deps = readings.dependencies
        return normalised_probability_log(deps["correct"], deps["wrong"])


__all__ = ["Probability", "ProbabilityWithOptions", "normalised_probability_log", "probability_log"]
