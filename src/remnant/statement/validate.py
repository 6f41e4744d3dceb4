"""Validate a conformance statement: its schema, its normative consistency with the Standard and its agreement
with itself (:mod:`remnant.statement.agreement`).

Each violation names the requirement it breaks (each check's docstring says which); schema problems that map to
none come back as requirement "schema". Nothing here raises on bad input.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from remnant.standard.facts import InstallationFact, VerdictFacts
from remnant.standard.scope import VERDICTS
from remnant.standard.tier import parse_tier_label
from remnant.standard.validity import validity_problem
from remnant.standard.verdict import decide, net_rate
from remnant.standard.vocabulary import CLASS_D_RISKS, below_bar, net_of
from remnant.statement.absent import Absent, is_absent
from remnant.statement.agreement import agreement_violations, verdict_violations
from remnant.statement.build import installation_block
from remnant.statement.latent import latent_violations
from remnant.statement.schema import ConformanceStatement
from remnant.statement.violation import TOL, ValidationReport, Violation, violation
from remnant.statement.violation import close as _close
from remnant.stats import wilson_interval

#: K7: who may verify a Tier 4 award or a published removed verdict, besides an Accredited Assessor.
STEWARD = "Yuyari"


def _loc_requirement(loc: tuple[int | str, ...], err_type: str, value: object) -> str:
    """Map a schema error's location to the requirement it breaks."""
    head = loc[0] if loc else ""
    if head == "versions":
        return "Z1"
    if head == "installation":
        return "R2"
    if head == "cells" and any(p in loc for p in ("k", "n", "ci95", "rate")):
        return "R19"
    if head == "latent" and "figures" in loc and len(loc) > 3:  # a figure's value or C-H7(b) field
        return "C-H7(b)"
    if head == "latent" and "status" in loc:
        return "C-H7(a)"
    if err_type == "missing" or value is None:
        return "K6"
    if head == "latent" and "adjudicating" in loc:
        return "C-H6"
    if head in ("verdict", "tier", "instrument"):
        return "T1"
    if head == "utility" and "scales_distinct" in loc:
        return "R12"
    return "schema"


def _field_path(data: object, loc: tuple[Any, ...]) -> tuple[tuple[int | str, ...], bool]:
    """Strip pydantic's union-branch tags from ``loc``; say whether the error belongs to the branch the input took.

    A field typed ``X | Absent`` reports errors for both branches; only the branch the input was written for
    (an ``{"absent": true}`` marker or not) is the author's mistake.
    """
    path: list[int | str] = []
    current: Any = data
    relevant = True
    for part in loc:
        if (
            isinstance(current, dict)
            and part in current
            or isinstance(current, list)
            and isinstance(part, int)
            and 0 <= part < len(current)
        ):
            current = current[part]
            path.append(part)
        elif isinstance(current, dict) and isinstance(part, str) and part[:1].isupper():
            marker = current.get("absent") is True
            relevant = relevant and (part == "Absent") == marker
        elif isinstance(part, str) and (part[:1].isupper() or "[" in part or part in ("float", "str", "int")):
            if part == "Absent":
                relevant = False
        else:
            path.append(part)
            current = None
    return tuple(path), relevant


def _schema_violations(data: dict[str, Any]) -> tuple[ConformanceStatement | None, list[Violation]]:
    try:
        return ConformanceStatement.model_validate(data), []
    except ValidationError as exc:
        out: list[Violation] = []
        seen: set[tuple[str, str]] = set()
        for err in exc.errors():
            field_loc, relevant = _field_path(data, tuple(err["loc"]))
            if not relevant:
                continue
            path = ".".join(str(p) for p in field_loc) or "<root>"
            requirement = _loc_requirement(field_loc, err["type"], err.get("input"))
            if requirement == "K6":
                message = f"{path}: required element missing or null without an absent marker"
            else:
                message = f"{path}: {err['msg']}"
            if (requirement, path) in seen:
                continue
            seen.add((requirement, path))
            out.append(violation(requirement, message))
        if not out:  # every error sat in a branch the input did not take: report the first one plainly
            err = exc.errors()[0]
            out.append(violation("schema", f"{'.'.join(map(str, err['loc']))}: {err['msg']}"))
        return None, out


