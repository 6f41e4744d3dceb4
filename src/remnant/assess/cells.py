"""Cells: one (state × attack × checkpoint) measurement each, keyed by a content hash of its inputs (R3, R22).

A cell's key (:func:`remnant.records.cell_key`) covers everything that determines its numbers: the state's
weights digest and role, the attack's registered name, version and every parameter, the probe items, the seed,
the prompt format and the scoring settings. Identical inputs give identical keys, so:

- ``--resume`` skips every cell already in ``records.jsonl`` (a crash costs at most the cell in flight);
- a :class:`CellCache` shared between assessments (the demo runs three against one control) computes the
  control's cells once and copies their records into each run.

The post-removal model and the control go through the same functions with the same inputs, seeds and scorer;
only the model differs, and no function is told which state it has beyond the label it writes (R3, C-Q4, C-W5).
Each computed cell's observations and cell records are appended in one write (``RecordStore.extend``).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from remnant.atomic import write_atomic
from remnant.attacks.base import AttackContext, ItemOutcome, no_attack
from remnant.attacks.harness import cell as rate_cell
from remnant.records import CellRecord, CellStatus, Observation, RecordStore, cell_key, chained_lines
from remnant.score.probe import Probe

EXCERPT = 160
Record = Observation | CellRecord


class CellCache:
    """Records of computed cells by key, shared between runs (``DIR/<key>.jsonl``)."""

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)

    def get(self, key: str) -> list[Any] | None:
        path = self.dir / f"{key}.jsonl"
        return RecordStore(path).read() if path.is_file() else None

    def put(self, key: str, records: Sequence[Any]) -> None:
        write_atomic(self.dir / f"{key}.jsonl", b"".join(chained_lines(records)))


@dataclass
class CellRunner:
    """Runs cells at most once per run: skips completed keys, imports cached ones, computes the rest.

    ``before_cell(label)`` is called before a cell is computed (a test raises there to simulate a kill).
    """

    store: RecordStore
    run_id: str
    cache: CellCache | None = None
    before_cell: Callable[[str], None] | None = None
    progress: Callable[[str], None] | None = None
    _done: dict[str, list[CellRecord]] = field(default_factory=dict)
    computed: int = 0
    reused: int = 0

    def __post_init__(self) -> None:
        for record in self.store.read():
            if isinstance(record, CellRecord):
                self._done.setdefault(record.cell_key, []).append(record)

    def run(self, key: str, label: str, compute: Callable[[], list[Record]]) -> list[CellRecord]:
        """The cell records of ``key``: from this run, from the shared cache, or computed now."""
        if key in self._done:
            self.reused += 1
            return self._done[key]
        cached = self.cache.get(key) if self.cache is not None else None
        if cached:
            records = [r.model_copy(update={"run_id": self.run_id}) for r in cached]
            self.reused += 1
        else:
            if self.before_cell is not None:
                self.before_cell(label)
            start = time.perf_counter()
            records = compute()
            self.computed += 1
            if self.progress is not None:
                self.progress(f"{label} ({time.perf_counter() - start:.1f}s)")
            if self.cache is not None:
                self.cache.put(key, records)
        self.store.extend(records)
        cells = [r for r in records if isinstance(r, CellRecord)]
        self._done[key] = cells
        return cells


@dataclass(frozen=True)
class _Cell:
    """Where a cell's records go: the fields every one of its observations and cell records carries."""

    run_id: str
    key: str
    state: str
    attack: str
    surface: str


def _write_cell(
    cell: _Cell,
    *,
    checkpoint: str,
    elapsed: float,
    metric: str = "kappa",
    k: int = 0,
    n: int = 0,
    params: dict[str, Any] | None = None,
    status: CellStatus = "run",
    reason: str | None = None,
) -> CellRecord:
    """One cell record of ``cell``; ``k = n = 0`` with a status and reason for a cell that did not run (R19)."""
    return CellRecord(
        run_id=cell.run_id,
        cell_key=cell.key,
        attack=cell.attack,
        surface=cell.surface,
        model_state=cell.state,
        metric=metric,
        k=k,
        n=n,
        checkpoint=checkpoint,
        params={} if params is None else params,
        elapsed_s=elapsed,
        status=status,
        reason=reason,
    )


