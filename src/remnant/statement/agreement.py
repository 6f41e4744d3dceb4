"""Does a statement agree with itself? Its facts, cells, surfaces, utility, tier and Class D block, cross-checked.

A statement carries the same evidence several times: the verdict facts, the per-cell results they were counted
from (R22), the per-surface figures summarised from those cells (K4), the utility block (R11, R12), the tier
(§7.1) and the Class D block (D-5.1). Editing one copy and not the others is how a hand-made statement claims
more than its evidence; :func:`agreement_violations` recomputes every copy from the one below it, with the rules
that wrote it (imported, never restated), and names the requirement at each disagreement: V1 (τ, φ and g in
effect after the deviations, R15; the verdict the facts the *cells* imply give, :mod:`remnant.statement.derived`),
R22 and R4 (counts and surfaces are their cells'), R19, R11–R13 (utility), C1, C-Q1, C-Q2, D-5.3 and D-5.1 (the
attacks a *removed* verdict needs), §7.1 (the tier ceiling), D-5.1 (the Class D block) and C-W6, C-H6
(non-adjudicating arms).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from remnant.standard.derive import UNDEFINED_UTILITY, follow_deviations
from remnant.standard.evidence import best_case_evidence
from remnant.standard.facts import VerdictFacts
from remnant.standard.tier import Criterion, award_tier, parse_tier_label
from remnant.standard.verdict import decide
from remnant.standard.vocabulary import ADMITTED_SURFACES, CLASS_D_RISKS, CQ1_REQUIRED
from remnant.statement.absent import Absent, is_absent
from remnant.statement.build import cells_from_facts, summarise_surfaces
from remnant.statement.canonical import canonical_json
from remnant.statement.derived import derive
from remnant.statement.schema import Cell, ConformanceStatement, SurfaceOutcome
from remnant.statement.violation import Violation, same, show, violation

#: A requirement id inside a criterion's detail, e.g. "(C-Q1, C-Q2)" or "unmet: R11, R13".
_RULE_ID = re.compile(r"\b(?:R\d+(?:\.\d)?|[KVTZ]\d+[a-z]?|C\d|C-[WQH]\d+|D-\d(?:\.\d)?)\b")
_CHECKS: dict[str, tuple[str, ...]] = {
    "R22": ("g_star", "decisive_attack", "cells"),
    "R19": ("ci95", "n"),
    "R4": ("control_g", "control_ci95", "control_n"),
}


def _json_same(a: object, b: object) -> bool:
    try:
        return canonical_json(a) == canonical_json(b)
    except Exception:  # a value canonical JSON cannot hold equals nothing
        return False


def registered(s: ConformanceStatement) -> dict[str, Any]:
    """τ, φ and g in effect: as pre-registered, each followed in order through the deviations recorded for its
    field (R14, R15)."""
    prereg = s.pre_registration
    return {
        name: follow_deviations(field, getattr(prereg, name), s.deviations, _json_same)[0]
        for name, field in (("tau", "tau"), ("phi", "utility.phi"), ("gating_metric", "gating_metric"))
    }


def _check_registered(s: ConformanceStatement, facts: VerdictFacts, reg: dict[str, Any]) -> list[Violation]:
    """V1: the facts' τ, φ, g, class and track are the statement's."""
    out: list[Violation] = []
    for name, want in reg.items():
        stated = getattr(facts, name)
        if not same(stated, want):
            out.append(
                violation(
                    "V1",
                    f"facts.{name} {show(stated)} differs from the pre-registered value in effect "
                    f"{show(want)} (pre_registration and deviations, R14, R15)",
                )
            )
    if facts.class_ != s.class_ or facts.track != s.track:
        out.append(violation("V1", "facts class/track differ from the statement's"))
    return out


def _block_utility(s: ConformanceStatement) -> dict[str, float | None]:
    """The utility block's two stages, None where marked absent."""
    stages = {"removal_stage": s.utility.removal_stage, "attack_stage": s.utility.attack_stage}
    return {stage: None if isinstance(v, Absent) else float(v) for stage, v in stages.items()}


