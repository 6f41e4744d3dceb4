"""Forget quality and privleak: their ``ks_test``, ``privleak`` and ``rel_diff`` handlers (docs/metrics.md).

- Forget quality: the p-value of ``scipy.stats.ks_2samp`` between this model's per-item forget truth ratios and
  a retain model's (read from its evaluation log, ``forget_truth_ratio``). Without a retain log it is ``None``, as
  theirs is. The KS statistic is unchanged by TR → 1/TR, so it equals legacy TOFU's p-value (which used true/false).
- privleak: with AUC' = 1 − AUC (MUSE reports 1 − AUC), (AUC'_model − AUC'_retain)/(AUC'_retain + 1e−10) · 100,
  over ``mia_min_k``'s AUC. Without the retain model's ``mia_min_k`` the retain AUC is ``ref_value`` = 0.5.
  Near −100: forget data still looks like members; large positive: over-unlearning.
- rel_diff: (score − ref)/(ref + 1e−10) · 100 with no 1 − x flip (no shipped config uses it).
"""

from __future__ import annotations

from collections.abc import Sequence

from remnant.metrics.evallog import MetricLog
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
class KSTest:
    """Forget quality: KS p-value of forget truth ratios against a retain model's (None without its log)."""

    def __init__(self) -> None:
        """No parameters (registered so a log names it and its version)."""

    def compute(self, forget_scores: Sequence[float], retain_scores: Sequence[float] | None) -> MetricLog:
        return MetricLog(agg_value=forget_quality(forget_scores, retain_scores))


@register("metric", "privleak", "1")
class PrivLeak:
    """(1−AUC − (1−AUC_retain)) / (1−AUC_retain) · 100 over min-k's AUC; retain AUC ``ref_value`` when absent."""

    def __init__(self, ref_value: float = 0.5) -> None:
        self.ref_value = ref_value

    def compute(self, auc: float, retain_auc: float | None) -> MetricLog:
        return MetricLog(agg_value=privleak(auc, retain_auc, self.ref_value))


@register("metric", "rel_diff", "1")
class RelDiff:
    """(score − ref)/ref · 100 with no 1 − x flip; ``ref_value`` when the retain value is absent."""

    def __init__(self, ref_value: float = 0.5) -> None:
        self.ref_value = ref_value

    def compute(self, score: float, reference: float | None) -> MetricLog:
        return MetricLog(agg_value=rel_diff(score, reference, self.ref_value))


__all__ = ["KSTest", "PrivLeak", "RelDiff", "forget_quality", "privleak", "rel_diff"]
