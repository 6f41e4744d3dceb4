"""Truth ratio (``forget_truth_ratio``, ``retain_/ra_/wf_Truth_Ratio``): their ``truth_ratio`` handler
(docs/metrics.md, "The metrics").

Per item, the "correct" answer's (the paraphrase on forget/retain, the true answer on real authors/world facts)
and the "wrong" (perturbed) answers' ``avg_loss`` are averaged per item (their ``aggregate_to_1D``), p = exp(−L̄),
and TR = p_w / (p_c + 1e-10) (``prob_mean``: their current p_c / (p_c + p_w + 1e-10)), aggregated
``closer_to_1_better`` (forget), ``true_better`` (the rest) or ``prob_mean``. The per-item values are logged as
``{"score": TR}``: what forget quality's KS test reads, here and in a retain model's log (same variant on both)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from remnant.errors import ConfigError
from remnant.metrics.base import Metric, Readings, Reads
from remnant.metrics.evallog import MetricLog
from remnant.registry import register

AGGREGATORS = ("closer_to_1_better", "true_better", "prob_mean")


def _checked(aggregator: str) -> str:
    if aggregator not in AGGREGATORS:
        raise ConfigError(
            f"truth ratio aggregator {aggregator!r} is not one of {list(AGGREGATORS)}", requirement="R23"
        )
    return aggregator


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
    if _checked(aggregator) == "closer_to_1_better":
        return float(np.mean(np.minimum(tr, 1 / (tr + 1e-10))))
    if aggregator == "true_better":
        return float(np.mean(np.maximum(0, 1 - tr)))
    return float(np.mean(tr))


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
        self.aggregator = _checked(aggregator)

    def compute(self, readings: Readings) -> MetricLog:
        deps = readings.dependencies
        return truth_ratio_log(deps["correct"], deps["wrong"], self.aggregator)


__all__ = ["AGGREGATORS", "TruthRatio", "aggregate", "ratios", "truth_ratio_log"]
