"""The Class D battery in the assessment (§5, D-2 to D-5.3): its inputs and measurements, built from the config.

One cell per (state, risk, method) on the post-removal model and the never-modified control with identical probes,
prompts, seeds and scoring (R3, C-Q4, C-W5), each on the target canaries and the never-installed control entities
in one call (D4), so ``--resume`` loses at most one measurement; under W-track also one cell per (state, budget) on
relearned copies (D-5.3: the main relearning procedure and set R, C-W6). What a cell writes:
:mod:`remnant.engine.classd`. torch is imported inside the functions that run models.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from remnant.classd.canaries import measurement_name
from remnant.config import AssessmentConfig, derive_seed
from remnant.engine.classd import (
    BatteryRelearning,
    RiskMeasurement,
    battery_relearning_not_run,
    risk_not_applicable,
)
from remnant.engine.measurement import Measurement
from remnant.engine.relearning import RelearnPlan
from remnant.engine.runner import CellRunner
from remnant.errors import ConfigError
from remnant.records import CellRecord, Observation

if TYPE_CHECKING:
    from remnant.assess.inputs import Inputs
    from remnant.attacks.base import AttackContext
    from remnant.classd import BatterySpec
    from remnant.classd.canaries import CanaryProbes, RiskCounts
    from remnant.score.probe import Probe
    from remnant.states.builder import LoadedState

CLASSD_CONTEXT = "class_d"


@dataclass(frozen=True)
class BatteryInputs:
    """What every battery cell shares, fixed before the first one runs (identical for both states, R3)."""

    spec: BatterySpec
    canaries: Mapping[str, CanaryProbes]  # risk -> its canaries (read-only)
    #: (risk, slot, attack instance or None, not-applicable reason) for every attack the battery runs under
    attacks: tuple[tuple[str, str, Any, str | None], ...]
    relearn: bool
    budgets: tuple[int, ...]
    max_new_tokens: int
    design: Mapping[str, object]
    notes: tuple[str, ...] = ()

    def context(self) -> dict[str, Any]:
        """The ``class_d`` context entry of the records: design (D5), components (K4) and notes."""
        return {
            "design": dict(self.design),
            "components": self.spec.describe(),
            "attacks": sorted({slot for _, slot, _, _ in self.attacks}),
            "relearning_budgets": list(self.budgets) if self.relearn else [],
            "probe_n": {risk: len(c.target) for risk, c in self.canaries.items()},
            "control_n": {risk: len(c.control) for risk, c in self.canaries.items()},
            "notes": list(self.notes),
        }


def prepare_battery(cfg: AssessmentConfig, inputs: Inputs) -> BatteryInputs | None:
    """The battery's probe sets, attacks and budgets from the config and the pack; None when not configured."""
    if cfg.claim_class != "D" or cfg.class_d is None or cfg.class_d.battery is None:
        return None
    from remnant.assess.inputs import attack_components
    from remnant.classd import BatterySpec, class_d_canaries, design_of
    from remnant.errors import PackError

    table = cfg.class_d.battery
    spec = BatterySpec(
        identifier=table.identifier,
        context_attribute=table.context_attribute,
        linkability_likelihood=table.linkability_likelihood,
        linkability_generation=table.linkability_generation,
    )
    try:
        spec.components()  # registry parameter checks (exit 2)
        canaries = class_d_canaries(inputs.pack, spec)
    except (ConfigError, PackError) as exc:
        raise ConfigError(f"field 'class_d.battery': {exc}", requirement="D-2.1") from None
    for risk, canary in canaries.items():
        # A chance or population baseline of 1 leaves nothing above it to measure (D-3, D-4.2): a pack too
        # small for this risk, refused here rather than as an invalid statement after the run.
        if canary.baseline is not None and canary.baseline >= 1.0:
            raise ConfigError(
                f"pack {inputs.pack.manifest.id}: the {risk} baseline on the target canaries is "
                f"{canary.baseline:g}, so no rate can exceed it; mint more entities or controls",
                requirement="D-4.2" if risk == "inference" else "D-3",
            )
    chosen = set(table.attacks) if table.attacks is not None else None
    attacks: list[tuple[str, str, Any, str | None]] = []
    for risk, canary in canaries.items():
        if risk == "linkability" and not spec.linkability_generation:
            continue
        for slot, attack, reason, surface in attack_components(cfg, list(canary.probes))[0]:
            if surface != "inference_time" or (chosen is not None and slot not in chosen):
                continue
            attacks.append((risk, slot, attack, reason))
    rel = cfg.attacks.relearning
    relearn = cfg.track == "W" and table.relearning and rel is not None and rel.enabled
    budgets = tuple(b for b in (table.relearning_budgets or (rel.budgets if rel else [])))
    notes: list[str] = []
    attributes = cfg.probe.attributes
    if attributes is not None:
        used = {spec.identifier, spec.context_attribute, "employer", "occupation"}
        missing = sorted(used - set(attributes))
        if missing:
            notes.append(
                f"the battery probes attributes {missing} outside probe.attributes {attributes}: its rates "
                "measure attributes this assessment does not score in P (D3, D5)"
            )
    design = design_of(inputs.pack).model_dump(mode="json")
    return BatteryInputs(
        spec=spec,
        canaries=MappingProxyType({str(r): c for r, c in canaries.items()}),
        attacks=tuple(attacks),
        relearn=relearn,
        budgets=budgets,
        max_new_tokens=table.max_new_tokens or inputs.scoring_tokens,
        design=MappingProxyType(design),
        notes=tuple(notes),
    )


