"""remnant.stats: Wilson (R19), Newcombe (Annex F.9), Holm, bootstrap and rank correlations.

Cross-checked against statsmodels (a dev dependency), Newcombe's published Table II and scipy's documented
examples; property tests with hypothesis.
"""

from __future__ import annotations

import gc
import math
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from remnant.stats import (
    holm,
    newcombe_difference,
    newcombe_paired_difference,
    percentile_bootstrap,
    spearman,
    wilson_interval,
    z_two_sided,
)

LEVELS = st.sampled_from([0.8, 0.9, 0.95, 0.99, 0.999])


@st.composite
def counts(draw: st.DrawFn, max_n: int = 5000) -> tuple[int, int]:
    n = draw(st.integers(min_value=1, max_value=max_n))
    return draw(st.integers(min_value=0, max_value=n)), n


# --- Wilson ---------------------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(counts(), LEVELS)
def test_wilson_matches_statsmodels(kn: tuple[int, int], level: float) -> None:
    k, n = kn
    lo, hi = proportion_confint(k, n, alpha=1 - level, method="wilson")
    assert wilson_interval(k, n, level) == pytest.approx((lo, hi), abs=1e-12)


@settings(max_examples=150, deadline=None)
@given(counts(), LEVELS)
def test_wilson_contains_point_and_stays_in_unit_interval(kn: tuple[int, int], level: float) -> None:
    k, n = kn
    lo, hi = wilson_interval(k, n, level)
    assert 0.0 <= lo <= k / n <= hi <= 1.0
    assert lo < hi


@settings(max_examples=100, deadline=None)
@given(counts())
def test_wilson_monotone_in_k(kn: tuple[int, int]) -> None:
    k, n = kn
    if k == n:
        k -= 1
    if k < 0:
        return
    lo1, hi1 = wilson_interval(k, n)
    lo2, hi2 = wilson_interval(k + 1, n)
    assert lo2 > lo1 and hi2 > hi1


@settings(max_examples=100, deadline=None)
@given(counts(max_n=2000), st.integers(min_value=2, max_value=10))
def test_wilson_width_shrinks_with_n(kn: tuple[int, int], factor: int) -> None:
    """Same observed proportion on factor× the items: a strictly narrower interval."""
    k, n = kn
    lo1, hi1 = wilson_interval(k, n)
    lo2, hi2 = wilson_interval(factor * k, factor * n)
    assert hi2 - lo2 < hi1 - lo1


@settings(max_examples=100, deadline=None)
@given(counts(), LEVELS)
def test_wilson_symmetry(kn: tuple[int, int], level: float) -> None:
    """Swapping successes and failures mirrors the interval around 1/2."""
    k, n = kn
    lo, hi = wilson_interval(k, n, level)
    lo_m, hi_m = wilson_interval(n - k, n, level)
    assert lo == pytest.approx(1 - hi_m, abs=1e-12) and hi == pytest.approx(1 - lo_m, abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=1, max_value=100_000), LEVELS)
def test_wilson_exact_ends_at_zero_and_n(n: int, level: float) -> None:
    assert wilson_interval(0, n, level)[0] == 0.0
    assert wilson_interval(n, n, level)[1] == 1.0


def test_z_95_is_scipys_quantile_to_the_bit() -> None:
    """The 95% z is a constant (no scipy at start-up); it must be scipy's own value, not a near neighbour."""
    from scipy.stats import norm  # type: ignore[import-untyped]

    assert z_two_sided(0.95) == float(norm.ppf(0.975))
    assert z_two_sided(0.9) == float(norm.ppf(0.95))  # other levels still ask scipy


def test_wilson_known_values() -> None:
    assert z_two_sided(0.95) == pytest.approx(1.959963984540054, abs=1e-15)
    # 0/10: upper bound z²/(n+z²) at 95%.
    z2 = 1.959963984540054**2
    assert wilson_interval(0, 10)[1] == pytest.approx(z2 / (10 + z2), abs=1e-15)
    # R21's implied minima at zero recoveries: n = 100 gives ~0.0370, n = 300 ~0.0126.
    assert wilson_interval(0, 100)[1] == pytest.approx(0.0369935, abs=1e-6)
    assert wilson_interval(0, 300)[1] == pytest.approx(0.012643, abs=1e-6)


