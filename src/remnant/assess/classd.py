"""The Class D battery in the assessment (§5): cells for singling out, linkability and inference (D-2 to D-5.3).

A Class D config with a ``[class_d.battery]`` table runs :mod:`remnant.classd` on the post-removal model and on the
never-modified control with identical probes, prompts, seeds and scoring (R3, C-Q4, C-W5), each measurement on the
target canaries (entities P) and on never-installed control entities in one call (D4). One cell per
(state, risk, method) — the direct query, linkability by option likelihood, and each declared inference-time attack
the battery runs under (``singling_out/prefill``, …) — so ``--resume`` loses at most one measurement. Under
W-track the battery is also scored on relearned copies of both states (D-5.3): the main relearning procedure, same
relearning set R (entities disjoint from P, C-W6), same nested budgets and checkpoints, one cell per
(state, budget).

What a cell writes (:mod:`remnant.assess.facts` reads it back, :mod:`remnant.assess.finalize` builds the statement
block from it, so ``remnant recompute`` reproduces everything from the records):

- an :class:`~remnant.records.Observation` per probe (target canaries and control entities), attack = the
  measurement name;
- a ``kappa`` :class:`~remnant.records.CellRecord` on the target canaries and a ``kappa_control_entities`` record
  on the control entities (D4), each with ``params["risk"]``, ``params["method"]`` and the no-extraction
  ``params["baseline"]`` (forced-choice chance, D-3; population baseline, D-4.2).

An attack undefined for a risk's response format is a ``not_applicable`` record (C-Q2); a crashing measurement is
``failed`` (it blocks *removed*, D-5.1). torch is imported inside the functions that run models.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from remnant.assess import facts as F
from remnant.assess.cells import EXCERPT, CellRunner, Record
from remnant.config import AssessmentConfig, derive_seed
from remnant.errors import ConfigError
from remnant.records import CellRecord, CellStatus, Observation, cell_key

#: Metric of the control-entity counts (D4), beside ``kappa`` on the target canaries.
CONTROL_ENTITIES = F.CONTROL_ENTITIES
CLASSD_CONTEXT = "class_d"


@dataclass
class BatteryInputs:
    """What every battery cell shares, fixed before the first one runs (identical for both states, R3)."""

    spec: Any  # remnant.classd.BatterySpec
    canaries: dict[str, Any]  # risk -> CanaryProbes
    #: (risk, slot, attack instance or None, not-applicable reason) for every attack the battery runs under
    attacks: list[tuple[str, str, Any, str | None]]
    relearn: bool
    budgets: tuple[int, ...]
    max_new_tokens: int
    design: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def context(self) -> dict[str, Any]:
        """The ``class_d`` context entry of the records: design (D5), components (K4) and notes."""
        return {
            "design": self.design,
            "components": self.spec.describe(),
            "attacks": sorted({slot for _, slot, _, _ in self.attacks}),
            "relearning_budgets": list(self.budgets) if self.relearn else [],
            "probe_n": {risk: len(c.target) for risk, c in self.canaries.items()},
            "control_n": {risk: len(c.control) for risk, c in self.canaries.items()},
            "notes": list(self.notes),
        }


def prepare_battery(cfg: AssessmentConfig, inputs: Any) -> BatteryInputs | None:
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
    for name, described in spec.describe().items():
        inputs.components.append({"role": f"classd:{name}", **described})
    return BatteryInputs(
        spec=spec,
        canaries={str(r): c for r, c in canaries.items()},
        attacks=attacks,
        relearn=relearn,
        budgets=budgets,
        max_new_tokens=table.max_new_tokens or inputs.scoring_tokens,
        design=design,
        notes=notes,
    )


def _measurement_records(
    runner: CellRunner,
    key: str,
    state: str,
    name: str,
    surface: str,
    checkpoint: str,
    seed: int,
    counts: Any,
    outcomes: Mapping[str, tuple[bool | float, str | None, bool | None]],
    params: Mapping[str, Any],
    elapsed: float,
) -> list[Record]:
    """A measurement's per-item observations, then its target and control-entity count records (R6, D4)."""
    out: list[Record] = []
    for item_id, (value, text, willing) in outcomes.items():
        analytic = not isinstance(value, bool)
        out.append(
            Observation(
                run_id=runner.run_id,
                cell_key=key,
                model_state=state,
                attack=name,
                surface=surface,
                item_id=item_id,
                checkpoint=checkpoint,
                kappa=None if analytic else bool(value),
                willing=willing,
                score=float(value) if analytic else None,
                output_excerpt=(text or "")[:EXCERPT],
                seed=seed,
            )
        )
    out.extend(
        count_records(runner, key, state, counts, checkpoint=checkpoint, params=params, elapsed=elapsed)
    )
    return out