def _methods(battery: BatteryInputs, risk: str) -> list[tuple[str, Any, str | None]]:
    """(method, attack instance or None, not-applicable reason) of one risk, in the battery's order."""
    spec = battery.spec
    generation = risk != "linkability" or spec.linkability_generation
    out: list[tuple[str, Any, str | None]] = []
    if generation:
        out.append(("direct", None, None))
    if risk == "linkability" and spec.linkability_likelihood:
        out.append(("likelihood", None, None))
    if generation:
        out += [(slot, attack, reason) for r, slot, attack, reason in battery.attacks if r == risk]
    return out


def _risk_context(
    inputs: Inputs, seed: int, tokens: int, batch: int, demos: Sequence[Probe], state: LoadedState
) -> AttackContext:
    """The attack context of one battery measurement on ``state``: its seed, budgets and demonstrations (the
    retain set's without ``demos``)."""
    ctx = inputs.context(state, seed=seed, max_new_tokens=tokens, batch_size=batch)
    return replace(ctx, demonstrations=tuple(demos) if demos else tuple(inputs.retain))


def risk_measurements(
    battery: BatteryInputs, inputs: Inputs, risk: str, canary: CanaryProbes, key_inputs: dict[str, object]
) -> Iterator[Measurement]:
    """The measurements of one risk: each method, or its not-applicable record (C-Q2); scheduled on both states
    by :func:`remnant.assess.schedule.classd_cells`."""
    from remnant.classd import demonstrations

    master = inputs.cfg.seeds.master
    demos = demonstrations(inputs.pack, canary.risk, battery.spec)
    probe_ids = [p.item_id for p in canary.probes]
    for method, attack, reason in _methods(battery, risk):
        slot = method if method not in ("direct", "likelihood") else None
        if slot is not None and attack is None:
            yield risk_not_applicable(risk, slot, reason or "disabled", key_inputs)
            continue
        seed = derive_seed(master, "classd", slot or method)
        tokens = inputs.attack_tokens.get(slot, battery.max_new_tokens) if slot else battery.max_new_tokens
        batch = inputs.attack_batch.get(slot, 16) if slot else 16
        inputs_of = {
            "probes": probe_ids,
            "demonstrations": [d.item_id for d in demos] if slot else [],
            "seed": seed,
            "max_new_tokens": tokens,
            "batch_size": batch,
            **key_inputs,
        }
        context = partial(_risk_context, inputs, seed, tokens, batch, demos)
        yield RiskMeasurement(risk, method, attack, canary, context, battery.spec.describe()[risk], inputs_of)


def counts_from_records(
    runner: CellRunner, records: Sequence[CellRecord], canary: CanaryProbes, name: str
) -> RiskCounts | None:
    """A finished measurement's counts rebuilt from its observations (None when it failed or is incomplete)."""
    from remnant.classd import count

    ran = [r for r in records if r.status == "run" and r.attack == name and r.metric == "kappa"]
    if not ran:
        return None
    first = ran[0]
    found: dict[str, bool | float] = {}
    for r in runner.store.read():
        if isinstance(r, Observation) and r.cell_key == first.cell_key and r.attack == name:
            found[r.item_id] = r.kappa if r.kappa is not None else float(r.score or 0.0)
    if any(p.item_id not in found for p in canary.probes):
        return None
    return count(canary, found, method=first.method or "direct", surface=first.surface)


def relearning_measurements(
    battery: BatteryInputs,
    inputs: Inputs,
    key_inputs: dict[str, Any],
    *,
    step0: Callable[[str], Mapping[str, Any]],
    progress: bool = False,
) -> list[Measurement]:
    """D-5.3: one measurement per budget that relearns copies of both states on the first b examples of R (the one
    relearning procedure, the main relearning set, order and checkpoints, C-W5) and scores the battery at every
    checkpoint (C-W3), or the not-run record when R is smaller than every budget; none off W-track. Step 0 is the
    state itself, so ``step0(role)`` gives its inference-time direct counts (greedy decoding and likelihood are
    deterministic)."""
    from remnant.assess.inputs import relearn_spec
    from remnant.train.relearn import relearn_order

    cfg = inputs.cfg
    rel = cfg.attacks.relearning
    if not battery.relearn or rel is None:
        return []
    spec = relearn_spec(cfg, rel)
    relearn_set = inputs.relearn_set
    plan = RelearnPlan("class_d", spec, relearn_set, relearn_order(spec.seed, len(relearn_set)), False)
    methods = [
        (risk, method)
        for risk in battery.canaries
        for method, _, _ in _methods(battery, risk)
        if method in ("direct", "likelihood")
    ]
    budgets = [b for b in battery.budgets if b <= len(relearn_set)]
    if not budgets:
        names = [measurement_name(r, m, "relearning") for r, m in methods]
        reason = f"the relearning set holds {len(relearn_set)} examples, fewer than every budget"
        return [battery_relearning_not_run(names, battery.budgets, reason, key_inputs)]
    shared = {
        "components": battery.spec.describe(),
        "probes": {r: [p.item_id for p in c.probes] for r, c in battery.canaries.items()},
        "max_new_tokens": battery.max_new_tokens,
        **key_inputs,
    }
    context = partial(_risk_context, inputs, spec.seed, battery.max_new_tokens, 16, ())
    return [
        BatteryRelearning(plan, budget, battery, context, methods, shared, step0=step0, progress=progress)
        for budget in budgets
    ]


__all__ = [
    "CLASSD_CONTEXT",
    "BatteryInputs",
    "counts_from_records",
    "prepare_battery",
    "relearning_measurements",
    "risk_measurements",
]
