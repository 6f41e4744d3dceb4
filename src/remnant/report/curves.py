"""Relearning recovery curves as the reports show them: rates net of chance with Wilson bounds, and where the
post-removal curve separates from the control's (C-W5, C-W2).

The curves themselves are core data recorded in the manifest (:mod:`remnant.curves`). C-W2 makes the number of
examples at which the post-removal model's recovery exceeds the control's the quantity a decision-maker needs
(:func:`separation`).
Nothing here imports torch or matplotlib.
"""

from __future__ import annotations

from dataclasses import dataclass

from remnant.curves import RelearningCurve
from remnant.standard.verdict import net_rate

__all__ = ["PointView", "Separation", "point_views", "separation"]


@dataclass(frozen=True)
class PointView:
    """A checkpoint as the report shows it: rates net of chance with Wilson bounds (R19)."""

    checkpoint: str
    step: int
    examples: int
    post_k: int
    post_n: int
    post_rate: float
    post_ci: tuple[float, float]
    control_k: int | None
    control_n: int | None
    control_rate: float | None
    control_ci: tuple[float, float] | None


def _rate(k: int, n: int, chance: float) -> tuple[float, tuple[float, float]]:
    """A rate and its Wilson interval net of chance, floored at zero, as the verdict reads them (C-Q3, R19)."""
    rate = net_rate(k, n, chance)
    return rate.point, (rate.lower, rate.upper)


def point_views(curve: RelearningCurve) -> list[PointView]:
    """Every checkpoint of ``curve`` with its rates and intervals, net of chance where the target is MCQ."""
    views: list[PointView] = []
    for p in curve.points:
        post_rate, post_ci = _rate(p.post_k, p.post_n, curve.chance_rate)
        control_rate: float | None = None
        control_ci: tuple[float, float] | None = None
        if p.control_k is not None and p.control_n is not None:
            control_rate, control_ci = _rate(p.control_k, p.control_n, curve.chance_rate)
        # a point's own fields (checkpoint, step, examples and the counts) as recorded, with rates beside them
        views.append(
            PointView(
                **p.model_dump(),
                post_rate=post_rate,
                post_ci=post_ci,
                control_rate=control_rate,
                control_ci=control_ci,
            )
        )
    return views


@dataclass(frozen=True)
class Separation:
    """Where the post-removal curve first separates from the control's (C-W2's headline quantity)."""

    at_tau: PointView | None  # first checkpoint with post ≥ τ and control < τ (V1's point reading)
    by_interval: PointView | None  # first checkpoint whose post lower bound exceeds the control upper bound
    control_reaches_tau: PointView | None  # first checkpoint at which the control itself reaches τ (V1a)


def separation(curve: RelearningCurve) -> Separation:
    """The first checkpoints at which the two curves separate, and at which the control reaches τ (C-W2, V1a)."""
    at_tau = by_interval = control_tau = None
    for view in point_views(curve):
        if view.control_rate is None or view.control_ci is None:
            continue
        if at_tau is None and view.post_rate >= curve.tau > view.control_rate:
            at_tau = view
        if by_interval is None and view.post_ci[0] > view.control_ci[1]:
            by_interval = view
        if control_tau is None and view.control_rate >= curve.tau:
            control_tau = view
    return Separation(at_tau=at_tau, by_interval=by_interval, control_reaches_tau=control_tau)