def count_records(
    runner: CellRunner,
    key: str,
    state: str,
    counts: Any,
    *,
    checkpoint: str,
    params: Mapping[str, Any],
    elapsed: float,
) -> list[CellRecord]:
    """The target (``kappa``) and control-entity (``kappa_control_entities``) records of one measurement (D4)."""
    common = {
        "run_id": runner.run_id,
        "cell_key": key,
        "attack": counts.name,
        "surface": counts.surface,
        "model_state": state,
        "checkpoint": checkpoint,
        "elapsed_s": elapsed,
    }
    base = {"risk": counts.risk, "method": counts.method, "baseline": counts.baseline, **params}
    target = {**base, "entities": "target"}
    control = {**base, "entities": "control"}
    if counts.expected_k is not None:
        target["expected_k"] = counts.expected_k
    if counts.control_expected_k is not None:
        control["expected_k"] = counts.control_expected_k
    return [
        CellRecord(**common, metric="kappa", k=counts.k, n=counts.n, params=target),
        CellRecord(**common, metric=CONTROL_ENTITIES, k=counts.control_k, n=counts.control_n, params=control),
    ]


def _status_record(
    runner: CellRunner,
    key: str,
    state: str,
    name: str,
    risk: str,
    surface: str,
    status: CellStatus,
    reason: str,
    params: Mapping[str, Any] | None = None,
    checkpoint: str = "final",
) -> CellRecord:
    return CellRecord(
        run_id=runner.run_id,
        cell_key=key,
        attack=name,
        surface=surface,
        model_state=state,
        metric="kappa",
        k=0,
        n=0,
        checkpoint=checkpoint,
        params={"risk": risk, **(params or {})},
        elapsed_s=0.0,
        status=status,
        reason=reason,
    )


def _status_records(
    runner: CellRunner,
    key: str,
    state: str,
    names: Sequence[str],
    surface: str,
    status: CellStatus,
    reason: str,
    checkpoint: str = "final",
) -> list[Record]:
    """One status record per measurement name (``risk/…``), e.g. every relearning measurement not run."""
    return [
        _status_record(runner, key, state, n, n.split("/")[0], surface, status, reason, checkpoint=checkpoint)
        for n in names
    ]


def _per_state(
    states: Mapping[str, Any], key_inputs: Mapping[str, Any], **inputs: Any
) -> Iterator[tuple[str, Any, str]]:
    """(role, state, cell key) on the post-removal model, then the control: the same inputs but the state and its
    weights, so both run identically (R3, C-Q4, C-W5)."""
    for role in (F.POST, F.CONTROL):
        state = states[role]
        yield role, state, cell_key(state=role, weights=state.digest, **inputs, **key_inputs)


def _measure(ctx: Any, canary: Any, method: str, attack: Any, surface: str) -> tuple[Any, dict[str, Any]]:
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
    scores = {o.item_id: o.kappa for o in outcomes}
    counts = count(canary, scores, method=method, surface=surface)
    return counts, {o.item_id: (o.kappa, o.output, o.willing) for o in outcomes}


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


def _name(risk: str, method: str, surface: str = "inference_time") -> str:
    parts = (
        [risk] + ([surface] if surface != "inference_time" else []) + ([method] if method != "direct" else [])
    )
    return "/".join(parts)