@pytest.mark.parametrize(
    ("k", "n", "level"),
    [
        (0, 0, 0.95),
        (1, 0, 0.95),
        (-1, 10, 0.95),
        (11, 10, 0.95),
        (1, 10, 0.0),
        (1, 10, 1.0),
        (1, 10, math.nan),
    ],
)
def test_wilson_rejects_bad_input(k: int, n: int, level: float) -> None:
    with pytest.raises(ValueError):
        wilson_interval(k, n, level)


# --- Newcombe -------------------------------------------------------------------------------------------------

# Newcombe (1998), Statistics in Medicine 17:873-890, Table II, method 10 (hybrid score, no continuity correction).
NEWCOMBE_TABLE_II = [
    ((56, 70, 48, 80), 0.2, (0.0524, 0.3339)),
    ((9, 10, 3, 10), 0.6, (0.1705, 0.8090)),
    ((6, 7, 2, 7), 4 / 7, (0.0582, 0.8062)),
    ((5, 56, 0, 29), 5 / 56, (-0.0381, 0.1926)),
    ((0, 10, 0, 20), 0.0, (-0.1611, 0.2775)),
    ((0, 10, 0, 10), 0.0, (-0.2775, 0.2775)),
    ((10, 10, 0, 20), 1.0, (0.6791, 1.0000)),
    ((10, 10, 0, 10), 1.0, (0.6075, 1.0000)),
]


@pytest.mark.parametrize(("counts4", "diff", "interval"), NEWCOMBE_TABLE_II)
def test_newcombe_published_table(
    counts4: tuple[int, int, int, int], diff: float, interval: tuple[float, float]
) -> None:
    d, lo, hi = newcombe_difference(*counts4)
    assert d == pytest.approx(diff, abs=1e-12)
    assert (round(lo, 4), round(hi, 4)) == interval


@settings(max_examples=100, deadline=None)
@given(counts(max_n=1000), counts(max_n=1000), LEVELS)
def test_newcombe_matches_statsmodels(a: tuple[int, int], b: tuple[int, int], level: float) -> None:
    d, lo, hi = newcombe_difference(a[0], a[1], b[0], b[1], level)
    ref = confint_proportions_2indep(
        a[0], a[1], b[0], b[1], method="newcomb", compare="diff", alpha=1 - level
    )
    assert (lo, hi) == pytest.approx(tuple(float(x) for x in ref), abs=1e-12)
    assert -1.0 <= lo <= d <= hi <= 1.0


def test_newcombe_antisymmetric() -> None:
    d, lo, hi = newcombe_difference(56, 70, 48, 80)
    d2, lo2, hi2 = newcombe_difference(48, 80, 56, 70)
    assert d2 == pytest.approx(-d) and lo2 == pytest.approx(-hi) and hi2 == pytest.approx(-lo)


@st.composite
def paired(draw: st.DrawFn) -> tuple[int, int, int, int]:
    cells = draw(st.tuples(*[st.integers(min_value=0, max_value=60)] * 4))
    return cells if sum(cells) else (0, 0, 0, 1)


@settings(max_examples=200, deadline=None)
@given(paired(), LEVELS)
def test_newcombe_paired_bounds_contain_the_difference_and_are_antisymmetric(
    cells: tuple[int, int, int, int], level: float
) -> None:
    a, b, c, d = cells
    diff, lo, hi = newcombe_paired_difference(a, b, c, d, level)
    n = a + b + c + d
    assert diff == pytest.approx((b - c) / n, abs=1e-12)
    assert -1.0 <= lo <= diff + 1e-12 and diff - 1e-12 <= hi <= 1.0
    diff2, lo2, hi2 = newcombe_paired_difference(a, c, b, d, level)  # the readings swapped
    assert diff2 == pytest.approx(-diff) and lo2 == pytest.approx(-hi) and hi2 == pytest.approx(-lo)


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=1, max_value=40), st.integers(min_value=1, max_value=40), LEVELS)
def test_newcombe_paired_without_correlation_is_the_independent_interval(
    x: int, y: int, level: float
) -> None:
    """φ = 0 when ad = bc: a table whose rows are proportional (x, y | 2x, 2y) has both readings uncorrelated,
    and the interval is then the independent one on the same n."""
    a, b, c, d = x, y, 2 * x, 2 * y  # ad − bc = 2xy − 2xy = 0
    n = a + b + c + d
    paired_ = newcombe_paired_difference(a, b, c, d, level)
    independent = newcombe_difference(a + b, n, a + c, n, level)
    assert paired_ == pytest.approx(independent, abs=1e-12)


