"""Which measurements an assessment runs, on which states, in which order (R3, R10-R12, C-Q1..C-Q4, C-W1..C-W6).

Every cell is a :class:`remnant.engine.measurement.Measurement` run by the one cell runner; this module only
decides the schedule, so the post-removal model and the control get identical measurements (R3, C-Q4, C-W5): the
unattacked baseline on every state (R2, R5), removal-stage utility (R10, R11), every declared attack with the
pre-removal model too (C-Q1..C-Q3; not applicable ones recorded, C-Q2), relearning with attack-stage utility
(C-W1..C-W6, R12), the white-box audits (readings only, C-H6, C-H7) and a Class D config's battery (D-2 to D-5.3).
It never changes the :class:`~remnant.assess.inputs.Inputs` it is given: what it creates is returned (R23).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from remnant.assess.cells import kept_general_ids, outcomes_of
from remnant.assess.classd import (
    BatteryInputs,
    counts_from_records,
    relearning_measurements,
    risk_measurements,
)
from remnant.assess.facts import SCORED_ARM
from remnant.assess.inputs import Inputs, component_record, relearn_spec, utility_components
from remnant.config import AssessmentConfig, derive_seed
from remnant.engine.attack import AttackMeasurement, not_applicable
from remnant.engine.audit import AuditMeasurement, AuditNotRun
from remnant.engine.classd import RiskMeasurement
from remnant.engine.measurement import run_measurement, run_on_states
from remnant.engine.relearning import RelearningMeasurement, RelearnPlan
from remnant.engine.runner import CellRunner
from remnant.engine.utility import UtilityMeasurement
from remnant.standard.derive import NONE, RELEARNING
from remnant.standard.vocabulary import CONTROL, POST, PRE

if TYPE_CHECKING:
    from remnant.attacks.base import AttackContext
    from remnant.states.builder import LoadedState

Outcomes = list[Any] | None


def run_cells(
    cfg: AssessmentConfig,
    inputs: Inputs,
    states: Mapping[str, LoadedState],
    runner: CellRunner,
    *,
    progress: bool,
    audit_states: Mapping[str, Any] | None = None,
    cache_dir: Path | None = None,
) -> list[dict[str, Any]]:
    """Every cell of the assessment but the Class D battery (module docstring); ``audit_states`` are the extra
    states the audits asked for (:func:`remnant.assess.audits.build_audit_states`). Returns the component
    records of the utility metrics, then of the audits, it created (R23)."""
    baseline = baseline_cells(cfg, inputs, states, runner)
    utility = utility_cells(cfg, inputs, states, runner)
    attack_cells(cfg, inputs, states, runner)
    relearning_cells(cfg, inputs, states, runner, utility=utility, step0=baseline.get, progress=progress)
    audits = audit_cells(cfg, inputs, states, runner, extra=audit_states or {}, cache_dir=cache_dir)
    return [*utility_records(utility), *audits]


def probe_inputs(inputs: Inputs) -> dict[str, object]:
    """What every probe-set cell's key holds besides its component: the shared inputs, P and the scoring length."""
    return {**inputs.key_inputs(), "probes": inputs.probe_ids, "max_new_tokens": inputs.scoring_tokens}


def baseline_context(
    cfg: AssessmentConfig, inputs: Inputs, states: Mapping[str, LoadedState]
) -> AttackContext:
    """The unattacked scoring context: greedy generation at the scoring length, the baseline seed."""
    seed = derive_seed(cfg.seeds.master, "baseline")
    return inputs.context(states[CONTROL], seed=seed, max_new_tokens=inputs.scoring_tokens)


def baseline_cells(
    cfg: AssessmentConfig, inputs: Inputs, states: Mapping[str, LoadedState], runner: CellRunner
) -> dict[str, Outcomes]:
    """The unattacked baseline on every state; returns each state's item outcomes (relearning's step 0)."""
    ctx = baseline_context(cfg, inputs, states)
    measurement = AttackMeasurement(
        NONE, None, ctx, inputs.probes, probe_inputs(inputs), roles=(CONTROL, PRE, POST)
    )
    out: dict[str, Outcomes] = {}
    for role, done in run_on_states(runner, measurement, states).items():
        ok = bool(done) and done[0].status == "run"
        out[role] = outcomes_of(runner, done[0].cell_key, inputs.probes) if ok else None
    return out


