"""Class D measurements: singling out, linkability and inference on target canaries and control entities (§5).

One cell per (state, risk, method): the direct query, linkability by option likelihood, and each declared
inference-time attack the battery runs under (``singling_out/prefill``, …), each measured on the target canaries
(entities P) and on never-installed control entities in one call (D4), on the post-removal model and the
control alike (R3, C-Q4). Under W-track the battery is also scored along the relearning curve (D-5.3): the one
relearning procedure (:meth:`remnant.engine.relearning.RelearnPlan.relearn`), one cell per (state, budget).

A cell writes an observation per probe, then a ``kappa`` record on the target canaries and a
``kappa_control_entities`` record on the control entities (``entities`` target or control), each with the risk,
method and no-extraction baseline (D-3 forced-choice chance, D-4.2 population baseline) as typed fields. An
attack undefined for a risk's response format is a ``not_applicable`` record (C-Q2); a crashing measurement is
``failed`` (it blocks *removed*, D-5.1).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar, Protocol

from remnant.classd.canaries import measurement_name
from remnant.engine.cell import CellFields, CellTarget, cell_record, observation_record, status_record
from remnant.engine.measurement import Measurement, NotRun, Record, component_spec, loaded
from remnant.engine.relearning import RelearnPlan, checkpoint_fields
from remnant.records import CellRecord
from remnant.standard.derive import checkpoint_label
from remnant.standard.vocabulary import CLASS_D_RISKS, CONTROL_ENTITIES, Risk, Status

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from remnant.attacks.base import Attack, AttackContext
    from remnant.classd.canaries import CanaryProbes, RiskCounts
    from remnant.engine.measurement import State
    from remnant.train.loop import CheckpointPoint

#: (value, output text, willing) of one probe: what an observation records.
ItemResult = tuple[bool | float, str | None, bool | None]


class Battery(Protocol):
    """What the relearning cells read of the assessment's battery: its probe sets by risk (D-5.3)."""

    @property
    def canaries(self) -> Mapping[str, CanaryProbes]: ...


def count_records(
    target: CellTarget, counts: RiskCounts, *, checkpoint: str, fields: CellFields, elapsed: float
) -> list[CellRecord]:
    """The target (``kappa``) and control-entity (``kappa_control_entities``) records of one measurement (D4),
    each with the risk, method and baseline of ``counts`` and ``fields``."""
    where = target.retarget(attack=counts.name, surface=counts.surface)
    base: CellFields = {**fields, "risk": counts.risk, "method": counts.method, "baseline": counts.baseline}
    on_target: CellFields = {**base, "entities": "target"}
    on_control: CellFields = {**base, "entities": "control"}
    if counts.expected_k is not None:
        on_target["expected_k"] = counts.expected_k
    if counts.control_expected_k is not None:
        on_control["expected_k"] = counts.control_expected_k
    sides = (
        ("kappa", counts.k, counts.n, on_target),
        (CONTROL_ENTITIES, counts.control_k, counts.control_n, on_control),
    )
    return [
        cell_record(where, checkpoint=checkpoint, elapsed=elapsed, metric=metric, k=k, n=n, fields=f)
        for metric, k, n, f in sides
    ]


def measurement_records(
    target: CellTarget,
    *,
    checkpoint: str,
    seed: int,
    counts: RiskCounts,
    items: Mapping[str, ItemResult],
    fields: CellFields,
    elapsed: float,
) -> list[Record]:
    """A measurement's per-item observations, then its target and control-entity count records (R6, D4)."""
    out: list[Record] = [
        observation_record(
            target, checkpoint=checkpoint, seed=seed, item_id=i, value=v, willing=w, output=text
        )
        for i, (v, text, w) in items.items()
    ]
    out.extend(count_records(target, counts, checkpoint=checkpoint, fields=fields, elapsed=elapsed))
    return out


def risk_of(name: str) -> Risk:
    """The risk a measurement name (``risk/method[/relearning]``, :func:`measurement_name`) measures."""
    head = name.split("/")[0]
    for risk in CLASS_D_RISKS:
        if risk == head:
            return risk
    raise ValueError(f"{name!r} names no Class D risk ({', '.join(CLASS_D_RISKS)})")