def _raw_checks(data: dict[str, Any]) -> list[Violation]:
    """Checks that must fire even when the schema fails (T1 conflation, C-H6 on the raw value)."""
    out: list[Violation] = []
    verdict = data.get("verdict")
    if isinstance(verdict, str) and parse_tier_label(verdict) is not None:
        out.append(violation("T1", f"verdict field holds a tier ({verdict!r})"))
    tier = data.get("tier")
    if isinstance(tier, str) and tier.strip().lower() in VERDICTS:
        out.append(violation("T1", f"tier field holds a verdict ({tier!r})"))
    latent = data.get("latent")
    if isinstance(latent, dict) and latent.get("adjudicating", False) is not False:
        out.append(violation("C-H6", "latent.adjudicating must be false"))
    surfaces = data.get("surfaces")
    if isinstance(surfaces, dict) and "latent" in surfaces:
        out.append(violation("C-H6", "latent is not an adjudicating surface; report it in 'latent'"))
    facts = data.get("facts")
    attacks = facts.get("attacks") if isinstance(facts, dict) else None
    if isinstance(attacks, list):  # anything else is V1's to report, once the facts are read
        for attack in attacks:
            if (
                isinstance(attack, dict)
                and attack.get("surface") == "latent"
                and attack.get("adjudicating") is True
            ):
                out.append(violation("C-H6", f"facts attack {attack.get('name')!r} on latent adjudicates"))
    return out


def _check_verdict(s: ConformanceStatement) -> list[Violation]:
    """V1: recompute the verdict from the statement's own facts and compare."""
    try:
        facts = VerdictFacts.model_validate(s.facts)
    except ValidationError as exc:
        return [violation("V1", f"facts cannot be read as verdict facts: {exc.errors()[0]['msg']}")]
    return verdict_violations(s, decide(facts).verdict, "its facts")


def _check_scope(s: ConformanceStatement) -> list[Violation]:
    """V4: *removed* is never stated without its scope qualifier (track, τ, model version)."""
    if s.verdict != "removed":
        return []
    scope = s.verdict_scope
    if is_absent(scope) or not isinstance(scope, str):
        return [violation("V4", "removed verdict without a scope qualifier")]
    missing = [
        part
        for part in ("removed", f"{s.track}-track", f"{s.pre_registration.tau:g}", s.model.version)
        if part not in scope
    ]
    if missing:
        return [violation("V4", f"verdict_scope lacks {missing} (V4 phrasing)")]
    return []


def _check_validity(s: ConformanceStatement) -> list[Violation]:
    """V5: a stated validity period not exceeding 12 months from the assessment date."""
    problem = validity_problem(s.assessment_date, s.validity_until)
    return [violation("V5", problem)] if problem else []


def _check_instruments(s: ConformanceStatement) -> list[Violation]:
    """T1, K7, R0.3: which instrument is issued, Tier 4 verification, track letter on tiers."""
    out: list[Violation] = []
    has_tier = not is_absent(s.tier)
    if has_tier != ("tier" in s.instrument):
        out.append(violation("T1", f"instrument {s.instrument} does not match the tier field"))
    if is_absent(s.verdict) == ("verdict" in s.instrument):
        out.append(violation("T1", f"instrument {s.instrument} does not match the verdict field"))
    if has_tier and isinstance(s.tier, str):
        parsed = parse_tier_label(s.tier)
        if parsed is None:
            out.append(violation("T1", f"tier {s.tier!r} is not a readiness tier (W1–W4, Q1–Q4)"))
            return out
        letter, level = parsed
        if letter != s.track:
            out.append(violation("R0.3", f"tier {s.tier!r} must carry the track letter: {s.track}{level}"))
        if level == 4:
            out += _check_verification(s)
    return out


def _check_verification(s: ConformanceStatement) -> list[Violation]:
    """K7: a Tier 4 award is verified by Yuyari or by an Accredited Assessor."""
    record = s.verification
    if isinstance(record, Absent):
        return [violation("K7", f"tier {s.tier!r} awarded without a verification record")]
    if not record.accredited and record.verifier.strip() != STEWARD:
        return [
            violation(
                "K7",
                f"tier {s.tier!r} verified by {record.verifier!r}, neither Yuyari nor an Accredited Assessor",
            )
        ]
    return []


