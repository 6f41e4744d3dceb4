"""Model utility (``model_utility``): their ``hm_aggregate``, the harmonic mean (``scipy.stats.hmean``) of the nine
aggregates :data:`MODEL_UTILITY_PARTS`; any part equal to zero makes the utility zero."""

from __future__ import annotations

from collections.abc import Mapping

from scipy.stats import hmean  # type: ignore[import-untyped]  # scipy ships no stubs

from remnant.metrics.base import Metric, Readings, Reads
from remnant.metrics.evallog import MetricLog
from remnant.registry import register

#: The parts of TOFU's model utility, in their config's order.
MODEL_UTILITY_PARTS = (
    "retain_Q_A_Prob",
    "retain_Q_A_ROUGE",
    "retain_Truth_Ratio",
    "ra_Q_A_Prob_normalised",
    "ra_Q_A_ROUGE",
    "ra_Truth_Ratio",
    "wf_Q_A_Prob_normalised",
    "wf_Q_A_ROUGE",
    "wf_Truth_Ratio",
)


def harmonic_mean(values: Mapping[str, float | None]) -> float:
    """``scipy.stats.hmean`` of the values (a zero gives 0); a missing or negative part is a ValueError."""
    parts = []
    for name, value in values.items():
        if value is None or value < 0:
            raise ValueError(f"model utility part {name} is {value!r}; a harmonic mean needs values >= 0")
        parts.append(value)
    return float(hmean(parts))


@register("metric", "hm_aggregate", "1")
class HarmonicMean(Metric):
    """Harmonic mean of the dependencies' aggregates (any zero → 0)."""

    reads = frozenset({Reads.DEPENDENCIES})

    def compute(self, readings: Readings) -> MetricLog:
        return MetricLog(agg_value=harmonic_mean({k: v.agg_value for k, v in readings.dependencies.items()}))


__all__ = ["MODEL_UTILITY_PARTS", "HarmonicMean", "harmonic_mean"]