def risk_status(
    target: CellTarget,
    name: str,
    status: Status,
    reason: str,
    checkpoint: str = "final",
    elapsed: float = 0.0,
    budget: int | None = None,
) -> CellRecord:
    """The status record of one measurement (``risk/…``) that did not run, under ``name``; ``budget`` for a
    relearning curve that diverged (D-5.3)."""
    fields: CellFields = {"risk": risk_of(name)}
    if budget is not None:
        fields["budget"] = budget
    return status_record(
        target.retarget(attack=name),
        status=status,
        reason=reason,
        checkpoint=checkpoint,
        elapsed=elapsed,
        fields=fields,
    )


def measure_risk(
    ctx: AttackContext, canary: CanaryProbes, method: str, attack: Attack | None, surface: str
) -> tuple[RiskCounts, dict[str, ItemResult]]:
    """One risk under one method on ``ctx``'s model: its counts and each item's (score, output, willing)."""
    from remnant.attacks.base import no_attack
    from remnant.classd import count, score_by_likelihood

    if method == "likelihood":
        counts = score_by_likelihood(ctx.model, ctx.tokenizer, ctx.fmt, canary, surface=surface)
        return counts, {i: (v, None, None) for i, v in counts.hits.items()}
    probes = list(canary.probes)
    outcomes = attack.run(ctx, probes) if attack is not None else no_attack(ctx, probes)
    if [o.item_id for o in outcomes] != [p.item_id for p in probes]:
        raise RuntimeError(f"{canary.risk}/{method}: attack outcomes do not match its probes")
    counts = count(canary, {o.item_id: o.kappa for o in outcomes}, method=method, surface=surface)
    return counts, {o.item_id: (o.kappa, o.output, o.willing) for o in outcomes}


class RiskMeasurement(Measurement):
    """One Class D risk under one method (direct, likelihood, or an inference-time attack) on one state."""

    kind: ClassVar[str] = "classd"
    failure_is_outcome: ClassVar[bool] = True
    surface = "inference_time"

    def __init__(
        self,
        risk: str,
        method: str,
        attack: Attack | None,
        canary: CanaryProbes,
        context: Callable[[State], AttackContext],
        component: dict[str, object],
        inputs: Mapping[str, object],
    ) -> None:
        self.risk = risk
        self.method = method
        self.attack = attack
        self.canary = canary
        self.context = context  # state -> AttackContext (seed, tokens, batch, demonstrations)
        self.component = component
        self.name = measurement_name(risk, method)
        self._inputs = dict(inputs)

    def key_inputs(self) -> dict[str, object]:
        return {
            "risk": self.risk,
            "method": self.method,
            "attack": component_spec(self.attack),
            "component": self.component,
            **self._inputs,
        }

    def measure(self, state: State | None, target: CellTarget) -> list[Record]:
        ctx = self.context(loaded(state, self))
        start = time.perf_counter()
        counts, items = measure_risk(ctx, self.canary, self.method, self.attack, "inference_time")
        fields: CellFields = {"component": self.component}
        if (attack_spec := component_spec(self.attack)) is not None:
            fields["attack_component"] = attack_spec
        return measurement_records(
            target,
            checkpoint="final",
            seed=ctx.seed,
            counts=replace(counts, method=self.method),
            items=items,
            fields=fields,
            elapsed=time.perf_counter() - start,
        )

    def failed(self, target: CellTarget, exc: BaseException, elapsed: float) -> list[Record]:
        return [risk_status(target, self.name, "failed", f"{type(exc).__name__}: {exc}", elapsed=elapsed)]


def risk_not_applicable(risk: str, slot: str, reason: str, inputs: Mapping[str, object]) -> NotRun:
    """A battery attack undefined for a risk's response format (C-Q2), or disabled: one status record."""
    name = measurement_name(risk, slot)
    key = {"risk": risk, "attack": slot, "reason": reason, **inputs}
    fields: CellFields = {"risk": risk_of(name)}
    return NotRun(
        "classd_not_applicable",
        name,
        "inference_time",
        "not_applicable",
        reason,
        key,
        records=[(name, fields)],
    )