def _check_utility(
    s: ConformanceStatement, facts: VerdictFacts, from_cells: dict[str, Any] | None, phi: Any
) -> list[Violation]:
    """R13, R12, R11: the utility block is the facts', the facts are the utility cells'; no verdict but
    utility-collapsed beside a removal-stage utility below φ."""
    out: list[Violation] = []
    block = _block_utility(s)
    for stage, rule in (("removal_stage", "R13"), ("attack_stage", "R12")):
        fact = getattr(facts.utility, stage)
        if not same(block[stage], fact):
            out.append(
                violation(
                    rule,
                    f"utility.{stage} {show(block[stage])} differs from facts.utility.{stage} {show(fact)}",
                )
            )
        if from_cells is not None and not same(from_cells[stage], fact):
            out.append(
                violation(
                    "R11" if stage == "removal_stage" else "R12",
                    f"facts.utility.{stage} {show(fact)} is not what the utility cells give "
                    f"({show(from_cells[stage])})",
                )
            )
    undefined = facts.utility.removal_stage_undefined
    if from_cells is not None and from_cells.get(UNDEFINED_UTILITY) != undefined:
        # Whether a missing ratio was measured over a zero reference or not measured is what the reports say
        # (R11): the facts may not claim either against the cells.
        out.append(
            violation(
                "R11",
                f"facts.utility.{UNDEFINED_UTILITY} {show(undefined)} is not what the utility cells give "
                f"({show(from_cells.get(UNDEFINED_UTILITY))})",
            )
        )
    u = block["removal_stage"]
    if u is not None and isinstance(phi, int | float) and u < phi and s.verdict in ("removed", "hidden"):
        out.append(
            violation(
                "R13",
                f"verdict {s.verdict!r} stated beside removal-stage utility {show(u)} below φ = "
                f"{show(phi)}: the floor test fails, so the verdict is utility-collapsed",
            )
        )
    return out


def _check_arms(facts: VerdictFacts) -> list[Violation]:
    """C-W6: a non-adjudicating arm is relearning on the scored items; no other attack may stand aside."""
    return [
        violation(
            "C-W6",
            f"facts.attacks[{i}] ({a.name}) on {a.surface} is marked non-adjudicating; only relearning on "
            "the scored items is reported without deciding (C-W6; latent measurements, C-H6)",
        )
        for i, a in enumerate(facts.attacks)
        if not a.adjudicating and a.surface not in ("relearning", "latent")
    ]


def _surface_rule(s: ConformanceStatement, name: str, want: SurfaceOutcome | None) -> str:
    if want is not None and want.status == "inadmissible":
        return "R0.2"
    if name == "relearning":
        return "C1" if s.class_ == "C" else "D-5.3"
    if name == "inference_time" and s.class_ == "C":
        return "C-Q1"
    return "R22"


def _check_surfaces(
    s: ConformanceStatement, derived: dict[str, Any], cells: Sequence[Cell]
) -> list[Violation]:
    """R22, R19, R4 (C1, C-Q1 for a missing or misreported required surface): surfaces are their cells'."""
    out: list[Violation] = []
    expected = summarise_surfaces(derived, cells)
    for name, want in expected.items():
        got = s.surfaces.get(name)
        if got is None:
            out.append(
                violation(
                    _surface_rule(s, name, want),
                    f"surfaces.{name} is missing; its facts and cells give status {want.status!r}",
                )
            )
            continue
        if got.status != want.status:
            out.append(
                violation(
                    _surface_rule(s, name, want),
                    f"surfaces.{name}.status {got.status!r}, but its facts and cells give {want.status!r}",
                )
            )
        for rule, fields in _CHECKS.items():
            for key in fields:
                have, should = getattr(got, key), getattr(want, key)
                if not same(have, should):
                    out.append(
                        violation(
                            rule, f"surfaces.{name}.{key} {show(have)}, but its cells give {show(should)}"
                        )
                    )
    for name in sorted(set(s.surfaces) - set(expected) - {"latent"}):  # latent: C-H6, raised elsewhere
        out.append(violation("R22", f"surfaces.{name}: no attack in the facts is on this surface"))
    return out


def _check_required(s: ConformanceStatement, derived: VerdictFacts) -> list[Violation]:
    """C1 / D-5.3, C-Q1, D-5.1: a removed verdict rests on its required attacks, run with per-cell results."""
    if s.verdict != "removed":
        return []
    out: list[Violation] = []
    admitted = ADMITTED_SURFACES[s.track]
    ran = {a.name for a in derived.attacks if a.status == "run" and a.adjudicating and a.surface in admitted}
    if s.track == "W" and not any(a.surface == "relearning" and a.name in ran for a in derived.attacks):
        out.append(
            violation(
                "C1" if s.class_ == "C" else "D-5.3",
                "removed stated under W-track, but no relearning attack ran with per-cell results",
            )
        )
    if s.class_ == "C":
        for name in CQ1_REQUIRED:
            if not any(
                a.name == name
                and a.surface == "inference_time"
                and (a.name in ran or a.status == "not_applicable")
                for a in derived.attacks
            ):
                out.append(
                    violation(
                        "C-Q1",
                        f"removed stated, but required attack {name} neither ran with per-cell results "
                        "nor is recorded as not applicable (C-Q2)",
                    )
                )
    else:
        for risk in CLASS_D_RISKS:
            if not any(a.risk == risk and a.name in ran for a in derived.attacks):
                out.append(
                    violation(
                        "D-5.1",
                        f"removed stated, but no measurement of {risk.replace('_', ' ')} ran with "
                        "per-cell results",
                    )
                )
    return out