def _utility_record(
    cell: _Cell, *, checkpoint: str, name: str, spec: dict[str, Any], reading: Any, start: float
) -> CellRecord:
    """A utility reading as a cell record (R10, R11): a proportion's k/n, else the value with a nominal n."""
    rate = reading.rate
    k, n = (rate.k, rate.n) if rate is not None else (0, max(reading.n, 1))
    return _write_cell(
        cell,
        metric="utility",
        k=k,
        n=n,
        checkpoint=checkpoint,
        params={"metric": name, "value": reading.value, "proportion": rate is not None, "component": spec},
        elapsed=time.perf_counter() - start,
    )


def observation(
    run_id: str, key: str, state: str, attack: str, surface: str, checkpoint: str, seed: int, o: ItemOutcome
) -> Observation:
    """One scored item; an analytic attack's probability goes to ``score`` with κ left null (R6)."""
    analytic = o.is_analytic
    return Observation(
        run_id=run_id,
        cell_key=key,
        model_state=state,
        attack=attack,
        surface=surface,
        item_id=o.item_id,
        checkpoint=checkpoint,
        kappa=None if analytic else bool(o.kappa),
        willing=o.willing,
        score=float(o.kappa) if analytic else None,
        output_excerpt=(o.output or "")[:EXCERPT],
        seed=seed,
    )


def score_outcomes(
    cell: _Cell,
    checkpoint: str,
    seed: int,
    outcomes: Sequence[ItemOutcome],
    probes: Sequence[Probe],
    params: dict[str, Any],
    elapsed: float,
) -> list[Record]:
    """Observations, then κ and w cell records (R6), for one state's outcomes at one checkpoint.

    An analytic κ counts round(Σp) and records Σp as ``expected_k``.
    """
    where = (cell.run_id, cell.key, cell.state, cell.attack, cell.surface, checkpoint)
    out: list[Record] = [observation(*where, seed, o) for o in outcomes]
    result = rate_cell(cell.state, outcomes, probes, elapsed)
    kappa_params = dict(params)
    if result.expected_k is not None:
        kappa_params["expected_k"] = result.expected_k
    kappa, willing = result.kappa, result.willing
    out.append(
        _write_cell(cell, k=kappa.k, n=kappa.n, checkpoint=checkpoint, params=kappa_params, elapsed=elapsed)
    )
    if willing is not None and willing.n:
        out.append(
            _write_cell(
                cell,
                metric="w",
                k=willing.k,
                n=willing.n,
                checkpoint=checkpoint,
                params=params,
                elapsed=elapsed,
            )
        )
    return out


def attack_cell(
    runner: CellRunner,
    *,
    state: Any,
    attack_name: str,
    attack: Any,
    ctx: AttackContext,
    probes: Sequence[Probe],
    key_inputs: dict[str, Any],
) -> list[CellRecord]:
    """One attack on one state (``attack`` None: the unattacked baseline). Failures are recorded, not raised."""
    spec = attack.spec.to_dict() if attack is not None and attack.spec is not None else {"name": "none"}
    surface = attack.surface if attack is not None else "baseline"
    key = cell_key(kind="attack", state=state.role, weights=state.digest, attack=spec, **key_inputs)
    params: dict[str, Any] = {"component": spec}
    if attack is not None and not getattr(attack, "adjudicating", True):
        params["adjudicating"] = False
    cell = _Cell(runner.run_id, key, state.role, attack_name, surface)

    def compute() -> list[Record]:
        sctx = ctx.with_model(state.model, state.tokenizer)
        start = time.perf_counter()
        try:
            outcomes = attack.run(sctx, probes) if attack is not None else no_attack(sctx, probes)
        except (KeyboardInterrupt, MemoryError):
            raise
        except Exception as exc:  # a crashing attack is a *failed* cell (blocks removed), not a crashed run
            return [
                _write_cell(
                    cell,
                    checkpoint="final",
                    params=params,
                    elapsed=time.perf_counter() - start,
                    status="failed",
                    reason=f"{type(exc).__name__}: {exc}",
                )
            ]
        elapsed = time.perf_counter() - start
        return score_outcomes(cell, "final", ctx.seed, outcomes, probes, params, elapsed)

    return runner.run(key, f"{attack_name} on {state.role}", compute)


