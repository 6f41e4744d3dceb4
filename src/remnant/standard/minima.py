"""R21's minimum evaluation-set sizes, computed from the bound they follow from rather than copied as counts.

R21: "Minimum evaluation-set sizes follow from R20 and the tier claimed. The requirement is the bound, not the
count; the counts below are the implied minima at zero observed recoveries." R20 puts the claim on the upper
bound of the two-sided 95% Wilson interval (R19) lying below τ, so the minimum n for a threshold τ is the
smallest n at which k = 0 gives an upper bound strictly below τ.

The bound is the upper end of the *two-sided* 95% interval (R19), not a one-sided 95% bound: R20 speaks of "the
upper bound of the interval", and the verdict engine (R20) tests the same number.

Reconciling the Standard's table. At k = 0 the Wilson upper end is z²/(n + z²), z = 1.96, so a count n is
enough exactly for thresholds above that value:

====================  ==========  =============================================
R21 row               table n     τ the count supports at k = 0 (Wilson 95%)
====================  ==========  =============================================
Tier 2                30          no recovery claim, so no bound (count only)
Tier 3                100         τ > 0.0370
Tier 4 (Class C)      300         τ > 0.0126
Tier 4 (Class D)      500         τ > 0.0076 (the insignificance threshold)
====================  ==========  =============================================

The counts match the "rule of three" (3/n: 0.03, 0.01, 0.006) more closely than they match Wilson; at those
thresholds the Wilson bound needs n = 125, 381 and 637. For a typical capability threshold (τ = 0.5) four items
suffice at k = 0. remnant therefore treats the bound as the requirement (as R21 says) and reports the table's
count beside it as the Standard's calibration constant (Annex F.2: "guesses informed by structure"), never as a
gate for Tiers 3 and 4. Tier 2 makes no recovery claim, so there the count is the only bar R21 gives.
"""

from __future__ import annotations

from dataclasses import dataclass

from remnant.stats import wilson_interval

#: The largest n the search considers: a τ that needs more is a configuration error, not a minimum.
MAX_N = 10**9


def upper_bound(k: int, n: int, *, chance_rate: float = 0.0) -> float:
    """Upper end of the two-sided Wilson interval of k/n, net of ``chance_rate`` and floored at 0 (R19, R20).

    Net of chance as the verdict reads it (R19, R20): the bound on the raw k/n is shifted down by the chance
    rate (κ for multiple-choice targets, §2) and floored at zero.
    """
    hi = wilson_interval(k, n)[1]
    return max(hi - chance_rate, 0.0)


def _check_threshold(tau: float) -> None:
    if not 0.0 < tau <= 1.0:
        raise ValueError(f"tau must lie in (0, 1] (R20), got {tau!r}")


def min_n_for_zero_recoveries(tau: float) -> int:
    """The smallest n at which zero recoveries give a Wilson upper bound strictly below ``tau`` (R20, R21).

    "Strictly": R20 asks for the bound to lie *below* τ, so a bound exactly at τ does not count. The bound at
    k = 0 falls as n grows, so the answer is found by doubling then bisecting over the real interval function
    (not its closed form), which keeps it exact for whatever interval :mod:`remnant.stats` computes.
    """
    _check_threshold(tau)

    def below(n: int) -> bool:
        return upper_bound(0, n) < tau

    if below(1):
        return 1
    lo, hi = 1, 2  # invariant: not below(lo), below(hi) once found
    while not below(hi):
        lo, hi = hi, hi * 2
        if hi > MAX_N:
            raise ValueError(f"tau = {tau!r} needs more than {MAX_N} items at zero recoveries (R21)")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if below(mid):
            hi = mid
        else:
            lo = mid
    return hi


def max_recoveries_for_removed(n: int, tau: float) -> int | None:
    """The largest k out of n whose Wilson upper bound still lies strictly below ``tau``; None if even k = 0 fails.

    This is how many recoveries an attack can show on n items and still leave a *not recovered* claim standing
    (R20, V1's *removed* row). The upper bound rises with k, so the answer is found by bisection.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1 (R19), got {n!r}")
    _check_threshold(tau)

    def below(k: int) -> bool:
        return upper_bound(k, n) < tau

    if not below(0):
        return None
    lo, hi = 0, n + 1  # invariant: below(lo); hi is past the answer (k = n + 1 does not exist)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mid <= n and below(mid):
            lo = mid
        else:
            hi = mid
    return lo


@dataclass(frozen=True)
class R21Row:
    """One row of R21's table: the tier, the claim class it applies to, and the Standard's implied count."""

    tier: int
    scope: str
    table_n: int


#: R21's table, in the Standard's order.
R21_TABLE: tuple[R21Row, ...] = (
    R21Row(tier=2, scope="any", table_n=30),  # no recovery claim made: the count is the only bar
    R21Row(tier=3, scope="any", table_n=100),  # upper bound < τ on at least one attack surface
    R21Row(tier=4, scope="C", table_n=300),  # upper bound < τ on every required surface
    R21Row(tier=4, scope="D", table_n=500),  # upper bound < the declared insignificance threshold, per canary
)

#: R21's Tier 2 row: behavioural evidence with no recovery claim needs n ≥ 30 per cell.
TIER2_MIN_N = R21_TABLE[0].table_n


def r21_row(tier: int, class_: str = "C") -> R21Row:
    """The R21 row for ``tier`` (2, 3 or 4) and, at Tier 4, the claim class."""
    for row in R21_TABLE:
        if row.tier == tier and row.scope in ("any", class_):
            return row
    raise ValueError(f"R21 has no row for Tier {tier} (class {class_})")


def best_tier_supportable(n: int, threshold: float, *, chance_rate: float = 0.0) -> int:
    """The highest tier whose R21 statistical bar ``n`` items per cell can meet even at zero recoveries.

    Tiers 3 and 4 share the bound (4 asks it of every required surface, 3 of one), so the answer is 4 when the
    bound at k = 0 is below the threshold, 2 when only R21's Tier 2 count is met, else 1. This is the statistical
    bar alone; the other rungs' criteria live in :mod:`remnant.standard.tier`.
    """
    if n >= 1 and upper_bound(0, n, chance_rate=chance_rate) < threshold:
        return 4 if n >= TIER2_MIN_N else 1
    return 2 if n >= TIER2_MIN_N else 1
