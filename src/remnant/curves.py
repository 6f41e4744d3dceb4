"""Relearning recovery curves of the post-removal model and the control, checkpoint by checkpoint (C-W5, C-W2).

Pure core (no torch): the data the assessment records in the manifest and the reports plot. The orchestrator
converts what :mod:`remnant.engine.relearning` records into :class:`RelearningCurve`; :mod:`remnant.report.curves`
derives the rates, intervals and separation the reports show. Nothing here imports torch, matplotlib or Jinja2.

C-W5 requires the never-modified control to be relearned under the identical procedure and its curve reported beside
the post-removal model's at every scored checkpoint; C-W2 makes the relearning-set size (the budget) the headline.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


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