def utility_cells(
    cfg: AssessmentConfig, inputs: Inputs, states: Mapping[str, LoadedState], runner: CellRunner
) -> list[UtilityMeasurement]:
    """Utility at the removal stage on every state, identical conditions (R10, R11); returns the metrics."""
    shared = inputs.key_inputs()
    kept: list[str] | None = None
    if inputs.needs_general_set():
        seed = derive_seed(cfg.seeds.master, "general")
        general_ctx = inputs.context(states[CONTROL], seed=seed, max_new_tokens=16)
        kept = kept_general_ids(
            runner, control=states[CONTROL], ctx=general_ctx, general=inputs.general, key_inputs=shared
        )
    measurements = [
        UtilityMeasurement(name, metric, inputs.fmt, data, shared)
        for name, metric, data in utility_components(cfg, inputs, kept)
    ]
    for role in (CONTROL, PRE, POST):
        for measurement in measurements:
            run_measurement(runner, measurement, states[role])
    return measurements


def utility_records(measurements: Sequence[UtilityMeasurement]) -> list[dict[str, object]]:
    """The component records of the utility metrics, in the config's order (R23)."""
    return [
        component_record(f"utility:{m.metric_name}", m.metric.spec.to_dict())
        for m in measurements
        if m.metric.spec is not None
    ]


def attack_cells(
    cfg: AssessmentConfig, inputs: Inputs, states: Mapping[str, LoadedState], runner: CellRunner
) -> None:
    """Every declared attack on the post-removal model, the control and the pre-removal model, whose score under
    the attack tells format disruption from robustness (C-Q1..C-Q4); not-applicable ones recorded (C-Q2)."""
    shared = inputs.key_inputs()
    for name, attack, reason, surface in inputs.attacks:
        if attack is None:
            run_measurement(runner, not_applicable(name, surface, reason or "disabled", shared), None)
            continue
        ctx = inputs.context(
            states[CONTROL],
            seed=derive_seed(cfg.seeds.master, "attack", name),
            max_new_tokens=inputs.attack_tokens.get(name, inputs.scoring_tokens),
            batch_size=inputs.attack_batch.get(name, 16),
        )
        measurement = AttackMeasurement(
            name,
            attack,
            ctx,
            inputs.probes,
            {**probe_inputs(inputs), "slot": name},
            roles=(POST, CONTROL, PRE),
        )
        run_on_states(runner, measurement, states)


def relearning_plans(cfg: AssessmentConfig, inputs: Inputs) -> list[RelearnPlan]:
    """The held-out arm and, when declared, the C-W6 arm on the scored items (never adjudicating)."""
    rel = cfg.attacks.relearning
    assert rel is not None
    from remnant.train.relearn import relearn_order

    spec = relearn_spec(cfg, rel)
    arms = [(RELEARNING, inputs.relearn_set, True)]
    if rel.scored_items_arm:
        arms.append((SCORED_ARM, inputs.scored_set, False))
    # one seeded order per set; budget b takes its first b (C-W1, nested subsets)
    return [
        RelearnPlan(arm, spec, items, relearn_order(spec.seed, len(items)), at_end)
        for arm, items, at_end in arms
    ]


