"""The evidence a readiness tier is awarded from (§7.1): an :class:`EvidenceSummary` of process and surfaces.

The summary is what :func:`remnant.standard.tier.award_tier` reads. It is a serialised boundary (an assessment
writes it beside its statement), so its models forbid unknown fields. :func:`surfaces_from_facts` fills its
``surfaces`` from the verdict facts (V1) so that tier and verdict read the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from remnant.standard.derive import bar_threshold, behavioural_n, unmet_without_utility
from remnant.standard.facts import shift as net_shift
from remnant.standard.rules import GENERAL_REQUIREMENTS
from remnant.standard.verdict import Verdict
from remnant.standard.vocabulary import (
    ADMITTED_SURFACES,
    BLOCKING_STATUSES,
    CLASS_D_RISKS,
    CQ1_REQUIRED,
    Status,
    net_of,
    worst_status,
)
from remnant.stats import wilson_interval

Track = Literal["W", "Q"]
ClaimClass = Literal["C", "D"]
SurfaceName = Literal[
    "relearning", "inference_time", "weight_transform", "latent", "singling_out", "linkability", "inference"
]


class FrozenModel(BaseModel):
    """The base of the evidence summary and of the tier award (:mod:`remnant.standard.tier`): frozen, no extras."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class SurfaceEvidence(FrozenModel):
    """What one attack surface contributed: whether it ran, its n, its bound and its control."""

    surface: SurfaceName = Field(description="The attack surface (§4.2, §4.3, §5.2–§5.4).")
    status: Status = Field(description="'run' when an admitted attack on it ran (C-Q2 for N/A).")
    n: int | None = Field(default=None, ge=1, description="Smallest per-cell n behind the surface (R19).")
    upper_bound: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Largest two-sided 95% Wilson upper bound over its admitted attacks (net of chance; "
        "Class D net of the control-entity rate, D4, D-5.1).",
    )
    control_obtained: bool = Field(
        default=False,
        description="The never-modified control ran under the identical attack (R4, C-W5, C-Q4).",
    )
    battery_complete: bool = Field(
        default=True,
        description="Every attack this surface requires ran or is not applicable (C-Q1, C-Q2).",
    )
    scored_every_epoch: bool = Field(
        default=False, description="Relearning: g scored after every epoch (C-W3)."
    )
    sub_epoch_checkpoints: bool = Field(
        default=False,
        description="Relearning: g scored at declared checkpoints inside the first epoch (C-W3).",
    )
    held_out: bool = Field(
        default=False, description="Relearning: the relearning set is disjoint from P (C-W6)."
    )


class EvidenceSummary(FrozenModel):
    """The evidence a tier is awarded from (§7.1): process, behavioural evidence, surfaces, verdict, verification."""

    track: Track = Field(description="Track declared before the run (R0.1).")
    class_: ClaimClass = Field(alias="class", description="Claim class (§1.1).")
    threshold: float = Field(
        gt=0, le=1, description="τ (Class C) or the declared insignificance threshold (Class D, D-5.1)."
    )
    general_met: frozenset[str] = Field(
        default=frozenset(),
        description="The §3 requirement ids (R1–R25) the evidence meets; conditional ones (R5, R25) count as "
        "met where they do not apply.",
    )
    behavioural_n: int | None = Field(
        default=None,
        ge=1,
        description="Smallest per-cell n of the w/κ evidence on the probe set (R21 Tier 2).",
    )
    surfaces: tuple[SurfaceEvidence, ...] = Field(default=(), description="Per-surface evidence.")
    verdict: Verdict | None = Field(default=None, description="The verdict of the run, if one was run (V1).")
    conformant_run: bool = Field(
        default=False, description="A conformant run by tooling, not interview or documentary review (T2)."
    )
    public_fixture: bool = Field(default=False, description="The fixtures were publicly released (R18).")
    verified: bool = Field(
        default=False, description="A verification record by Yuyari or an Accredited Assessor exists (K7)."
    )
    independently_reproduced: bool = Field(
        default=False,
        description="The evidence was reproduced by the assessor, not only the claimant's (T4).",
    )
    deviations: int = Field(default=0, ge=0, description="Deviations from pre-registration, recorded (R15).")

    @field_validator("general_met")
    @classmethod
    def _known_general(cls, value: frozenset[str]) -> frozenset[str]:
        known = {str(rule) for rule in GENERAL_REQUIREMENTS}
        unknown = sorted(value - known)
        if unknown:
            raise ValueError(f"general_met holds ids that are not §3 requirements: {unknown}")
        return value

    def admitted(self) -> tuple[SurfaceEvidence, ...]:
        """The surfaces the track admits, and every Class D risk on either track; latent never among them (R0.2,
        C1, C2, D-5.3, C-H6)."""
        return tuple(
            s
            for s in self.surfaces
            if s.surface in ADMITTED_SURFACES[self.track] or s.surface in CLASS_D_RISKS
        )


