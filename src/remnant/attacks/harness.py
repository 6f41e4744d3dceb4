"""Rates of one attack's outcomes on one model state (R6, R19, R22).

Each state's cell reports κ and w as separate rates (R6), each as k, n and a Wilson interval (R19), per state
(R22); the cells are run by :class:`remnant.engine.attack.AttackMeasurement`.

What a cell's k/n counts: items. For attacks that score an output, k is the number of probes whose scored output
hit. For analytic attacks (κ a probability per item), ``expected_k`` is the exact expected count Σ p_i and the
Rate uses k = round(Σ p_i) so that it still has an interval; both are recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from remnant.attacks.base import ItemOutcome
from remnant.score.probe import Probe
from remnant.score.rates import Rate, count_items


@dataclass(frozen=True)
class StateResult:
    """One state's cell under one attack: κ and w rates (separately, R6), per-item outcomes, time taken."""

    state: str
    kappa: Rate
    willing: Rate | None
    outcomes: tuple[ItemOutcome, ...]
    seconds: float
    expected_k: float | None = None


def cell(state: str, outcomes: Sequence[ItemOutcome], probes: Sequence[Probe], seconds: float) -> StateResult:
    """Rates for one state from its outcomes (see module docstring for what k counts)."""
    chance = sum(p.chance_rate for p in probes) / len(probes) if probes else 0.0
    counts = count_items([o.kappa for o in outcomes], [o.willing for o in outcomes])
    kappa = Rate.of(counts.k, counts.n, chance=chance)
    willing = Rate.of(counts.willing_k, counts.willing_n) if counts.willing_n else None
    return StateResult(state, kappa, willing, tuple(outcomes), seconds, counts.expected_k)


__all__ = ["StateResult", "cell"]
