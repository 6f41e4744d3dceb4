"""Relearning recovery curves of the post-removal model and the control, checkpoint by checkpoint (C-W5, C-W2).

This is the input the reports plot and the manifest records. The orchestrator converts what
``remnant.train.relearn`` returns into :class:`RelearningCurve`; nothing here imports torch or matplotlib.

C-W5 requires the never-modified control to be relearned under the identical procedure and its curve reported beside
the post-removal model's at every scored checkpoint; C-W2 makes the relearning-set size (the budget) the headline,
and the number of examples at which the post-removal model's recovery exceeds the control's the quantity a
decision-maker needs (:func:`separation`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, model_validator

from remnant.stats import wilson_interval


def wilson(k: int, n: int) -> tuple[float, float]:
    """Two-sided 95% Wilson score interval of k/n (R19)."""
    lo, hi = wilson_interval(k, n)
    return float(lo), float(hi)


def net_of_chance(rate: float, chance: float) -> float:
    """A rate net of the chance rate, floored at zero (C-Q3, DESIGN §4)."""
    return max(rate - chance, 0.0) if chance else rate


class CurvePoint(BaseModel):
    """One scored checkpoint: both models' k/n on the same held-out items after the same relearning (C-W5)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    checkpoint: str = Field(description="Checkpoint label, e.g. 'step-8' or 'epoch-0.25' (C-W3).")
    step: int = Field(ge=0, description="Optimiser steps taken when this checkpoint was scored.")
    examples: int = Field(ge=0, description="Relearning examples seen by this checkpoint (the x axis, C-W2).")
    post_k: int = Field(ge=0, description="Post-removal model: items recovered.")
    post_n: int = Field(ge=1, description="Post-removal model: items scored.")
    control_k: int | None = Field(default=None, ge=0, description="Control: items recovered (None: not run).")
    control_n: int | None = Field(default=None, ge=1, description="Control: items scored (None: not run).")

    @model_validator(mode="after")
    def _counts_fit(self) -> CurvePoint:
        if self.post_k > self.post_n:
            raise ValueError(f"checkpoint {self.checkpoint}: post_k {self.post_k} > post_n {self.post_n}")
        if (self.control_k is None) != (self.control_n is None):
            raise ValueError(f"checkpoint {self.checkpoint}: control_k and control_n go together")
        if self.control_k is not None and self.control_n is not None and self.control_k > self.control_n:
            raise ValueError(f"checkpoint {self.checkpoint}: control_k > control_n")
        return self


class RelearningCurve(BaseModel):
    """One relearning arm at one budget: the post-removal model's and the control's curves (C-W5)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    attack: str = Field(default="relearning", description="Registered attack name of this arm.")
    budget: int = Field(ge=1, description="Relearning-set size in examples, reported prominently (C-W2).")
    split: str = Field(
        default="item-disjoint", description="How the relearn set relates to the scored items."
    )
    adjudicating: bool = Field(
        default=True, description="False for the arm that relearns on the scored items (C-W6)."
    )
    metric: str = Field(default="kappa", description="The gating metric scored at each checkpoint (R6).")
    tau: float = Field(ge=0, le=1, description="Pre-registered τ drawn on the plot.")
    chance_rate: float = Field(default=0.0, ge=0, le=1, description="Chance rate for a forced-choice target.")
    points: list[CurvePoint] = Field(min_length=1, description="Scored checkpoints in training order.")

    @model_validator(mode="after")
    def _ordered(self) -> RelearningCurve:
        steps = [p.step for p in self.points]
        if steps != sorted(steps):
            raise ValueError("curve points must be in training order (non-decreasing step)")
        return self


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
    lo, hi = wilson(k, n)
    return net_of_chance(k / n, chance), (net_of_chance(lo, chance), net_of_chance(hi, chance))


def point_views(curve: RelearningCurve) -> list[PointView]:
    """Every checkpoint of ``curve`` with its rates and intervals, net of chance where the target is MCQ."""
    views: list[PointView] = []
    for p in curve.points:
        post_rate, post_ci = _rate(p.post_k, p.post_n, curve.chance_rate)
        control_rate: float | None = None
        control_ci: tuple[float, float] | None = None
        if p.control_k is not None and p.control_n is not None:
            control_rate, control_ci = _rate(p.control_k, p.control_n, curve.chance_rate)
        views.append(
            PointView(
                checkpoint=p.checkpoint,
                step=p.step,
                examples=p.examples,
                post_k=p.post_k,
                post_n=p.post_n,
                post_rate=post_rate,
                post_ci=post_ci,
                control_k=p.control_k,
                control_n=p.control_n,
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