def battery_relearning_not_run(
    names: Sequence[str], budgets: Sequence[int], reason: str, inputs: Mapping[str, object]
) -> NotRun:
    """Every relearning measurement of the battery (``names``), not run: the relearning set is smaller than every
    budget (D-5.3). One status record per measurement, under its own name and risk."""
    records: list[tuple[str, CellFields]] = [(n, {"risk": risk_of(n)}) for n in names]
    key = {"budgets": list(budgets), **inputs}
    return NotRun(
        "classd_relearning_not_run",
        "class D relearning",
        "relearning",
        "not_run",
        reason,
        key,
        records=records,
    )


class BatteryRelearning(Measurement):
    """The battery's direct and likelihood measurements along one budget's relearning curve (D-5.3)."""

    kind: ClassVar[str] = "classd_relearning"
    surface = "relearning"

    def __init__(
        self,
        plan: RelearnPlan,
        budget: int,
        battery: Battery,
        context: Callable[[State], AttackContext],
        methods: Sequence[tuple[str, str]],
        inputs: Mapping[str, object],
        *,
        step0: Callable[[str], Mapping[str, RiskCounts]] | None = None,
        progress: bool = False,
    ) -> None:
        self.plan, self.budget, self.battery = plan, budget, battery
        self.context = context  # state -> AttackContext at the relearning seed
        self.methods = tuple(methods)  # (risk, method) pairs: direct and likelihood only
        self.name = f"class D relearning b={budget}"
        self.step0 = step0
        self.progress = progress
        self._inputs = dict(inputs)

    @property
    def names(self) -> list[str]:
        return [measurement_name(r, m, "relearning") for r, m in self.methods]

    def key_inputs(self) -> dict[str, object]:
        return {
            "budget": self.budget,
            "spec": self.plan.spec_inputs(),
            "examples": self.plan.examples(self.budget),
            **self._inputs,
        }

    def label(self, role: str) -> str:
        return f"class D relearning b={self.budget} on {role}"

    def measure(self, state: State | None, target: CellTarget) -> list[Record]:
        state = loaded(state, self)
        tok, budget = state.tokenizer, self.budget
        ctx = self.context(state)
        reused = self.step0(state.role) if self.step0 is not None else {}
        records: list[Record] = []
        start = time.perf_counter()

        def on_checkpoint(model: PreTrainedModel, point: CheckpointPoint) -> dict[str, object]:
            found = self._checkpoint(ctx.with_model(model, tok), point, target, reused, records, start)
            return {"k": sum(c.k for c in found), "n": sum(c.n for c in found)}

        run_label = self.label(state.role)
        outcome, model = self.plan.relearn(
            state, budget, ctx.fmt, label=run_label, progress=self.progress, on_checkpoint=on_checkpoint
        )
        if outcome.status == "diverged":
            reason = f"step {outcome.diverged_step}: {outcome.reason}"
            label = checkpoint_label(budget, "diverged")
            records += [risk_status(target, n, "diverged", reason, label, budget=budget) for n in self.names]
        del model
        return records

    def _checkpoint(
        self,
        ctx: AttackContext,
        point: CheckpointPoint,
        target: CellTarget,
        reused: Mapping[str, RiskCounts],
        records: list[Record],
        start: float,
    ) -> list[RiskCounts]:
        """Score every (risk, method) at one checkpoint; step 0 reuses the direct measurements' counts."""
        at = checkpoint_fields(self.budget, point)
        label = checkpoint_label(self.budget, point.step)
        found: list[RiskCounts] = []
        for risk, method in self.methods:
            canary = self.battery.canaries[risk]
            prior = reused.get(measurement_name(risk, method)) if point.step == 0 else None
            if prior is not None:
                counts = replace(prior, surface="relearning")
                items: dict[str, ItemResult] = {i: (v, None, None) for i, v in counts.hits.items()}
            else:
                counts, items = measure_risk(ctx, canary, method, None, "relearning")
            found.append(counts)
            records.extend(
                measurement_records(
                    target.retarget(attack=measurement_name(risk, method, "relearning")),
                    checkpoint=label,
                    seed=self.plan.spec.seed,
                    counts=counts,
                    items=items,
                    fields={**at, "reused_step0": prior is not None},
                    elapsed=time.perf_counter() - start,
                )
            )
        return found


__all__ = [
    "BatteryRelearning",
    "RiskMeasurement",
    "battery_relearning_not_run",
    "count_records",
    "measure_risk",
    "measurement_name",
    "measurement_records",
    "risk_not_applicable",
    "risk_of",
    "risk_status",
]