def _criterion_rule(criterion: Criterion) -> str:
    found = _RULE_ID.search(criterion.detail)
    return found.group(0) if found else criterion.rule_ids[0]


def _check_tier(s: ConformanceStatement, derived: dict[str, Any], verdict: str) -> list[Violation]:
    """§7.1: the tier is no higher than the ladder awards on the most generous evidence the facts allow."""
    parsed = parse_tier_label(s.tier) if isinstance(s.tier, str) else None
    if parsed is None:
        return []  # no tier, or not a tier (T1, raised elsewhere)
    ceiling = award_tier(best_case_evidence(derived, verdict, deviations=len(s.deviations)))
    if parsed[1] <= ceiling.tier:
        return []
    unmet = [c for c in ceiling.unmet(ceiling.tier + 1) if not c.cap]
    if not unmet:
        return []
    first = unmet[0]
    detail = f" ({first.detail})" if first.detail else ""
    return [
        violation(
            _criterion_rule(first),
            f"tier {s.tier!r} is above what the statement's facts support ({ceiling.label}): Tier "
            f"{ceiling.tier + 1} needs {first.text}{detail}",
        )
    ]


def _check_class_d_block(s: ConformanceStatement, derived: VerdictFacts) -> list[Violation]:
    """D-5.1: the Class D block is the bar the facts give (threshold, deciding measurement, findings)."""
    block = s.class_d
    if isinstance(block, Absent):
        return []
    if derived.class_ != "D" or derived.insignificance is None:
        return [
            violation(
                "D-5.1", "class_d block present, but the facts declare no Class D insignificance threshold"
            )
        ]
    from remnant.statement.classd_bar import bar_from_facts

    try:
        want = bar_from_facts(derived).statement_block(block.canary_design)
    except ValueError as exc:
        return [violation("D-5.1", f"class_d block present, but its facts give none: {exc}")]
    risk_keys = ("measurement", "k", "n", "control_k", "control_n", "baseline", "below_threshold")
    parts: list[tuple[str, object, object, tuple[str, ...]]]
    parts = [("class_d", block, want, ("threshold", "justification", "passes"))]
    parts += [(f"class_d.{r}", getattr(block, r), getattr(want, r), risk_keys) for r in CLASS_D_RISKS]
    out: list[Violation] = []
    for where, have, should, keys in parts:
        for key in keys:
            stated, given = getattr(have, key), getattr(should, key)
            if not same(stated, given):
                out.append(
                    violation("D-5.1", f"{where}.{key} {show(stated)}, but the facts give {show(given)}")
                )
    return out


def verdict_violations(s: ConformanceStatement, verdict: str, source: str) -> list[Violation]:
    """V1: where the statement issues a verdict, it is ``verdict``, the one ``source`` gives."""
    stated = None if is_absent(s.verdict) else s.verdict
    if "verdict" in s.instrument and stated != verdict:
        return [violation("V1", f"stated verdict {stated!r} but {source} give {verdict!r}")]
    return []


def agreement_violations(s: ConformanceStatement) -> list[Violation] | None:
    """Every disagreement between the statement's copies of its evidence (module docstring).

    None when the facts cannot be read as verdict facts (V1 says so elsewhere) and nothing can be derived.
    """
    try:
        facts = VerdictFacts.model_validate(s.facts)
    except ValidationError:
        return None
    reg = registered(s)
    metric = reg["gating_metric"] if reg["gating_metric"] in ("kappa", "w") else facts.gating_metric
    derivation = derive(s, facts, metric)
    out = _check_registered(s, facts, reg)
    out += _check_utility(s, facts, derivation.utility, reg["phi"])
    out += derivation.violations
    out += _check_arms(facts)
    raw = {
        **facts.model_dump(mode="json", by_alias=True),
        "class": s.class_,
        "track": s.track,
        "tau": reg["tau"],
        "phi": reg["phi"],
        "gating_metric": metric,
        "utility": derivation.utility if derivation.utility is not None else _block_utility(s),
        "attacks": derivation.attacks,
    }
    try:
        derived = VerdictFacts.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        out.append(
            violation(
                "V1", f"the facts the cells imply cannot be read as verdict facts ({where}: {err['msg']})"
            )
        )
        return out
    derived_json = derived.model_dump(mode="json", by_alias=True)
    result = decide(derived)
    out += verdict_violations(s, result.verdict, "its cells, utility and pre-registered values")
    out += _check_surfaces(s, derived_json, cells_from_facts(derived_json))
    out += _check_required(s, derived)
    out += _check_tier(s, derived_json, result.verdict)
    out += _check_class_d_block(s, derived)
    return out


__all__ = ["agreement_violations", "registered", "verdict_violations"]
