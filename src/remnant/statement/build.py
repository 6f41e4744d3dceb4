"""Build a conformance statement from the verdict facts and what the run recorded (K4, K5: emitted by tooling).

The verdict is computed here with :func:`remnant.standard.verdict.decide`, never passed in, so a statement always
agrees with its own facts (V1); its scope qualifier (V4) and validity period (V5) come from
:mod:`remnant.standard.scope` and :mod:`remnant.standard.validity`. Surfaces are summarised from the facts and
point at the per-cell results they aggregate (R22). The ``installation`` block repeats the facts' installation record
(R2), or marks it absent with the reason (K6).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from remnant.standard.derive import UNDEFINED_UTILITY
from remnant.standard.facts import InstallationFact, VerdictFacts
from remnant.standard.scope import scope_qualifier
from remnant.standard.tier import TierAward, parse_tier_label, tier_label
from remnant.standard.validity import validity_until
from remnant.standard.verdict import decide, net_rate
from remnant.standard.vocabulary import ADMITTED_SURFACES, worst_status
from remnant.statement.absent import Absent
from remnant.statement.schema import (
    INSTALLATION_NOT_RECORDED,
    RECORDS_NOT_CHAINED,
    Assessor,
    Cell,
    ClassDBlock,
    ConformanceStatement,
    Deviation,
    LatentBlock,
    ModelIdentity,
    PackRef,
    PreRegistration,
    SurfaceOutcome,
    Utility,
    Verification,
    Versions,
)


def facts_dict(facts: BaseModel | Mapping[str, object]) -> dict[str, Any]:
    """The facts as their JSON form (aliases, e.g. ``class``), whether given as a model or a mapping."""
    if isinstance(facts, BaseModel):
        return facts.model_dump(mode="json", by_alias=True)
    return dict(facts)


#: Cell-id suffix of a Class D measurement's never-installed control entities (D4), scored on the post-removal model.
CONTROL_ENTITIES = "control_entities"


def _fact_counts(attack: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """(cell-id suffix, model state, k key, n key) of the cells one run attack fact carries.

    Class A–C: the post-removal model and the never-modified control model (R4). A Class D measurement (a fact
    with ``risk``) keeps its ``control_k``/``control_n`` for the never-installed control entities, scored on the
    post-removal model under the identical measurement (D4): a post-removal cell named ``…/control_entities``, not
    a control-model cell. Its control-model counts (V1a) are ``control_model_k``/``control_model_n``.
    """
    if attack.get("risk") is None:
        return [("post_removal", "post_removal", "k", "n"), ("control", "control", "control_k", "control_n")]
    return [
        ("post_removal", "post_removal", "k", "n"),
        (f"post_removal/{CONTROL_ENTITIES}", "post_removal", "control_k", "control_n"),
        ("control", "control", "control_model_k", "control_model_n"),
    ]


def cells_from_facts(facts: Mapping[str, Any]) -> list[Cell]:
    """The cells of every attack that ran, ids ``name/surface/`` and :func:`_fact_counts`'s suffix (R19, R22)."""
    chance = float(facts.get("chance_rate") or 0.0)
    metric = facts["gating_metric"]
    cells: list[Cell] = []
    for attack in facts.get("attacks", []):
        if attack.get("status") != "run":
            continue
        for suffix, state, k_key, n_key in _fact_counts(attack):
            k, n = attack.get(k_key), attack.get(n_key)
            if k is None or not n:
                continue
            net = net_rate(int(k), int(n), chance)
            cells.append(
                Cell(
                    cell_id=f"{attack['name']}/{attack['surface']}/{suffix}",
                    model_state=state,
                    attack=attack["name"],
                    surface=attack["surface"],
                    metric=metric,
                    k=int(k),
                    n=int(n),
                    rate=net.point,
                    ci95=(net.lower, net.upper),
                )
            )
    return cells


