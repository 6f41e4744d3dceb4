"""Forget quality and privleak: their ``ks_test``, ``privleak`` and ``rel_diff`` handlers (docs/metrics.md).

Forget quality is the KS p-value between this model's per-item forget truth ratios and a retain model's log
(``None`` without one, as theirs); the KS statistic is unchanged by TR → 1/TR, so it equals legacy TOFU's.
privleak compares 1 − AUC (MUSE's convention) with the retain model's ``mia_min_k``, or ``ref_value`` = 0.5."""

from __future__ import annotations

from collections.abc import Sequence

from remnant.errors import ConfigError
from remnant.metrics.base import Metric, Readings, Reads
from remnant.metrics.evallog import MetricLog, aggregate, per_item_scores
from remnant.registry import register


def forget_quality(model_scores: Sequence[float], retain_scores: Sequence[float] | None) -> float | None:
    """KS two-sample p-value between the two truth-ratio samples; ``None`` without the retain sample."""
    if retain_scores is None:
        return None
    if not model_scores or not retain_scores:
        raise ValueError("forget quality needs truth ratios on both sides")
    # scipy.stats costs ~1 s to import: only the metric that runs pays it, not every `remnant` start
    from scipy.stats import ks_2samp  # type: ignore[import-untyped]  # scipy ships no stubs

    return float(ks_2samp(list(model_scores), list(retain_scores)).pvalue)


def privleak(auc: float, retain_auc: float | None, ref_value: float = 0.5) -> float:
    """Relative gap of 1 − AUC to the retain model's 1 − AUC, in percent (retain AUC ``ref_value`` if absent)."""
    ref = 1 - (ref_value if retain_auc is None else retain_auc)
    return (1 - auc - ref) / (ref + 1e-10) * 100


def rel_diff(score: float, reference: float | None, ref_value: float = 0.5) -> float:
    """Relative difference in percent, no flip (``ref_value`` when the reference is absent)."""
    ref = ref_value if reference is None else reference
    return (score - ref) / (ref + 1e-10) * 100


@register("metric", "ks_test", "1")
class KSTest(Metric):
    """Forget quality: KS p-value of forget truth ratios against a retain model's (None without its log)."""

    reads = frozenset({Reads.DEPENDENCIES, Reads.RETAIN_LOG})

    def compute(self, readings: Readings) -> MetricLog:
        forget = [float(v["score"]) for v in (readings.dependencies["forget"].value_by_index or {}).values()]
        retain, key = readings.retain, readings.retain_key
        if retain is None or key is None:
            return MetricLog(agg_value=None)
        scores = per_item_scores(retain.data, key, source=retain.source)
        if scores is None:
            raise ConfigError(
                f"{retain.source}: has no {key!r}, which {readings.metric} compares against",
                requirement="R23",
            )
        return MetricLog(agg_value=forget_quality(forget, scores))

    def notes(self, readings: Readings) -> tuple[str, ...]:
        if readings.retain is not None:
            return ()
        return (
            f"{readings.metric}: no retain model log (--retain-logs); agg_value is null, as OpenUnlearning's",
        )


class _AgainstRetain(Metric):
    """A score (the ``forget`` dependency's aggregate) against the retain model's aggregate of ``retain_key``,
    ``ref_value`` when the retain log lacks it."""

    reads = frozenset({Reads.DEPENDENCIES, Reads.RETAIN_LOG})

    def __init__(self, ref_value: float = 0.5) -> None:
        self.ref_value = ref_value

    @staticmethod
    def retained(readings: Readings) -> float | None:
        retain, key = readings.retain, readings.retain_key
        return None if retain is None or key is None else aggregate(retain.data, key, source=retain.source)

    @staticmethod
    def score(readings: Readings) -> float:
        value = readings.dependencies["forget"].agg_value
        if value is None:
            raise ConfigError(f"{readings.metric}: its forget dependency has no aggregate", requirement="R23")
        return value

    def notes(self, readings: Readings) -> tuple[str, ...]:
        if self.retained(readings) is not None:
            return ()
        what = f"{readings.metric}: no retain model {readings.retain_key} AUC"
        return (f"{what}; the retain AUC is ref_value = {self.ref_value}",)


@register("metric", "privleak", "1")
class PrivLeak(_AgainstRetain):
    """(1−AUC − (1−AUC_retain)) / (1−AUC_retain) · 100 over min-k's AUC; retain AUC ``ref_value`` when absent."""

    def compute(self, readings: Readings) -> MetricLog:
        return MetricLog(agg_value=privleak(self.score(readings), self.retained(readings), self.ref_value))


@register("metric", "rel_diff", "1")
class RelDiff(_AgainstRetain):
    """(score − ref)/ref · 100 with no 1 − x flip; ``ref_value`` when the retain value is absent."""

    def compute(self, readings: Readings) -> MetricLog:
        return MetricLog(agg_value=rel_diff(self.score(readings), self.retained(readings), self.ref_value))


__all__ = ["KSTest", "PrivLeak", "RelDiff", "forget_quality", "privleak", "rel_diff"]
