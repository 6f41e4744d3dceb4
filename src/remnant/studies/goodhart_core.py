"""The Goodhart arm's record and its reading (the J-Access paper, Test 3), torch-free so a report can be rebuilt anywhere.

Each row is one removal run at one penalty weight λ (λ = 0: the base method alone) and one seed, with the audit
read on the result (J-Access: JOcc between the installed and never-modified anchors, lower = less access; UDS:
higher = deeper erasure), the forget and retain recall, and the relearning recovery (share of the removed gap a
held-out relearning attack restored, §4.2). The reading: did the audit *improve* with λ (J-Access fell, UDS rose)
while recovery did *not* fall (it stayed within ``tolerance`` of λ = 0's or rose)? That is the paper's finding for
J-Access ("the model learns to hide knowledge from the audit", the J-Access paper, Test 3). The objective is a study
instrument only: it is never registered as a removal method and never offered in an assessment (C-H6).
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Literal

from pydantic import Field

from remnant.stats import spearman
from remnant.studies.config import GoodhartConfig, StudyModel


class GoodhartRow(StudyModel):
    """One removal run."""

    weight: float = Field(description="Penalty weight λ on the audit surrogate.")
    seed: int = Field(description="Removal seed.")
    status: str = Field(description="Removal outcome (completed / diverged).")
    audit: float | None = Field(description="The audit's score on the removed model.")
    surrogate_final: float | None = Field(
        default=None,
        description="The surrogate on the removed model over every forget item (lower: optimised).",
    )
    kappa_forget: float = Field(description="κ on the scored probe set P after removal.")
    kappa_forget_installed: float = Field(description="κ_P of the installed model.")
    kappa_retain: float = Field(description="κ on retained installed items after removal.")
    kappa_retain_installed: float = Field(description="Retained κ of the installed model.")
    relearned: float | None = Field(description="Best κ_P after relearning.")
    recovery: float | None = Field(description="(relearned − removed) / (installed − removed); None: no gap.")
    control_relearned: float | None = Field(description="Best κ_P of the never-modified control relearned.")


class WeightSummary(StudyModel):
    """Means at one λ."""

    weight: float = Field(description="λ.")
    n: int = Field(description="Runs that completed.")
    audit: float | None = Field(description="Mean audit score.")
    recovery: float | None = Field(description="Mean recovery.")
    kappa_forget: float | None = Field(description="Mean κ_P after removal.")
    kappa_retain: float | None = Field(description="Mean retained κ after removal.")


class GoodhartResult(StudyModel):
    """The study's record and reading."""

    study: Literal["goodhart"] = Field(default="goodhart", description="Study kind.")
    adjudicating: Literal[False] = Field(default=False, description="A study, never evidence (C-H6).")
    config: GoodhartConfig = Field(description="The pre-registered config.")
    registration: dict[str, Any] | None = Field(default=None, description="prereg digest, time, deviations.")
    surrogate: str = Field(description="The differentiable surrogate minimised, in words.")
    audit_direction: Literal["lower", "higher"] = Field(description="Which way the audit reads 'better'.")
    rows: list[GoodhartRow] = Field(description="Every run.")
    by_weight: list[WeightSummary] = Field(description="Means per λ.")
    rho_audit: float | None = Field(description="Spearman ρ of λ with the audit score over completed runs.")
    rho_recovery: float | None = Field(description="Spearman ρ of λ with recovery.")
    audit_improved: bool | None = Field(description="The audit read better at the largest λ than at λ = 0.")
    recovery_did_not_fall: bool | None = Field(description="Recovery at the largest λ ≥ λ = 0's − tolerance.")
    goodhart: bool | None = Field(description="Both: the score moved while recovery did not.")
    finding: str = Field(description="The reading in one sentence.")
    provenance: dict[str, Any] = Field(default_factory=dict, description="Model, pack and parameters.")


def _mean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None and not math.isnan(v)]
    return statistics.fmean(kept) if kept else None


def summarise(rows: list[GoodhartRow], cfg: GoodhartConfig) -> dict[str, object]:
    """The per-λ means, the trends and the reading (fields of :class:`GoodhartResult`)."""
    done = [r for r in rows if r.status == "completed"]
    by_weight = [
        WeightSummary(
            weight=w,
            n=len(mine),
            audit=_mean([r.audit for r in mine]),
            recovery=_mean([r.recovery for r in mine]),
            kappa_forget=_mean([r.kappa_forget for r in mine]),
            kappa_retain=_mean([r.kappa_retain for r in mine]),
        )
        for w in cfg.weights
        for mine in [[r for r in done if r.weight == w]]
    ]
    direction: Literal["lower", "higher"] = "lower" if cfg.audit == "j_access" else "higher"

    def trend(attr: str) -> float | None:
        pairs = [(r.weight, getattr(r, attr)) for r in done if getattr(r, attr) is not None]
        if len(pairs) < 3 or len({w for w, _ in pairs}) < 2:
            return None
        rho = spearman([w for w, _ in pairs], [v for _, v in pairs])
        return None if math.isnan(rho) else rho

    base, top = by_weight[0], by_weight[-1]
    improved = None
    if base.audit is not None and top.audit is not None:
        improved = top.audit < base.audit if direction == "lower" else top.audit > base.audit
    held = None
    if base.recovery is not None and top.recovery is not None:
        held = top.recovery >= base.recovery - cfg.tolerance
    goodhart = None if improved is None or held is None else improved and held
    audit = "J-Access" if cfg.audit == "j_access" else "UDS"
    if goodhart:
        finding = (
            f"Minimising the {audit} surrogate moved the audit score the 'good' way (λ {base.weight:g} → "
            f"{top.weight:g}: {base.audit:.3f} → {top.audit:.3f}) while relearning recovery did not fall "
            f"({base.recovery:.3f} → {top.recovery:.3f}): the audit was optimised, the target was not removed."
        )
    elif goodhart is None:
        finding = "Not enough completed runs with an audit score and a recovery to read the trend."
    else:
        finding = (
            f"The {audit} score {'improved' if improved else 'did not improve'} with λ and recovery "
            f"{'did not fall' if held else 'fell'}: no audit-gaming at these settings."
        )
    return {
        "audit_direction": direction,
        "by_weight": by_weight,
        "rho_audit": trend("audit"),
        "rho_recovery": trend("recovery"),
        "audit_improved": improved,
        "recovery_did_not_fall": held,
        "goodhart": goodhart,
        "finding": finding,
    }


__all__ = ["GoodhartResult", "GoodhartRow", "WeightSummary", "summarise"]
