"""Truth ratio (``forget_truth_ratio``, ``retain_/ra_/wf_Truth_Ratio``): their ``truth_ratio`` handler.

Per item, from the ``avg_loss`` values of the "correct" answer (the paraphrased answer on forget/retain, the true
answer on real authors/world facts) and of the "wrong" (perturbed) answers:

- the answer losses are first averaged per item (their ``aggregate_to_1D``), then p_c = exp(−L̄_c) and
  p_w = exp(−mean_j L_wj) (a geometric mean of the perturbed answers' per-token probabilities);
- ``closer_to_1_better`` and ``true_better`` use TOFU's ratio TR = p_w / (p_c + 1e-10) (false over true);
  ``prob_mean`` uses OpenUnlearning's p_c / (p_c + p_w + 1e-10) (their current code);
- aggregates: ``closer_to_1_better`` = mean min(TR, 1/(TR + 1e-10)) (forget: best when false and true are equally
  likely); ``true_better`` = mean max(0, 1 − TR) (retain, real authors, world facts); ``prob_mean`` = mean TR.

The per-item values are logged as ``{"score": TR}`` — what forget quality's KS test reads, from this run and from a
retain model's log (both must use the same variant).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from remnant.errors import ConfigError
from remnant.metrics.base import Metric, Readings, Reads
from remnant.metrics.evallog import MetricLog
from remnant.registry import register

AGGREGATORS = ("closer_to_1_better", "true_better", "prob_mean")


def ratios(
    correct_loss: npt.ArrayLike, wrong_loss: npt.ArrayLike, aggregator: str
) -> npt.NDArray[np.float64]:
    """Per-item truth ratios from per-item mean losses (see the module docstring for the two forms)."""
    c = np.exp(-np.asarray(correct_loss, dtype=np.float64))
    w = np.exp(-np.asarray(wrong_loss, dtype=np.float64))
    if aggregator == "prob_mean":
        return np.asarray(c / (c + w + 1e-10), dtype=np.float64)
    return np.asarray(w / (c + 1e-10), dtype=np.float64)


def aggregate(values: npt.ArrayLike, aggregator: str) -> float:
    """One of the three aggregations of per-item truth ratios."""
    tr = np.asarray(values, dtype=np.float64)
    if aggregator == "closer_to_1_better":
        return float(np.mean(np.minimum(tr, 1 / (tr + 1e-10))))
    if aggregator == "true_better":
        return float(np.mean(np.maximum(0, 1 - tr)))
    if aggregator == "prob_mean":
        return float(np.mean(tr))
    raise ConfigError(
        f"truth ratio aggregator {aggregator!r} is not one of {list(AGGREGATORS)}", requirement="R23"
    )


def _mean_losses(log: MetricLog) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for idx, item in (log.value_by_index or {}).items():
        loss: Any = item.get("avg_loss")
        losses = loss if isinstance(loss, list) else [loss]
        out[idx] = None if any(x is None for x in losses) else float(np.mean(losses))
    return out


def truth_ratio_log(correct: MetricLog, wrong: MetricLog, aggregator: str) -> MetricLog:
    """The ``truth_ratio`` entry from the two ``probability`` entries."""
    c, w = _mean_losses(correct), _mean_losses(wrong)
    if list(c) != list(w):
        raise ValueError("correct and wrong answers cover different items")
    pairs = {i: (ci, wi) for i, ci in c.items() if ci is not None and (wi := w[i]) is not None}
    kept = list(pairs)
    tr = ratios([p[0] for p in pairs.values()], [p[1] for p in pairs.values()], aggregator)
    by_index = {i: {"score": float(v)} for i, v in zip(kept, tr, strict=True)}
    return MetricLog(agg_value=aggregate(tr, aggregator) if kept else None, value_by_index=by_index)


@register("metric", "truth_ratio", "1")
class TruthRatio(Metric):
    """Perturbed-vs-paraphrased answer likelihood ratio per item, aggregated three ways (module docstring)."""

    reads = frozenset({Reads.DEPENDENCIES})

    def __init__(self, aggregator: str = "closer_to_1_better") -> None:
        if aggregator not in AGGREGATORS:
            raise ConfigError(
                f"truth ratio aggregator {aggregator!r} is not one of {list(AGGREGATORS)}", requirement="R23"
            )
        self.aggregator = aggregator

    def compute(self, readings: Readings) -> MetricLog:
        deps = readings.dependencies
        return truth_ratio_log(deps["correct"], deps["wrong"], self.aggregator)


__all__ = ["AGGREGATORS", "TruthRatio", "aggregate", "ratios", "truth_ratio_log"]