def installation_block(facts: Mapping[str, Any]) -> InstallationFact | Absent:
    """The statement's ``installation`` from the facts' (R2): the installation record itself; absent, saying so,
    where documented provenance fixes the target (nothing was installed or measured, K6) or the facts record
    neither. ValueError (pydantic's) when the facts' record disagrees with itself."""
    raw = facts.get("installation")
    if raw is None:
        return Absent(reason=INSTALLATION_NOT_RECORDED)
    fact = InstallationFact.model_validate(raw)
    if fact.fixed_by == "provenance":
        return Absent(
            reason=f"no installation: the target is fixed by documented provenance (R2): {fact.provenance}"
        )
    return fact


def summarise_surfaces(facts: Mapping[str, Any], cells: Sequence[Cell]) -> dict[str, SurfaceOutcome]:
    """Per-surface outcomes from the facts: g* over run, adjudicating attacks, and the cells behind it (K4, R22)."""
    track = facts["track"]
    by_id = {cell.cell_id: cell for cell in cells}
    outcomes: dict[str, SurfaceOutcome] = {}
    for surface in ADMITTED_SURFACES["W"]:  # the adjudicating surfaces
        attacks = [a for a in facts.get("attacks", []) if a.get("surface") == surface]
        if track == "Q" and surface != "inference_time":
            if attacks:
                outcomes[surface] = SurfaceOutcome(
                    status="inadmissible", reason="Q-track admits only the inference-time surface (R0.2, C2)"
                )
            continue
        if not attacks:
            if surface != "weight_transform":
                outcomes[surface] = SurfaceOutcome(
                    status="not_run", reason="no attack on this surface was run"
                )
            continue
        ran = [a for a in attacks if a.get("status") == "run" and a.get("adjudicating", True) is not False]
        if not ran:
            statuses = {a.get("status") for a in attacks}
            status = worst_status(statuses) or "not_run"
            if status == "not_applicable" and statuses != {"not_applicable"}:
                # not applicable only where every attack is (C-Q2); a non-adjudicating attack that ran, or one
                # with no status, leaves the surface not run
                status = "not_run"
            reasons = "; ".join(f"{a['name']}: {a.get('reason') or a.get('status')}" for a in attacks)
            outcomes[surface] = SurfaceOutcome(status=status, reason=reasons)
            continue
        treated = [by_id[f"{a['name']}/{surface}/post_removal"] for a in ran]
        best = max(treated, key=lambda cell: cell.rate)
        control = by_id.get(f"{best.attack}/{surface}/control")
        outcomes[surface] = SurfaceOutcome(
            status="run",
            g_star=best.rate,
            ci95=best.ci95,
            n=best.n,
            control_g=control.rate if control else None,
            control_ci95=control.ci95 if control else None,
            control_n=control.n if control else None,
            decisive_attack=best.attack,
            cells=[c.cell_id for c in treated] + ([control.cell_id] if control else []),
        )
    return outcomes