def _check_rates(s: ConformanceStatement) -> list[Violation]:
    """R19: every rate with n and its two-sided 95% Wilson interval (net of chance for MCQ targets)."""
    out: list[Violation] = []
    given = s.facts.get("chance_rate")
    chance = float(given) if isinstance(given, int | float) and not isinstance(given, bool) else 0.0
    for cell in s.cells:
        lo, hi = cell.ci95
        if not (lo - TOL <= cell.rate <= hi + TOL) or lo < 0 or hi > 1:
            out.append(
                violation("R19", f"cell {cell.cell_id}: ci95 {cell.ci95} does not bracket {cell.rate}")
            )
            continue
        net = chance if cell.metric != "utility" else 0.0
        if not _close(cell.rate, max(cell.k / cell.n - net, 0.0)):
            out.append(
                violation("R19", f"cell {cell.cell_id}: rate {cell.rate} is not k/n = {cell.k}/{cell.n}")
            )
        else:
            want = net_rate(cell.k, cell.n, net)
            if not (_close(lo, want.lower) and _close(hi, want.upper)):
                out.append(violation("R19", f"cell {cell.cell_id}: ci95 is not the 95% Wilson interval"))
    for name, surface in s.surfaces.items():
        if surface.g_star is not None and (surface.ci95 is None or surface.n is None):
            out.append(violation("R19", f"surfaces.{name}: g_star without ci95 and n"))
        if surface.control_g is not None and (surface.control_ci95 is None or surface.control_n is None):
            out.append(violation("R19", f"surfaces.{name}: control_g without control_ci95 and control_n"))
    return out


def _check_cell_ids(s: ConformanceStatement) -> list[Violation]:
    """R22: every cell id names one cell."""
    if len({cell.cell_id for cell in s.cells}) != len(s.cells):
        return [violation("R22", "cell ids are not unique")]
    return []


def _check_cells(s: ConformanceStatement) -> list[Violation]:
    """R22, when the facts cannot be read: each surface aggregate is the largest of the cells it names."""
    out: list[Violation] = []
    by_id = {cell.cell_id: cell for cell in s.cells}
    for name, surface in s.surfaces.items():
        if surface.g_star is None:
            continue
        unknown = [c for c in surface.cells if c not in by_id]
        treated = [by_id[c] for c in surface.cells if c in by_id and by_id[c].model_state == "post_removal"]
        if unknown or not treated:
            out.append(
                violation(
                    "R22",
                    f"surfaces.{name}: aggregate not backed by per-cell results ({unknown or 'no cells'})",
                )
            )
            continue
        if any(c.surface != name for c in treated):
            out.append(violation("R22", f"surfaces.{name}: names cells of another surface"))
        if not _close(max(c.rate for c in treated), surface.g_star):
            out.append(
                violation("R22", f"surfaces.{name}: g_star {surface.g_star} is not the max of its cells")
            )
    return out


def _check_class_d(s: ConformanceStatement) -> list[Violation]:
    """R19, D-5.1: each Class D rate is k/n with its Wilson interval; where the block carries the net interval,
    it is that interval net of baseline and control-entity rate (D4), the bound is its upper end, and the bar
    findings agree with the threshold; a removed verdict never stands beside a risk above the bar."""
    block = s.class_d
    if isinstance(block, Absent):
        return []
    out: list[Violation] = []
    below_all: list[bool] = []
    for risk in CLASS_D_RISKS:
        r = getattr(block, risk)
        where = f"class_d.{risk}"
        if r.k > r.n:
            out.append(violation("R19", f"{where}: k = {r.k} exceeds n = {r.n}"))
            continue
        wlo, whi = wilson_interval(r.k, r.n)
        if not (_close(r.rate, r.k / r.n) and _close(r.ci95[0], wlo) and _close(r.ci95[1], whi)):
            out.append(violation("R19", f"{where}: rate and ci95 are not k/n and its Wilson interval"))
            continue
        if r.net_ci95 is None:
            continue
        net = net_of(r.baseline, r.control_k, r.control_n)
        if not (
            _close(r.net_ci95[0], net(wlo))
            and _close(r.net_ci95[1], net(whi))
            and (r.net_rate is None or _close(r.net_rate, net(r.k / r.n)))
            and (r.upper_bound is None or _close(r.upper_bound, r.net_ci95[1]))
        ):
            out.append(
                violation(
                    "D-5.1",
                    f"{where}: net interval is not the Wilson interval net of baseline and control (D4)",
                )
            )
            continue
        if r.below_threshold is not None:
            if r.below_threshold and not below_bar(r.net_ci95[1], block.threshold):
                out.append(
                    violation(
                        "D-5.1",
                        f"{where}: below_threshold but its net upper bound {r.net_ci95[1]:.4f} is not "
                        f"below the threshold {block.threshold:g}",
                    )
                )
            below_all.append(r.below_threshold)
    if block.passes is not None and len(below_all) == 3 and block.passes != all(below_all):
        out.append(violation("D-5.1", "class_d.passes disagrees with the three risks"))
    if s.verdict == "removed" and (block.passes is False or not all(below_all)):
        out.append(violation("D-5.1", "removed stated while a Class D risk is not below the bar"))
    return out