def relearning_cells(
    cfg: AssessmentConfig,
    inputs: Inputs,
    states: Mapping[str, LoadedState],
    runner: CellRunner,
    *,
    utility: Sequence[UtilityMeasurement],
    step0: Callable[[str], Outcomes],
    progress: bool,
) -> None:
    """Relearning on both models, identical procedure, every budget and checkpoint (C-W1..C-W6)."""
    rel = cfg.attacks.relearning
    shared = inputs.key_inputs()
    if rel is None or not rel.enabled:
        if rel is not None:
            na = not_applicable(RELEARNING, "relearning", rel.reason or "disabled", shared)
            run_measurement(runner, na, None)
        return
    ctx = baseline_context(cfg, inputs, states)
    for plan in relearning_plans(cfg, inputs):
        budgets = [b for b in plan.spec.budgets if b <= len(plan.relearn_set)]
        if not budgets:
            reason = f"the relearning set holds {len(plan.relearn_set)} examples, fewer than every budget"
            run_measurement(runner, not_applicable(plan.arm, "relearning", reason, shared), None)
            continue
        for budget in budgets:
            for role in (POST, CONTROL):
                at_end = plan.utility_at_end and role == POST and budget == budgets[-1]
                measurement = RelearningMeasurement(
                    plan,
                    budget,
                    ctx,
                    inputs.probes,
                    probe_inputs(inputs),
                    utility=utility if at_end else (),
                    step0=step0,
                    progress=progress,
                )
                run_measurement(runner, measurement, states[role])


def classd_cells(
    runner: CellRunner,
    battery: BatteryInputs,
    inputs: Inputs,
    states: Mapping[str, LoadedState],
    *,
    progress: bool,
) -> None:
    """The Class D battery on the post-removal model and the control alike (D-2 to D-5.3, D4, C-Q4): every risk
    under every method, a not-applicable one recorded with its reason (C-Q2), then, under W-track, along the
    relearning curve, whose step 0 is each state's direct counts."""
    shared = inputs.key_inputs()
    direct: dict[str, dict[str, object]] = {POST: {}, CONTROL: {}}
    for risk, canary in battery.canaries.items():
        for measurement in risk_measurements(battery, inputs, risk, canary, shared):
            done = run_on_states(runner, measurement, states)
            if isinstance(measurement, RiskMeasurement) and measurement.method in ("direct", "likelihood"):
                for role, records in done.items():
                    counts = counts_from_records(runner, records, canary, measurement.name)
                    if counts is not None:
                        direct[role][measurement.name] = counts
    relearning = relearning_measurements(
        battery, inputs, shared, step0=lambda role: direct.get(role, {}), progress=progress
    )
    for measurement in relearning:
        run_on_states(runner, measurement, states)


def audit_cells(
    cfg: AssessmentConfig,
    inputs: Inputs,
    states: Mapping[str, LoadedState],
    runner: CellRunner,
    *,
    extra: Mapping[str, Any],
    cache_dir: Path | None = None,
) -> list[dict[str, Any]]:
    """Every enabled white-box audit on the post-removal model and, with ``controls``, on both Annex B control
    states, identical inputs (C-H7c). A state in ``extra`` that is a string could not be built: the audits that
    need it write *not run* readings with that reason. Readings only: no cell record, no verdict weight (C-H6).
    Returns the audits' component records, in the config's order (R23)."""
    from remnant.assess.audits import audit_plan, audited_states

    built = {role: s for role, s in extra.items() if not isinstance(s, str)}
    anchors = {"full": states[PRE], "control": states[CONTROL], **built}
    audited = {**states, **built}
    records: list[dict[str, Any]] = []
    for table, spec in cfg.audits.enabled().items():
        plan = audit_plan(cfg, inputs, table, spec, anchors, cache_dir)
        records.append(component_record(f"audit:{table}", plan.audit.spec.to_dict()))
        lacking = extra.get(plan.reference_role)
        for role in audited_states(spec):
            why = extra.get(role) if isinstance(extra.get(role), str) else None
            if plan.error is not None:
                run_measurement(runner, AuditNotRun(plan, role, plan.error, status="failed"), None, role=role)
            elif isinstance(lacking, str) or why is not None:
                reason = lacking if isinstance(lacking, str) else str(why)
                run_measurement(runner, AuditNotRun(plan, role, reason), None, role=role)
            else:
                run_measurement(runner, AuditMeasurement(plan), audited[role])
    return records


__all__ = [
    "attack_cells",
    "audit_cells",
    "baseline_cells",
    "baseline_context",
    "classd_cells",
    "probe_inputs",
    "relearning_cells",
    "relearning_plans",
    "run_cells",
    "utility_cells",
    "utility_records",
]
