"""``example_mean_answer_nll``: the mean over forget rows of the answer's negative log-likelihood given the
question (per row: mean NLL over the answer's labelled tokens, OpenUnlearning's ``avg_loss``), in nats.

A derived metric (docs/extending.md, "A field metric"): it reads the per-row ``avg_loss`` of the built-in
``forget_Q_A_Prob`` through ``pre_compute``, so remnant runs the model once for both. Its named metric is declared
in ``named_metrics``, the plugin's way of adding to the TOFU catalogue.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from remnant.metrics.base import Metric, Readings, Reads
from remnant.metrics.catalogue import MetricDef
from remnant.metrics.evallog import MetricLog
from remnant.registry import register

NAME = "example_mean_answer_nll"


@register("metric", NAME, "1")
class ExampleMeanAnswerNLL(Metric):
    """Mean over forget rows of the answer tokens' mean NLL; a row with no labelled token is left out."""

    reads = frozenset({Reads.DEPENDENCIES})
    named_metrics: ClassVar[dict[str, tuple[MetricDef, ...]]] = {
        "tofu": (MetricDef(NAME, NAME, pre_compute=(("forget_Q_A_Prob", "forget"),)),),
    }

    def compute(self, readings: Readings) -> MetricLog:
        rows = readings.dependencies["forget"].value_by_index or {}
        by_index: dict[str, dict[str, Any]] = {k: {"score": v.get("avg_loss")} for k, v in rows.items()}
        losses = [v["score"] for v in by_index.values() if v["score"] is not None]
        agg = float(np.mean(losses)) if losses else None
        return MetricLog(agg_value=agg, value_by_index=by_index)
