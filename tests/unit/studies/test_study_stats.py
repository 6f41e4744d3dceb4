"""The statistics the studies add to remnant.stats: one AUC (Mann–Whitney, ties one half) with a seeded stratified
bootstrap, ROC points, partial Spearman, Fisher-z pooling, the harmonic mean."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps  # type: ignore[import-untyped]

from remnant.errors import ConfigError
from remnant.metrics import mia
from remnant.statement.canonical import derive_seed
from remnant.stats import (
    fisher_pool,
    harmonic_mean,
    partial_spearman,
    roc_auc,
    roc_auc_bootstrap,
    roc_curve,
    spearman_test,
)


def pairwise_auc(neg: list[float], pos: list[float]) -> float:
    """The definition, pair by pair: 1 for pos > neg, ½ for a tie."""
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg))
    return wins / (len(pos) * len(neg))


def test_one_auc_for_metrics_and_studies() -> None:
    assert mia.roc_auc is roc_auc


@pytest.mark.parametrize("seed", range(5))
def test_auc_is_mann_whitney_with_ties_one_half(seed: int) -> None:
    rng = np.random.default_rng(seed)
    neg = rng.integers(0, 5, size=13).astype(float).tolist()  # many ties
    pos = rng.integers(1, 6, size=9).astype(float).tolist()
    assert roc_auc(neg, pos) == pytest.approx(pairwise_auc(neg, pos), abs=1e-12)
    u = sps.mannwhitneyu(pos, neg, alternative="two-sided").statistic
    assert roc_auc(neg, pos) == pytest.approx(u / (len(pos) * len(neg)), abs=1e-12)


def test_auc_extremes_and_refusals() -> None:
    assert roc_auc([0.0, 0.1], [0.9, 1.0]) == 1.0
    assert roc_auc([0.9, 1.0], [0.0, 0.1]) == 0.0
    assert roc_auc([0.5, 0.5], [0.5]) == 0.5
    with pytest.raises(ConfigError, match="each class"):
        roc_auc([], [1.0])
    with pytest.raises(ConfigError, match="non-finite"):
        roc_auc([math.nan], [1.0])


def test_bootstrap_is_stratified_and_seeded() -> None:
    neg, pos = [0.1, 0.2, 0.3, 0.6], [0.4, 0.7, 0.8, 0.9, 0.5]
    seed = derive_seed(7, "meta-eval", "faithfulness", "m")
    a = roc_auc_bootstrap(neg, pos, np.random.default_rng(seed), n_resamples=500)
    b = roc_auc_bootstrap(neg, pos, np.random.default_rng(seed), n_resamples=500)
    assert a == b  # the same pre-registered seed gives the same interval
    auc, lo, hi = a
    assert auc == pytest.approx(pairwise_auc(neg, pos))
    assert 0.0 <= lo <= auc <= hi <= 1.0 and lo < hi
    separated = roc_auc_bootstrap([0.0, 0.1], [0.9, 1.0], np.random.default_rng(0), n_resamples=200)
    assert separated == (1.0, 1.0, 1.0)  # every stratified resample keeps both classes, and separates them


def test_roc_curve_points() -> None:
    points = roc_curve([0.1, 0.4], [0.4, 0.9])
    assert points[0] == (0.0, 0.0) and points[-1] == (1.0, 1.0)
    assert points == [(0.0, 0.0), (0.0, 0.5), (0.5, 1.0), (1.0, 1.0)]  # the tie at 0.4 is one diagonal step
    # the trapezoid under the points is the AUC
    area = sum((x2 - x1) * (y1 + y2) / 2 for (x1, y1), (x2, y2) in itertools.pairwise(points))
    assert area == pytest.approx(roc_auc([0.1, 0.4], [0.4, 0.9]))


def test_spearman_test_matches_scipy() -> None:
    x, y = [1, 2, 3, 4, 5, 6], [2, 1, 4, 3, 6, 5]
    rho, p = spearman_test(x, y)
    ref = sps.spearmanr(x, y)
    assert rho == pytest.approx(ref.statistic) and p == pytest.approx(ref.pvalue)


def test_partial_spearman_removes_a_shared_cause() -> None:
    """x and y both follow z: their ρ is high, their partial ρ given z is near zero; given nothing it is ρ."""
    rng = np.random.default_rng(3)
    z = rng.normal(size=200)
    x = z + 0.3 * rng.normal(size=200)
    y = z + 0.3 * rng.normal(size=200)
    rho, _ = spearman_test(x.tolist(), y.tolist())
    partial, p = partial_spearman(x.tolist(), y.tolist(), [z.tolist()])
    assert rho > 0.8
    assert abs(partial) < 0.15 and p > 0.01
    assert partial_spearman(x.tolist(), y.tolist(), []) == pytest.approx(
        spearman_test(x.tolist(), y.tolist())
    )


def test_partial_spearman_equals_the_residual_formula() -> None:
    rng = np.random.default_rng(5)
    x, y, z1, z2 = (rng.normal(size=40) for _ in range(4))
    y = y + 0.5 * x
    rx, ry, r1, r2 = (sps.rankdata(v) for v in (x, y, z1, z2))
    design = np.column_stack([np.ones(40), r1, r2])
    ex = rx - design @ np.linalg.pinv(design) @ rx
    ey = ry - design @ np.linalg.pinv(design) @ ry
    expected = float(np.corrcoef(ex, ey)[0, 1])
    rho, p = partial_spearman(x.tolist(), y.tolist(), [z1.tolist(), z2.tolist()])
    assert rho == pytest.approx(expected, abs=1e-10)
    t = expected * math.sqrt(36 / (1 - expected**2))
    assert p == pytest.approx(2 * sps.t.sf(abs(t), 36))


def test_fisher_pool_weights_by_n_minus_three() -> None:
    rho, lo, hi, p = fisher_pool([0.5, 0.1], [13, 23])
    z = (10 * math.atanh(0.5) + 20 * math.atanh(0.1)) / 30
    assert rho == pytest.approx(math.tanh(z))
    half = 1.959963984540054 / math.sqrt(30)
    assert (lo, hi) == pytest.approx((math.tanh(z - half), math.tanh(z + half)))
    assert p == pytest.approx(2 * sps.norm.sf(abs(z) * math.sqrt(30)))
    # groups too small to carry a variance are left out, and a single group is itself
    assert fisher_pool([0.3, 0.9], [10, 3])[0] == pytest.approx(0.3)
    with pytest.raises(ValueError):
        fisher_pool([0.3], [3])


def test_harmonic_mean() -> None:
    assert harmonic_mean([0.968, 0.900]) == pytest.approx(2 * 0.968 * 0.9 / 1.868)
    assert harmonic_mean([0.5, 0.0]) == 0.0
    with pytest.raises(ValueError):
        harmonic_mean([])