def _check_latent(s: ConformanceStatement) -> list[Violation]:
    """C-H7(a)-(c): the latent block's label, each figure's reference, states, layer and position, and its control
    figures or the not-run statement naming it (:func:`remnant.statement.latent.latent_violations`)."""
    return [] if isinstance(s.latent, Absent) else latent_violations(s.latent)


def _check_installation(s: ConformanceStatement) -> list[Violation]:
    """R2: the facts' installation record is consistent with itself, the ``installation`` block says what it does,
    and *removed* is never stated over an installation that did not reach its target."""
    raw = s.facts.get("installation")
    try:
        fact = None if raw is None else InstallationFact.model_validate(raw)
    except ValidationError as exc:
        message = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
        return [violation("R2", f"facts.installation: {message}")]
    out: list[Violation] = []
    block = s.installation
    expected = installation_block(s.facts)
    if isinstance(block, Absent) != isinstance(expected, Absent) or (
        not isinstance(block, Absent) and block != expected
    ):
        out.append(
            violation(
                "R2",
                f"installation does not repeat facts.installation: {_show(block)} against {_show(expected)}",
            )
        )
    if s.verdict == "removed" and fact is None:
        out.append(
            violation(
                "R2",
                "removed stated with no record of how the target was fixed: facts.installation must "
                "show an installation that reached its target, or the documented provenance",
            )
        )
    unreached = [f for f in (fact, block) if isinstance(f, InstallationFact) and f.unreached]
    if s.verdict == "removed" and unreached:
        found = unreached[0]
        out.append(
            violation(
                "R2",
                f"removed stated over an installation that did not reach its target (measured "
                f"{found.measured:g}, {found.k}/{found.n}, against {found.target:g})",
            )
        )
    return out


def _show(value: InstallationFact | Absent) -> str:
    if isinstance(value, Absent):
        return "absent"
    return f"{value.fixed_by} {value.k}/{value.n} against {value.target}, reached {value.reached}"


def _check_versions(s: ConformanceStatement) -> list[Violation]:
    """Z1: all three versions recorded, the Standard's matching standard_version."""
    if s.versions.standard != s.standard_version:
        return [violation("Z1", "versions.standard differs from standard_version")]
    return []


def validate_statement(data: object) -> ValidationReport:
    """Check a statement's schema, its normative consistency (V1, V4, V5, K6, C-H6, C-H7, T1, K7, R0.3, R19, R22,
    D-5.1, Z1, R2) and its agreement with itself (:mod:`remnant.statement.agreement`: V1, R22, R19, R4, R11–R13, C1, C-Q1, §7.1,
    D-5.1, C-W6)."""
    if not isinstance(data, dict):
        return ValidationReport(
            conformant=False,
            violations=[violation("schema", "statement is not a JSON object")],
        )
    violations = _raw_checks(data)
    statement, schema_errors = _schema_violations(data)
    # The raw checks already name T1 / C-H6 conflations in plain words; drop pydantic's restatement of them.
    raised = {v.requirement for v in violations}
    violations += [v for v in schema_errors if v.requirement not in raised]
    if statement is not None:
        for check in (
            _check_installation,  # first: over an unreached installation, R2 is why the verdict cannot stand
            _check_verdict,
            _check_scope,
            _check_validity,
            _check_instruments,
            _check_rates,
            _check_cell_ids,
            _check_class_d,
            _check_latent,
            _check_versions,
        ):
            violations += check(statement)
        agreement = agreement_violations(statement)
        violations += _check_cells(statement) if agreement is None else agreement
    return ValidationReport(conformant=not violations, violations=violations)


__all__ = ["STEWARD", "ValidationReport", "Violation", "validate_statement"]