def test_newcombe_paired_correlation_narrows_the_interval() -> None:
    """Positively correlated readings (most units agree) give a narrower interval than independent samples
    with the same margins; that is why a paired comparison of two models on one probe set uses it."""
    d, lo, hi = newcombe_paired_difference(10, 3, 1, 16)
    d_i, lo_i, hi_i = newcombe_difference(13, 30, 11, 30)
    assert d == pytest.approx(d_i) and hi - lo < hi_i - lo_i
    with pytest.raises(ValueError, match="non-negative"):
        newcombe_paired_difference(1, -1, 0, 0)
    with pytest.raises(ValueError, match="positive number"):
        newcombe_paired_difference(0, 0, 0, 0)


# --- Holm -----------------------------------------------------------------------------------------------------


def _statsmodels_holm(pvalues: list[float]) -> list[float]:
    """statsmodels' Holm adjustment. Its ``multipletests`` runs ``gc.collect()`` on every Holm call, which is slow
    in a test worker that has held SmolLM2 models (docs/calibration.md, "make test's time"); the collection
    computes nothing, so it is skipped here."""
    with mock.patch.object(gc, "collect", lambda *_: 0):
        return [float(v) for v in multipletests(pvalues, method="holm")[1]]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=30))
def test_holm_matches_statsmodels(pvalues: list[float]) -> None:
    assert holm(pvalues) == pytest.approx(_statsmodels_holm(pvalues), abs=1e-12)


def test_holm_known_example() -> None:
    # Sorted 0.005, 0.01, 0.03, 0.04 → 4·0.005, 3·0.01, max(2·0.03, .), max(1·0.04, 0.06).
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([]) == []
    with pytest.raises(ValueError):
        holm([0.5, 1.5])


# --- bootstrap ------------------------------------------------------------------------------------------------


def test_bootstrap_deterministic_given_generator() -> None:
    data = np.random.default_rng(0).normal(size=50)
    a = percentile_bootstrap(data, np.mean, np.random.default_rng(7), n_resamples=500)
    b = percentile_bootstrap(data, np.mean, np.random.default_rng(7), n_resamples=500)
    c = percentile_bootstrap(data, np.mean, np.random.default_rng(8), n_resamples=500)
    assert a == b and a != c
    assert a[0] == pytest.approx(float(np.mean(data)))


def test_bootstrap_mean_interval_close_to_normal_theory() -> None:
    """For the mean of 400 normal draws the percentile interval ≈ mean ± 1.96·s/√n."""
    data = np.random.default_rng(1).normal(loc=3.0, scale=2.0, size=400)
    est, lo, hi = percentile_bootstrap(data, np.mean, np.random.default_rng(2), n_resamples=4000)
    half = 1.959963984540054 * float(np.std(data, ddof=1)) / math.sqrt(len(data))
    assert lo == pytest.approx(est - half, abs=0.03) and hi == pytest.approx(est + half, abs=0.03)
    assert lo < 3.0 < hi


def test_bootstrap_keeps_rows_paired() -> None:
    x = np.arange(20, dtype=float)
    paired = np.column_stack([x, x])
    _, lo, hi = percentile_bootstrap(
        paired, lambda a: float(np.mean(a[:, 0] - a[:, 1])), np.random.default_rng(3), n_resamples=200
    )
    assert lo == hi == 0.0


def test_bootstrap_constant_and_bad_input() -> None:
    assert percentile_bootstrap([2.0] * 5, np.mean, np.random.default_rng(0), n_resamples=50) == (
        2.0,
        2.0,
        2.0,
    )
    with pytest.raises(ValueError):
        percentile_bootstrap([], np.mean, np.random.default_rng(0))
    with pytest.raises(ValueError):
        percentile_bootstrap([1.0], np.mean, np.random.default_rng(0), n_resamples=0)


# --- rank correlations ----------------------------------------------------------------------------------------


def test_rank_correlations_known_values() -> None:
    # scipy's documented examples.
    assert spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]) == pytest.approx(0.8207826816681233, abs=1e-12)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))


def test_rank_correlations_reject_unpaired() -> None:
    with pytest.raises(ValueError):
        spearman([1, 2], [1, 2, 3])
    with pytest.raises(ValueError):
        spearman([1], [1])