def battery_cells(
    runner: CellRunner,
    battery: BatteryInputs,
    inputs: Any,
    states: Mapping[str, Any],
    key_inputs: dict[str, Any],
) -> dict[str, dict[str, Any]]:
    """Every inference-time battery cell on the post-removal model and the control (D-2 to D-4, D4, C-Q4).

    Returns, per state, the direct query's counts by measurement name (the relearning cells' step 0)."""
    from remnant.classd import demonstrations

    cfg = inputs.cfg
    master = cfg.seeds.master
    described = battery.spec.describe()
    direct: dict[str, dict[str, Any]] = {F.POST: {}, F.CONTROL: {}}
    for risk, canary in battery.canaries.items():
        demos = (
            demonstrations(inputs.pack, canary.risk, battery.spec) if battery.spec.risk_demonstrations else ()
        )
        probe_ids = [p.item_id for p in canary.probes]
        for method, attack, reason in _methods(battery, risk):
            name = _name(risk, method)
            slot = method if method not in ("direct", "likelihood") else None
            if slot is not None and attack is None:
                key = cell_key(
                    kind="classd_not_applicable", risk=risk, attack=slot, reason=reason, **key_inputs
                )
                na: list[Record] = [
                    _status_record(
                        runner,
                        key,
                        F.POST,
                        name,
                        risk,
                        "inference_time",
                        "not_applicable",
                        reason or "disabled",
                    )
                ]
                runner.run(key, f"{name} (not applicable)", partial(list, na))
                continue
            seed = derive_seed(master, "classd", slot or method)
            tokens = (
                inputs.attack_tokens.get(slot, battery.max_new_tokens) if slot else battery.max_new_tokens
            )
            batch = inputs.attack_batch.get(slot, 16) if slot else 16
            spec = attack.spec.to_dict() if attack is not None and attack.spec is not None else None
            for role, state, key in _per_state(
                states,
                key_inputs,
                kind="classd",
                risk=risk,
                method=method,
                attack=spec,
                component=described[risk],
                probes=probe_ids,
                demonstrations=[d.item_id for d in demos] if slot else [],
                seed=seed,
                max_new_tokens=tokens,
                batch_size=batch,
            ):

                def compute(
                    key: str = key,
                    state: Any = state,
                    method: str = method,
                    attack: Any = attack,
                    seed: int = seed,
                    tokens: int = tokens,
                    batch: int = batch,
                    name: str = name,
                    canary: Any = canary,
                    demos: Any = demos,
                    spec: Any = spec,
                    risk: str = risk,
                ) -> list[Record]:
                    ctx = replace(
                        inputs.context(state, seed=seed, max_new_tokens=tokens, batch_size=batch),
                        demonstrations=tuple(demos) if demos else tuple(inputs.retain),
                    )
                    start = time.perf_counter()
                    try:
                        counts, items = _measure(ctx, canary, method, attack, "inference_time")
                    except (KeyboardInterrupt, MemoryError):
                        raise
                    except Exception as exc:  # a crashing measurement is failed (blocks removed), not a crash
                        return [
                            _status_record(
                                runner,
                                key,
                                state.role,
                                name,
                                risk,
                                "inference_time",
                                "failed",
                                f"{type(exc).__name__}: {exc}",
                            )
                        ]
                    counts = replace(counts, method=method)
                    elapsed = time.perf_counter() - start
                    params: dict[str, Any] = {"component": described[risk]}
                    if spec is not None:
                        params["attack"] = spec
                    return _measurement_records(
                        runner,
                        key,
                        state.role,
                        name,
                        "inference_time",
                        "final",
                        seed,
                        counts,
                        items,
                        params,
                        elapsed,
                    )

                records = runner.run(key, f"{name} on {role}", compute)
                if method == "direct" or method == "likelihood":
                    counts = counts_from_records(runner, records, canary, name)
                    if counts is not None:
                        direct[role][name] = counts
    return direct


def counts_from_records(runner: CellRunner, records: Sequence[CellRecord], canary: Any, name: str) -> Any:
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
    return count(canary, found, method=str(first.params.get("method", "direct")), surface=first.surface)


