"""Interval estimates and multiplicity corrections the Standard's claims rest on (pure, no torch).

- :func:`wilson_interval`: the two-sided Wilson score interval every reported rate carries (R19). The verdict's
  R20 test ("upper bound on g* below τ") uses the **upper end of this two-sided 95% interval**, not the one-sided
  bound.
- :func:`wilson_upper` / :func:`wilson_lower`: one-sided score bounds at ``level`` (z = Φ⁻¹(level)). The two-sided
  95% interval's ends equal the one-sided bounds at level 0.975.
- :func:`newcombe_difference`: the difference of two independent proportions with Newcombe's hybrid score
  interval (1998, method 10) — the rule on the interval of the difference that Annex F.9 names as V1's successor.
- :func:`newcombe_paired_difference`: the same for two proportions read on the same units (Newcombe's paired
  score interval, 1998b method 10), e.g. two models' hit rates on one probe set.
- :func:`holm`: Holm's step-down adjusted p-values (family-wise error over many cells, R22).
- :func:`percentile_bootstrap`: a percentile bootstrap interval driven by a caller's ``numpy.random.Generator``
  (no global seeding).
- :func:`spearman` / :func:`kendall`: rank correlations for metric meta-evaluation.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
from scipy import stats as _sps  # type: ignore[import-untyped]  # scipy ships no stubs

__all__ = [
    "holm",
    "kendall",
    "newcombe_difference",
    "newcombe_paired_difference",
    "percentile_bootstrap",
    "spearman",
    "wilson_interval",
    "wilson_lower",
    "wilson_upper",
    "z_two_sided",
]


def _check_level(level: float) -> None:
    if not (0.0 < level < 1.0) or math.isnan(level):
        raise ValueError(f"level must lie strictly between 0 and 1, got {level!r}")


def _check_counts(k: int, n: int) -> None:
    if n <= 0:
        raise ValueError(f"n must be a positive number of trials, got n={n} (R19: a rate needs its n)")
    if not 0 <= k <= n:
        raise ValueError(f"k must satisfy 0 <= k <= n, got k={k}, n={n}")


def z_two_sided(level: float = 0.95) -> float:
    """The normal quantile for a two-sided interval at ``level`` (1.959963984540054 at 0.95; R19)."""
    _check_level(level)
    return float(_sps.norm.ppf(1.0 - (1.0 - level) / 2.0))


def _score_bounds(k: int, n: int, z: float) -> tuple[float, float]:
    """Wilson score bounds for quantile ``z``, clamped to [0, 1]; exact 0 at k=0 and exact 1 at k=n."""
    p = k / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2.0 * n)) / denom
    half = (z / denom) * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n))
    # At k=0 (k=n) the lower (upper) bound is 0 (1) analytically; rounding would leave ~1e-17 instead.
    lower = 0.0 if k == 0 else min(max(centre - half, 0.0), 1.0)
    upper = 1.0 if k == n else min(max(centre + half, 0.0), 1.0)
    return lower, upper


def wilson_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Two-sided Wilson score interval for k successes in n trials (R19; 95% by default).

    Raises ``ValueError`` for n <= 0 or k outside [0, n]. The bounds are clamped to [0, 1]; at k = 0 the lower
    bound is exactly 0 and at k = n the upper bound is exactly 1.
    """
    _check_counts(k, n)
    return _score_bounds(k, n, z_two_sided(level))


def wilson_upper(k: int, n: int, level: float = 0.95) -> float:
    """One-sided Wilson upper bound at ``level`` (z = Φ⁻¹(level)).

    Not the bound R20 tests: the verdict uses the upper end of the two-sided 95% interval (R19, R20), which is
    ``wilson_upper(k, n, 0.975)``.
    """
    _check_counts(k, n)
    _check_level(level)
    return _score_bounds(k, n, float(_sps.norm.ppf(level)))[1]


def wilson_lower(k: int, n: int, level: float = 0.95) -> float:
    """One-sided Wilson lower bound at ``level`` (z = Φ⁻¹(level)); see :func:`wilson_upper`."""
    _check_counts(k, n)
    _check_level(level)
    return _score_bounds(k, n, float(_sps.norm.ppf(level)))[0]


def newcombe_difference(
    k1: int, n1: int, k2: int, n2: int, level: float = 0.95
) -> tuple[float, float, float]:
    """p1 − p2 with Newcombe's hybrid score interval (Newcombe 1998, method 10; Annex F.9's successor rule).

    Returns ``(difference, lower, upper)``. Each proportion gets its own two-sided Wilson interval at ``level``;
    the difference's bounds combine the distances from each point to its bounds in quadrature:
    lower = d − √((p1 − l1)² + (u2 − p2)²), upper = d + √((u1 − p1)² + (p2 − l2)²).
    Newcombe's example (a), 56/70 vs 48/80, gives 0.2000 (0.0524, 0.3339).
    """
    l1, u1 = wilson_interval(k1, n1, level)
    l2, u2 = wilson_interval(k2, n2, level)
    p1, p2 = k1 / n1, k2 / n2
    d = p1 - p2
    lower = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    upper = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return d, max(lower, -1.0), min(upper, 1.0)


