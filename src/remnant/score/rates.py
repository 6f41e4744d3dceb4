"""Rates as counts: k, n and the two-sided 95% Wilson interval, per cell (R19, R22).

A rate is never a bare proportion. Net-of-chance rates (multiple choice) shift the point and both bounds by the
chance rate and floor them at zero (R19, R20), computed from the raw k/n interval.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

WILSON_LEVEL = 0.95


def _wilson(k: int, n: int, level: float) -> tuple[float, float]:
    # Imported here: remnant.stats is the one implementation of the interval (R19).
    from remnant.stats import wilson_interval

    lo, hi = wilson_interval(k, n, level=level)
    return float(lo), float(hi)


@dataclass(frozen=True)
class Rate:
    """k of n, with its Wilson interval (R19). ``chance`` > 0 marks a multiple-choice rate (net of chance)."""

    k: int
    n: int
    lo: float
    hi: float
    level: float = WILSON_LEVEL
    chance: float = 0.0

    @classmethod
    def of(cls, k: int, n: int, *, chance: float = 0.0, level: float = WILSON_LEVEL) -> Rate:
        """The rate k/n with its Wilson interval at ``level`` (two-sided)."""
        if n < 0 or k < 0 or k > n:
            raise ValueError(f"a rate needs 0 <= k <= n, got k={k}, n={n}")
        lo, hi = _wilson(k, n, level) if n else (0.0, 1.0)
        return cls(k=int(k), n=int(n), lo=lo, hi=hi, level=level, chance=float(chance))

    @classmethod
    def count(cls, hits: Iterable[bool], *, chance: float = 0.0) -> Rate:
        flags = [bool(h) for h in hits]
        return cls.of(sum(flags), len(flags), chance=chance)

    @property
    def point(self) -> float:
        """Raw proportion k/n (0 when n = 0)."""
        return self.k / self.n if self.n else 0.0

    @property
    def net(self) -> float:
        """Point net of chance, floored at zero (equals ``point`` when chance is 0)."""
        return max(0.0, self.point - self.chance)

    @property
    def net_interval(self) -> tuple[float, float]:
        """Wilson bounds net of chance, floored at zero."""
        return max(0.0, self.lo - self.chance), max(0.0, self.hi - self.chance)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "k": self.k,
            "n": self.n,
            "rate": self.point,
            "wilson": [self.lo, self.hi],
            "level": self.level,
        }
        if self.chance:
            out["chance_rate"] = self.chance
            out["net_of_chance"] = self.net
            out["net_wilson"] = list(self.net_interval)
        return out


@dataclass(frozen=True)
class ItemCounts:
    """What one cell counts from its items (R6, R19): κ's k of n and w's k of the items judged.

    ``expected_k`` is Σ p_i when some item's κ is a probability (an analytic attack); k is then round(Σ p_i),
    capped at n, so the rate still has an interval. None when every κ is a bool (k counts the hits).
    """

    k: int
    n: int
    expected_k: float | None
    willing_k: int
    willing_n: int


def count_items(kappas: Sequence[bool | float], willing: Sequence[bool | None]) -> ItemCounts:
    """The one rule from item results to a cell's counts: the attack harness builds cells with it and
    ``remnant recompute`` re-derives a recorded cell's k/n from its observations with it (R23)."""
    expected: float | None = None
    if any(not isinstance(v, bool) for v in kappas):
        expected = float(sum(float(v) for v in kappas))
        k = min(len(kappas), round(expected))
    else:
        k = sum(bool(v) for v in kappas)
    judged = [bool(w) for w in willing if w is not None]
    return ItemCounts(k=k, n=len(kappas), expected_k=expected, willing_k=sum(judged), willing_n=len(judged))