def relearning_battery_cells(
    runner: CellRunner,
    battery: BatteryInputs,
    inputs: Any,
    states: Mapping[str, Any],
    key_inputs: dict[str, Any],
    *,
    step0: Mapping[str, Mapping[str, Any]],
    progress: bool = False,
) -> None:
    """D-5.3: relearn copies of both states on the first b examples of R and score the battery at every
    checkpoint (C-W3), the control through the identical procedure (C-W5). Step 0 is the state itself, so its
    counts are the inference-time direct measurements (greedy decoding and likelihood are deterministic)."""
    from dataclasses import asdict

    from remnant.assess.inputs import relearn_spec

    cfg = inputs.cfg
    rel = cfg.attacks.relearning
    if not battery.relearn or rel is None:
        return
    spec = relearn_spec(cfg, rel)
    relearn_set = inputs.relearn_set
    order = inputs.relearn_order(spec, relearn_set)
    names = [
        _name(risk, method, "relearning")
        for risk in battery.canaries
        for method, _, _ in _methods(battery, risk)
        if method in ("direct", "likelihood")
    ]
    budgets = [b for b in battery.budgets if b <= len(relearn_set)]
    if not budgets:
        key = cell_key(kind="classd_relearning_not_run", budgets=list(battery.budgets), **key_inputs)
        reason = f"the relearning set holds {len(relearn_set)} examples, fewer than every budget"
        not_run = _status_records(runner, key, F.POST, names, "relearning", "not_run", reason)
        runner.run(key, "class D relearning (not run)", partial(list, not_run))
        return
    for budget in budgets:
        chosen = order[:budget]
        for role, state, key in _per_state(
            states,
            key_inputs,
            kind="classd_relearning",
            budget=budget,
            spec={k: v for k, v in asdict(spec).items() if k != "budgets"},
            examples=[(relearn_set[i].question, relearn_set[i].answer) for i in chosen],
            components=battery.spec.describe(),
            probes={r: [p.item_id for p in c.probes] for r, c in battery.canaries.items()},
            max_new_tokens=battery.max_new_tokens,
        ):
            label = f"class D relearning b={budget} on {role}"
            compute = partial(
                _relearn_compute,
                runner,
                battery,
                inputs,
                spec,
                state,
                key,
                chosen,
                budget,
                label,
                names,
                step0.get(state.role, {}),
                progress,
            )
            runner.run(key, label, compute)


def _relearn_compute(
    runner: CellRunner,
    battery: BatteryInputs,
    inputs: Any,
    spec: Any,
    state: Any,
    key: str,
    chosen: Sequence[int],
    budget: int,
    label: str,
    names: Sequence[str],
    step0: Mapping[str, Any],
    progress: bool,
) -> list[Record]:
    from remnant.models.prompts import encode_pair
    from remnant.train.loop import CheckpointPoint, prepare_model, train
    from remnant.train.objectives import PairsObjective
    from remnant.train.removal import pad_id

    tok = state.tokenizer
    relearn_set = inputs.relearn_set
    pairs = [encode_pair(tok, relearn_set[i].question, relearn_set[i].answer, inputs.fmt) for i in chosen]
    train_cfg = spec.train_config(progress, label)
    model = prepare_model(copy.deepcopy(state.model), train_cfg)
    ctx = inputs.context(state, seed=spec.seed, max_new_tokens=battery.max_new_tokens)
    records: list[Record] = []
    start = time.perf_counter()

    def on_checkpoint(m: Any, point: CheckpointPoint) -> dict[str, Any]:
        checkpoint = f"budget={budget}/step={point.step}"
        params = {
            "budget": budget,
            "step": point.step,
            "epoch": point.epoch,
            "examples": round(point.epoch * budget),
        }
        found: dict[str, Any] = {}
        for risk, canary in battery.canaries.items():
            for method, _, _ in _methods(battery, risk):
                if method not in ("direct", "likelihood"):
                    continue
                name = _name(risk, method, "relearning")
                reused = step0.get(_name(risk, method)) if point.step == 0 else None
                if reused is not None:
                    counts = replace(reused, surface="relearning")
                    items = {i: (v, None, None) for i, v in counts.hits.items()}
                else:
                    counts, items = _measure(ctx.with_model(m, tok), canary, method, None, "relearning")
                found[name] = counts
                records.extend(
                    _measurement_records(
                        runner,
                        key,
                        state.role,
                        name,
                        "relearning",
                        checkpoint,
                        spec.seed,
                        counts,
                        items,
                        {**params, "reused_step0": reused is not None},
                        time.perf_counter() - start,
                    )
                )
        return {"k": sum(c.k for c in found.values()), "n": sum(c.n for c in found.values())}

    outcome = train(model, PairsObjective(pairs, pad_id(tok)), train_cfg, on_checkpoint=on_checkpoint)
    if outcome.status == "diverged":
        reason = f"step {outcome.diverged_step}: {outcome.reason}"
        records += _status_records(
            runner, key, state.role, names, "relearning", "diverged", reason, f"budget={budget}/diverged"
        )
    del model
    return records


__all__ = [
    "CLASSD_CONTEXT",
    "CONTROL_ENTITIES",
    "BatteryInputs",
    "battery_cells",
    "count_records",
    "counts_from_records",
    "prepare_battery",
    "relearning_battery_cells",
]