def build_statement(
    facts: VerdictFacts | Mapping[str, object],
    *,
    claim: str,
    model: ModelIdentity,
    prereg: PreRegistration,
    pack: PackRef | Absent,
    assessor: Assessor,
    manifest_ref: str | Absent,
    assessed_on: dt.date,
    versions: Versions,
    target: str,
    deviations: Sequence[Deviation] = (),
    extra_cells: Sequence[Cell] = (),
    latent: LatentBlock | Absent | None = None,
    tier: TierAward | str | None = None,
    verification: Verification | None = None,
    class_d: ClassDBlock | None = None,
    records_head: str | Absent | None = None,
) -> ConformanceStatement:
    """Assemble a K4 conformance statement; the verdict is recomputed from ``facts`` (V1) and scoped (V4).

    ``tier`` is the readiness-ladder award (a :class:`TierAward` from :func:`remnant.standard.tier.award_tier`, or
    its label, e.g. "W4"), issued as a separate instrument (T1) and carrying the statement's track letter (R0.3); a
    Tier 4 award needs ``verification`` (K7). ``validity_until`` is ``assessed_on`` plus 12 months (V5).
    ValueError when a tier's track differs from the facts'.
    ``records_head`` is the chain head of the records the cells were counted from (R23); None marks it absent
    ("records not chained").
    """
    model_facts = facts if isinstance(facts, VerdictFacts) else VerdictFacts.model_validate(facts)
    raw = facts_dict(model_facts)
    result = decide(model_facts)
    cells = cells_from_facts(raw) + list(extra_cells)
    utility = raw.get("utility") or {}
    scope = scope_qualifier(
        verdict=result.verdict,
        track=raw["track"],
        target=target,
        tau=float(raw["tau"]),
        model_version=model.version,
    )
    label = _tier_label(tier, raw["track"])
    return ConformanceStatement.model_validate(
        {
            "standard_version": raw["standard_version"],
            "class": raw["class"],
            "track": raw["track"],
            "instrument": ["verdict"] + (["tier"] if tier is not None else []),
            "versions": versions,
            "claim": claim,
            "model": model,
            "pre_registration": prereg,
            "deviations": list(deviations),
            "cells": cells,
            "surfaces": summarise_surfaces(raw, cells),
            "installation": installation_block(raw),
            "utility": Utility(
                removal_stage=_utility_value(
                    utility.get("removal_stage"), "removal", utility.get(UNDEFINED_UTILITY)
                ),
                attack_stage=_utility_value(utility.get("attack_stage"), "attack"),
            ),
            "facts": raw,
            "verdict": result.verdict,
            "verdict_reasons": list(result.reasons),
            "verdict_scope": scope,
            "assessment_date": assessed_on,
            "validity_until": validity_until(assessed_on),
            "manifest_ref": manifest_ref,
            "pack": pack,
            "assessor": assessor,
            **_optional_blocks(latent, label, verification, class_d, records_head),
        }
    )


def _optional_blocks(
    latent: LatentBlock | Absent | None,
    tier_label: str | None,
    verification: Verification | None,
    class_d: ClassDBlock | None,
    records_head: str | Absent | None,
) -> dict[str, object]:
    """The blocks a statement may lack, each given or marked absent with the reason (K4, K6)."""
    no_latent = Absent(reason="no latent measurement was run (supplementary only, C-H7)")
    return {
        "latent": latent if latent is not None else no_latent,
        "tier": tier_label
        if tier_label is not None
        else Absent(reason="no tier issued: this statement issues a verdict (T1)"),
        "verification": verification or Absent(reason="not verified (K7: required only for Tier 4)"),
        "class_d": class_d or Absent(reason="Class C target: no Class D rates"),
        "records_head": records_head if records_head is not None else Absent(reason=RECORDS_NOT_CHAINED),
    }


def _tier_label(tier: TierAward | str | None, track: str) -> str | None:
    """The tier's label, refused when it is no tier or names another track (T1, R0.2, R0.3)."""
    if tier is None:
        return None
    label = tier.label if isinstance(tier, TierAward) else tier
    parsed = parse_tier_label(label)
    if parsed is None or parsed[0] != track:
        raise ValueError(f"tier {label!r} is not a {track}-track tier (W1–W4 or Q1–Q4, R0.2, R0.3)")
    return tier_label(parsed[0], parsed[1])


def _utility_value(value: Any, stage: str, undefined: Sequence[str] | None = None) -> float | Absent:
    """The stage's value, or absent saying whether it was not measured or measured over a zero reference (R11)."""
    if value is None and undefined:
        return Absent(
            reason=f"{stage}-stage utility undefined: the pre-removal model was measured at zero on "
            f"{', '.join(undefined)}, so the ratio has no value (R11)"
        )
    if value is None:
        return Absent(reason=f"{stage}-stage utility not measured")
    return float(value)
