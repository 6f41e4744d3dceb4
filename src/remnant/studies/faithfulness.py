"""Faithfulness: how well a metric separates models that hold the target from models that never saw it.

the UDS paper §4 and OpenUnlearning's meta-evaluation: the AUC-ROC of the metric's value (oriented so higher = more
knowledge, :mod:`remnant.studies.orientation`) over the P pool (``pool = target``: the installed / full models)
against the N pool (``never_saw``: retain-only installs), on the unperturbed rows that finished. The AUC is
:func:`remnant.stats.roc_auc` (Mann–Whitney, ties one half) with a stratified percentile bootstrap interval whose
generator is derived from the pre-registered seed and the metric's name.

The *faithfulness threshold* — which the robustness filter uses to call a model "unlearned" (m ≤ cut) — follows
the UDS reference code (``scripts/build_robustness_filter_list.py``, ``compute_thresholds``) by default
(``threshold_rule = "accuracy"``): the candidate cuts are the midpoints between consecutive distinct values of m
over both pools, a target model counts as right when m ≥ cut and a never-saw model when m < cut, and the first
(lowest) cut with the highest accuracy (right / all) is taken; with a single distinct value there is no cut.
``threshold_rule = "youden"`` (declared) is remnant's earlier rule: the lowest cut maximising Youden's J = TPR − FPR,
with one cut below the smallest and one above the largest value added. The two agree when the pools are the
same size (the paper's 30/30) and can differ when they are not.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import Field

from remnant.results import PoolTable
from remnant.statement.canonical import derive_seed
from remnant.stats import roc_auc_bootstrap, roc_curve
from remnant.studies.config import StudyModel
from remnant.studies.orientation import Orientation, orient


class Faithfulness(StudyModel):
    """One metric's separation of the P pool from the N pool."""

    auc: float | None = Field(description="AUC-ROC, P (target) positive (None: a pool too small).")
    ci95: tuple[float, float] | None = Field(description="Stratified percentile bootstrap interval.")
    n_target: int = Field(description="P-pool models with a value.")
    n_never_saw: int = Field(description="N-pool models with a value.")
    target_mean: float | None = Field(description="Mean m over the P pool.")
    never_saw_mean: float | None = Field(description="Mean m over the N pool.")
    threshold: float | None = Field(
        description="Cut on m (the config's threshold_rule): m ≤ cut reads as unlearned."
    )
    youden_j: float | None = Field(description="TPR − FPR at the cut.")
    accuracy: float | None = Field(
        default=None, description="Share of both pools on their side of the cut (None: no cut)."
    )
    roc: list[tuple[float, float]] = Field(default_factory=list, description="ROC points (fpr, tpr).")
    target_values: list[float] = Field(default_factory=list, description="m over the P pool (for plots).")
    never_saw_values: list[float] = Field(default_factory=list, description="m over the N pool.")


def pool_values(table: PoolTable, pool: str, metric: str, how: Orientation) -> list[float]:
    """m of every finished, unperturbed model of ``pool`` that has a value."""
    out = []
    for model in table.models(pool):
        v = table.value(model, metric, "none")
        if v is not None:
            out.append(orient(v, how))
    return out


def youden_cut(negatives: Sequence[float], positives: Sequence[float]) -> tuple[float, float]:
    """``(cut, J)``: the lowest midpoint cut maximising TPR − FPR, "positive" meaning m > cut."""
    neg = np.asarray(negatives, dtype=np.float64).tolist()
    pos = np.asarray(positives, dtype=np.float64).tolist()
    values = sorted(set(neg) | set(pos))
    span = max(values[-1] - values[0], 1.0)
    cuts = [
        values[0] - span,
        *((a + b) / 2 for a, b in zip(values, values[1:], strict=False)),
        values[-1] + span,
    ]
    best_cut, best_j = cuts[0], -2.0
    for cut in cuts:
        j = _at_cut(neg, pos, cut)[0]
        if j > best_j + 1e-12:
            best_cut, best_j = cut, j
    return best_cut, best_j


def accuracy_cut(negatives: Sequence[float], positives: Sequence[float]) -> float | None:
    """The first midpoint cut with the highest accuracy, "positive" meaning m ≥ cut (the UDS reference code)."""
    values = sorted(set(negatives) | set(positives))
    best_cut, best_acc = None, -1.0
    for a, b in zip(values, values[1:], strict=False):
        cut = (a + b) / 2
        right = sum(m >= cut for m in positives) + sum(m < cut for m in negatives)
        acc = right / (len(positives) + len(negatives))
        if acc > best_acc:  # strictly: ties keep the lower cut, as the reference code's loop does
            best_cut, best_acc = cut, acc
    return best_cut


def _at_cut(negatives: Sequence[float], positives: Sequence[float], cut: float) -> tuple[float, float]:
    """(Youden's J, accuracy) of ``cut``, m > cut read as holding the target."""
    tp, fp = sum(m > cut for m in positives), sum(m > cut for m in negatives)
    j = tp / len(positives) - fp / len(negatives)
    return j, (tp + len(negatives) - fp) / (len(positives) + len(negatives))


def faithfulness(
    table: PoolTable,
    metric: str,
    how: Orientation,
    *,
    seed: int,
    n_resamples: int = 2000,
    level: float = 0.95,
    min_per_pool: int = 2,
    threshold_rule: str = "accuracy",
) -> Faithfulness:
    """AUC with its interval, the threshold (``threshold_rule``) and the ROC points of one metric."""
    pos = pool_values(table, "target", metric, how)
    neg = pool_values(table, "never_saw", metric, how)
    base = {
        "n_target": len(pos),
        "n_never_saw": len(neg),
        "target_mean": float(np.mean(pos)) if pos else None,
        "never_saw_mean": float(np.mean(neg)) if neg else None,
        "target_values": pos,
        "never_saw_values": neg,
    }
    if len(pos) < min_per_pool or len(neg) < min_per_pool:
        return Faithfulness(auc=None, ci95=None, threshold=None, youden_j=None, **base)
    rng = np.random.default_rng(derive_seed(seed, "meta-eval", "faithfulness", metric))
    auc, lo, hi = roc_auc_bootstrap(neg, pos, rng, n_resamples=n_resamples, level=level)
    cut = youden_cut(neg, pos)[0] if threshold_rule == "youden" else accuracy_cut(neg, pos)
    j, acc = _at_cut(neg, pos, cut) if cut is not None else (None, None)
    return Faithfulness(
        auc=auc, ci95=(lo, hi), threshold=cut, youden_j=j, accuracy=acc, roc=roc_curve(neg, pos), **base
    )


__all__ = ["Faithfulness", "accuracy_cut", "faithfulness", "pool_values", "youden_cut"]