def _surface(
    name: str,
    on: Sequence[Mapping[str, Any]],
    *,
    chance: float,
    net_of_control: bool,
    complete: bool,
    relearning_flags: tuple[bool, bool, bool],
) -> SurfaceEvidence:
    """One surface's evidence from the attacks on it (R19, R20; D4 net of control for Class D)."""
    ran = [a for a in on if a.get("status") == "run" and a.get("n")]
    if not ran:
        statuses = {str(a.get("status")) for a in on}
        status = worst_status(statuses) or "not_run"
        return SurfaceEvidence.model_validate(
            {"surface": name, "status": status, "battery_complete": complete}
        )

    def bound(a: Mapping[str, Any]) -> float:
        shift = net_shift(a.get("baseline"), chance)  # the verdict's
        # only a risk's measurement has control *entities* to be net of (D4); a plain attack's control is the
        # control model, which the verdict compares with (R3) but never subtracts
        entities = net_of_control and a.get("risk")
        net = net_of(shift, a.get("control_k") if entities else None, a.get("control_n"))
        return net(wilson_interval(int(a["k"]), int(a["n"]))[1])

    every_epoch, sub_epoch, held_out = relearning_flags if name == "relearning" else (False, False, False)
    return SurfaceEvidence.model_validate(
        {
            "surface": name,
            "status": "run",
            "n": min([int(a["n"]) for a in ran] + [int(a["control_n"]) for a in ran if a.get("control_n")]),
            "upper_bound": max(bound(a) for a in ran),
            "control_obtained": all(a.get("control_k") is not None and a.get("control_n") for a in ran),
            "battery_complete": complete,
            "scored_every_epoch": every_epoch,
            "sub_epoch_checkpoints": sub_epoch,
            "held_out": held_out,
        }
    )


def surfaces_from_facts(
    facts: Mapping[str, Any],
    *,
    scored_every_epoch: bool = False,
    sub_epoch_checkpoints: bool = False,
    held_out: bool = False,
) -> tuple[SurfaceEvidence, ...]:
    """Per-surface evidence from verdict facts in their JSON form (V1), for the surfaces they hold.

    Each surface's bound is the largest 95% Wilson upper bound over its admitted, adjudicating attacks that ran,
    net of ``chance_rate`` (R19, R20). Class D adds one surface per re-identification risk from the attacks tagged
    with it, and every Class D risk's bound is taken net of its control entities' point rate as the verdict engine
    does (D4, D-5.1). The relearning flags (C-W3, C-W6) are not in the facts and are passed in. Inference-time coverage is
    C-Q1/C-Q2: prefill, many-shot and repeated sampling each ran or are not applicable.
    """
    chance = float(facts.get("chance_rate") or 0.0)
    class_d = facts.get("class") == "D"
    admitted_surfaces = ADMITTED_SURFACES.get(str(facts.get("track")), ADMITTED_SURFACES["W"])
    attacks: Sequence[Mapping[str, Any]] = [
        a for a in facts.get("attacks") or () if a.get("adjudicating", True) is not False
    ]
    groups: list[tuple[str, list[Mapping[str, Any]]]] = [
        (name, [a for a in attacks if a.get("surface") == name]) for name in ADMITTED_SURFACES["W"]
    ]
    if class_d:  # one surface per re-identification risk, from the admitted attacks tagged with it
        groups += [
            (risk, [a for a in attacks if a.get("risk") == risk and a.get("surface") in admitted_surfaces])
            for risk in CLASS_D_RISKS
        ]
    flags = (scored_every_epoch, sub_epoch_checkpoints, held_out)
    out: list[SurfaceEvidence] = []
    for name, on in groups:
        if not on:
            continue
        complete = not {a.get("status") for a in on} & set(BLOCKING_STATUSES)
        if name == "inference_time":
            covered = {a.get("name") for a in on if a.get("status") in ("run", "not_applicable")}
            complete = complete and all(attack in covered for attack in CQ1_REQUIRED)
        out.append(
            _surface(
                name, on, chance=chance, net_of_control=class_d, complete=complete, relearning_flags=flags
            )
        )
    return tuple(out)


def best_case_evidence(facts: Mapping[str, Any], verdict: str, *, deviations: int = 0) -> EvidenceSummary:
    """The most generous evidence verdict facts (JSON form) allow (§7.1): every §3 requirement met but those an
    unmeasured utility leaves unmet (R11, R13), the relearning flags set (C-W3, C-W6), a conformant run (T2),
    verified (K7) and independently reproduced (T4), against the declared insignificance threshold, else τ. What
    ``remnant validate`` holds a stated tier to, and the Annex D.2 example's award."""
    return EvidenceSummary.model_validate(
        {
            "track": facts["track"],
            "class": facts["class"],
            "threshold": bar_threshold(facts),
            "general_met": {str(r) for r in GENERAL_REQUIREMENTS} - unmet_without_utility(facts),
            "behavioural_n": behavioural_n(facts),
            "surfaces": surfaces_from_facts(
                facts, scored_every_epoch=True, sub_epoch_checkpoints=True, held_out=True
            ),
            "verdict": verdict,
            "conformant_run": True,
            "verified": True,  # K7 is checked on the verification record itself
            "independently_reproduced": True,
            "deviations": deviations,
        }
    )