def not_applicable_cell(
    runner: CellRunner, *, attack_name: str, surface: str, reason: str, key_inputs: dict[str, Any]
) -> list[CellRecord]:
    """An attack that does not apply (C-Q2) or is disabled with its reason: recorded, never withstood."""
    key = cell_key(kind="not_applicable", attack=attack_name, reason=reason, **key_inputs)
    cell = _Cell(runner.run_id, key, "post_removal", attack_name, surface)

    def compute() -> list[Record]:
        return [_write_cell(cell, checkpoint="final", elapsed=0.0, status="not_applicable", reason=reason)]

    return runner.run(key, f"{attack_name} (not applicable)", compute)


def utility_cell(
    runner: CellRunner,
    *,
    state: Any,
    metric_name: str,
    metric: Any,
    fmt: Any,
    data: Sequence[Any],
    attack: str = "none",
    checkpoint: str = "removal_stage",
    key_inputs: dict[str, Any],
    model: Any = None,
) -> list[CellRecord]:
    """A utility metric on one state (R10, R11), or on a relearned copy of it (``model``; R12, C-W4)."""
    spec = metric.spec.to_dict() if metric.spec is not None else {"name": metric_name}
    key = cell_key(
        kind="utility",
        state=state.role,
        weights=state.digest,
        metric=spec,
        attack=attack,
        checkpoint=checkpoint,
        **key_inputs,
    )
    cell = _Cell(runner.run_id, key, state.role, attack, "utility")

    def compute() -> list[Record]:
        start = time.perf_counter()
        reading = metric.measure(
            model if model is not None else state.model, state.tokenizer, fmt, data, state=state.role
        )
        return [
            _utility_record(
                cell, checkpoint=checkpoint, name=metric_name, spec=spec, reading=reading, start=start
            )
        ]

    return runner.run(key, f"utility {metric_name} on {state.role}", compute)


def kept_general_ids(
    runner: CellRunner,
    *,
    control: Any,
    ctx: AttackContext,
    general: Sequence[Probe],
    key_inputs: dict[str, Any],
) -> list[str]:
    """The general questions the never-modified control answers (R10: u measurable on the control)."""
    records = attack_cell(
        runner,
        state=control,
        attack_name="binding",
        attack=None,
        ctx=ctx,
        probes=general,
        key_inputs={**key_inputs, "purpose": "general_utility_set"},
    )
    key = records[0].cell_key
    hits = {
        r.item_id for r in runner.store.read() if isinstance(r, Observation) and r.cell_key == key and r.kappa
    }
    return [p.item_id for p in general if p.item_id in hits]


def outcomes_of(runner: CellRunner, key: str, probes: Sequence[Probe]) -> list[ItemOutcome] | None:
    """A finished cell's item outcomes, rebuilt from its observations in probe order (None if incomplete)."""
    found = {
        r.item_id: ItemOutcome(r.item_id, r.output_excerpt, bool(r.kappa), r.willing)
        for r in runner.store.read()
        if isinstance(r, Observation) and r.cell_key == key and r.kappa is not None
    }
    if any(p.item_id not in found for p in probes):
        return None
    return [found[p.item_id] for p in probes]


@dataclass(frozen=True)
class RelearnPlan:
    """The declared relearning procedure of one arm (C-W1, C-W3, C-W5): what every state goes through."""

    arm: str
    spec: Any  # remnant.train.relearn.RelearnSpec
    relearn_set: tuple[Any, ...]  # QA pairs, in the pack's order
    order: tuple[int, ...]  # one seeded permutation: budget b uses its first b (nested subsets, C-W1)
    utility_at_end: bool