def newcombe_paired_difference(
    both: int, first_only: int, second_only: int, neither: int, level: float = 0.95
) -> tuple[float, float, float]:
    """p1 − p2 for two binary readings of the same n units, with Newcombe's paired score interval (Newcombe
    1998b, "Improved confidence intervals for the difference between binomial proportions based on paired
    data", method 10).

    ``both`` units are positive under both readings, ``first_only`` / ``second_only`` under one, ``neither`` under
    none; p1 = (both + first_only)/n, p2 = (both + second_only)/n. Each proportion gets its Wilson interval; the
    distances combine as in :func:`newcombe_difference` but with the cross term of the readings' correlation φ
    (the phi coefficient of the 2×2 table, 0 when a margin is empty):
    lower = d − √((p1 − l1)² − 2φ(p1 − l1)(u2 − p2) + (u2 − p2)²),
    upper = d + √((u1 − p1)² − 2φ(u1 − p1)(p2 − l2) + (p2 − l2)²).
    With φ = 0 it is the independent interval on equal n. Returns ``(difference, lower, upper)``.
    """
    counts = (both, first_only, second_only, neither)
    if any(c < 0 for c in counts):
        raise ValueError(f"paired counts must be non-negative, got {counts}")
    n = sum(counts)
    _check_counts(both + first_only, n)
    k1, k2 = both + first_only, both + second_only
    l1, u1 = wilson_interval(k1, n, level)
    l2, u2 = wilson_interval(k2, n, level)
    p1, p2 = k1 / n, k2 / n
    margins = (both + first_only) * (second_only + neither) * (both + second_only) * (first_only + neither)
    phi = (both * neither - first_only * second_only) / math.sqrt(margins) if margins else 0.0
    d = p1 - p2
    below = (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2
    above = (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2
    return d, max(d - math.sqrt(max(below, 0.0)), -1.0), min(d + math.sqrt(max(above, 0.0)), 1.0)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order (controls the family-wise error rate).

    With the m p-values sorted ascending, the i-th (1-based) adjusted value is
    max over j <= i of min(1, (m − j + 1)·p_(j)). Raises ``ValueError`` for a p-value outside [0, 1].
    """
    values = [float(p) for p in pvalues]
    for p in values:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p-values must lie in [0, 1], got {p!r}")
    m = len(values)
    order = sorted(range(m), key=lambda i: values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * values[index]))
        adjusted[index] = running
    return adjusted


def percentile_bootstrap(
    data: npt.ArrayLike,
    statistic: Callable[[npt.NDArray[np.float64]], float],
    rng: np.random.Generator,
    n_resamples: int = 2000,
    level: float = 0.95,
) -> tuple[float, float, float]:
    """Percentile bootstrap: ``(statistic(data), lower, upper)`` at a two-sided ``level``.

    Rows (axis 0) are resampled with replacement, so paired observations stay together when ``data`` is 2-D.
    Randomness comes only from ``rng`` (derive it from the pre-registered seed; no global seeding).
    """
    _check_level(level)
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    array = np.asarray(data, dtype=np.float64)
    if array.ndim == 0 or array.shape[0] == 0:
        raise ValueError("percentile_bootstrap needs at least one observation")
    rows = array.shape[0]
    estimate = float(statistic(array))
    draws = np.empty(n_resamples, dtype=np.float64)
    for i in range(n_resamples):
        draws[i] = statistic(array[rng.integers(0, rows, size=rows)])
    alpha = (1.0 - level) / 2.0
    lower, upper = np.quantile(draws, [alpha, 1.0 - alpha])
    return estimate, float(lower), float(upper)


def _paired(x: Sequence[float], y: Sequence[float]) -> tuple[list[float], list[float]]:
    xs, ys = [float(v) for v in x], [float(v) for v in y]
    if len(xs) != len(ys):
        raise ValueError(f"rank correlation needs paired values, got {len(xs)} and {len(ys)}")
    if len(xs) < 2:
        raise ValueError("rank correlation needs at least two pairs")
    return xs, ys


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's ρ (ties get average ranks); NaN when either input is constant."""
    xs, ys = _paired(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", _sps.ConstantInputWarning)
        return float(_sps.spearmanr(xs, ys).statistic)


def kendall(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's τ-b (tie-corrected); NaN when either input is constant."""
    xs, ys = _paired(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", _sps.ConstantInputWarning)
        return float(_sps.kendalltau(xs, ys).statistic)
