"""R21's minima as bounds (R20, R21): golden values, the Standard's table reconciled, and search properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remnant.standard.minima import (
    R21_TABLE,
    best_tier_supportable,
    max_recoveries_for_removed,
    min_n_for_zero_recoveries,
    r21_row,
    upper_bound,
)
from remnant.stats import wilson_interval, z_two_sided

Z2 = z_two_sided(0.95) ** 2


@pytest.mark.parametrize(
    ("tau", "expected"),
    [(0.5, 4), (0.7, 2), (0.1, 35), (0.05, 73), (0.03, 125), (0.01, 381), (0.006, 637), (1.0, 1)],
)
def test_min_n_golden(tau: float, expected: int) -> None:
    # At k = 0 the two-sided Wilson upper end is z²/(n + z²), so n must exceed z²(1 − τ)/τ.
    assert min_n_for_zero_recoveries(tau) == expected
    assert expected == math.floor(Z2 * (1 - tau) / tau) + 1


def test_min_n_uses_the_two_sided_interval() -> None:
    # A one-sided 95% bound (z = 1.645) would need only 26 items at τ = 0.1; R19/R20 use the two-sided interval.
    assert min_n_for_zero_recoveries(0.1) == 35


def test_r21_table_reconciled() -> None:
    """The Standard's counts suffice exactly for thresholds above z²/(n + z²) at zero recoveries."""
    supported = {(row.tier, row.scope): upper_bound(0, row.table_n) for row in R21_TABLE}
    assert supported[(3, "any")] == pytest.approx(0.036993, abs=1e-6)
    assert supported[(4, "C")] == pytest.approx(0.012643, abs=1e-6)
    assert supported[(4, "D")] == pytest.approx(0.007624, abs=1e-6)
    assert [r21_row(t, c).table_n for t, c in ((2, "C"), (3, "C"), (4, "C"), (4, "D"))] == [30, 100, 300, 500]
    with pytest.raises(ValueError, match="no row"):
        r21_row(5)


def test_bound_exactly_at_tau_is_not_below() -> None:
    """R20 asks for the bound *below* τ: a bound equal to τ needs one more item."""
    tau = upper_bound(0, 50)
    assert min_n_for_zero_recoveries(tau) == 51
    assert max_recoveries_for_removed(50, tau) is None
    k_tau = upper_bound(7, 300)
    assert max_recoveries_for_removed(300, k_tau) == 6


def test_max_recoveries_golden() -> None:
    assert max_recoveries_for_removed(300, 0.5) == 133
    assert wilson_interval(133, 300)[1] < 0.5 <= wilson_interval(134, 300)[1]
    assert max_recoveries_for_removed(300, 0.05) == 7
    assert max_recoveries_for_removed(100, 0.03) is None  # 100 items cannot bound below 0.037
    assert max_recoveries_for_removed(3, 1.0) == 2  # k = n reaches an upper bound of exactly 1


def test_net_of_chance() -> None:
    # Four-option MCQ: the bound is shifted down by 0.25 and floored at zero (V1).
    assert upper_bound(80, 300, chance_rate=0.25) == pytest.approx(wilson_interval(80, 300)[1] - 0.25)
    assert upper_bound(0, 300, chance_rate=0.25) == 0.0


def test_bad_input() -> None:
    for tau in (0.0, -0.1, 1.5, math.nan):
        with pytest.raises(ValueError, match="tau"):
            min_n_for_zero_recoveries(tau)
    with pytest.raises(ValueError, match="n must"):
        max_recoveries_for_removed(0, 0.5)
    with pytest.raises(ValueError, match="more than"):
        min_n_for_zero_recoveries(1e-12)


def test_best_tier_supportable() -> None:
    assert best_tier_supportable(30, 0.5) == 4  # bound at k=0 is 0.11 < 0.5 and R21's Tier 2 count is met
    assert best_tier_supportable(29, 0.5) == 1  # below R21's n ≥ 30 per cell: the ladder stops at Tier 1
    assert best_tier_supportable(30, 0.1) == 2  # 0.1135 ≥ 0.1: the Tier 3/4 bound is out of reach
    assert best_tier_supportable(35, 0.1) == 4


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=0.002, max_value=1.0, allow_nan=False))
def test_min_n_is_the_smallest(tau: float) -> None:
    n = min_n_for_zero_recoveries(tau)
    assert upper_bound(0, n) < tau
    assert n == 1 or upper_bound(0, n - 1) >= tau


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1, max_value=2000), st.floats(min_value=0.001, max_value=1.0, allow_nan=False))
def test_max_recoveries_is_the_largest(n: int, tau: float) -> None:
    k = max_recoveries_for_removed(n, tau)
    if k is None:
        assert upper_bound(0, n) >= tau
    else:
        assert upper_bound(k, n) < tau
        assert k == n or upper_bound(k + 1, n) >= tau