def relearning_cell(
    runner: CellRunner,
    *,
    plan: RelearnPlan,
    budget: int,
    state: Any,
    ctx: AttackContext,
    probes: Sequence[Probe],
    utility: Sequence[tuple[str, Any, Sequence[Any]]],
    key_inputs: dict[str, Any],
    progress: bool = False,
    step0: Sequence[ItemOutcome] | None = None,
) -> list[CellRecord]:
    """Relearn a copy of ``state`` on the first ``budget`` examples and score P at every checkpoint (C-W3).

    The control goes through exactly this with the same plan (C-W5). Scoring is the unattacked baseline's
    (greedy generation, normalised match, κ and w), so relearning rates compare with every other cell (R3).
    With ``utility``, the post-removal copy's utility is measured once training ends (attack stage, R12).
    ``step0`` is the state's unattacked baseline under the same scoring: the step-0 checkpoint is that model,
    so its outcomes are reused rather than generated again (they are identical; greedy decoding).
    """
    from dataclasses import asdict

    from remnant.models.prompts import encode_pair
    from remnant.train.loop import CheckpointPoint, prepare_model, train
    from remnant.train.objectives import PairsObjective
    from remnant.train.removal import pad_id

    spec = plan.spec
    chosen = plan.order[:budget]
    key = cell_key(
        kind="relearning",
        arm=plan.arm,
        state=state.role,
        weights=state.digest,
        budget=budget,
        spec={k: v for k, v in asdict(spec).items() if k != "budgets"},
        examples=[(plan.relearn_set[i].question, plan.relearn_set[i].answer) for i in chosen],
        utility=[name for name, _, _ in utility],
        **key_inputs,
    )
    label = f"{plan.arm} b={budget} on {state.role}"
    cell = _Cell(runner.run_id, key, state.role, plan.arm, "relearning")

    def compute() -> list[Record]:
        tok = state.tokenizer
        pairs = [
            encode_pair(tok, plan.relearn_set[i].question, plan.relearn_set[i].answer, ctx.fmt)
            for i in chosen
        ]
        cfg = spec.train_config(progress, label)
        model = prepare_model(copy.deepcopy(state.model), cfg)
        records: list[Record] = []
        start = time.perf_counter()

        def on_checkpoint(m: Any, point: CheckpointPoint) -> dict[str, Any]:
            if point.step == 0 and step0 is not None:
                outcomes = list(step0)
            else:
                outcomes = no_attack(ctx.with_model(m, tok), probes)
            checkpoint = f"budget={budget}/step={point.step}"
            params = {
                "budget": budget,
                "step": point.step,
                "epoch": point.epoch,
                "examples": round(point.epoch * budget),
            }
            elapsed = time.perf_counter() - start
            records.extend(score_outcomes(cell, checkpoint, spec.seed, outcomes, probes, params, elapsed))
            return {"k": sum(bool(o.kappa) for o in outcomes), "n": len(outcomes)}

        outcome = train(model, PairsObjective(pairs, pad_id(tok)), cfg, on_checkpoint=on_checkpoint)
        if outcome.status == "diverged":
            records.append(
                _write_cell(
                    cell,
                    checkpoint=f"budget={budget}/diverged",
                    elapsed=outcome.seconds,
                    status="diverged",
                    reason=f"step {outcome.diverged_step}: {outcome.reason}",
                )
            )
        as_utility = replace(cell, surface="utility")
        for name, metric, data in utility:
            spec_u = metric.spec.to_dict() if metric.spec is not None else {"name": name}
            reading = metric.measure(model, tok, ctx.fmt, data, state=state.role)
            records.append(
                _utility_record(
                    as_utility,
                    checkpoint=f"budget={budget}/final",
                    name=name,
                    spec=spec_u,
                    reading=reading,
                    start=start,
                )
            )
        del model
        return records

    return runner.run(key, label, compute)


__all__ = [
    "CellCache",
    "CellRunner",
    "RelearnPlan",
    "attack_cell",
    "kept_general_ids",
    "not_applicable_cell",
    "observation",
    "outcomes_of",
    "relearning_cell",
    "utility_cell",
]
