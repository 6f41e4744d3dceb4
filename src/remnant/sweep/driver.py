"""The driver of ``remnant sweep run``: the one writer of the sweep's records (docs/sweep.md).

It holds the sweep folder's lock for the whole run (:mod:`remnant.runlock`, R23: one writer per folder; Ray
workers never take it), repairs a torn record tail left by a killed run, reads which cells the store already
holds, and hands one task per model with pending cells to the executor. Every item a task streams back is
appended by the driver alone: a cell's records through the engine's :class:`~remnant.engine.runner.CellRunner`
(in one write, so a cell is recorded whole or re-run whole), a build that trained something as an
:class:`~remnant.records.Event`. A task that failed on every try has its remaining cells recorded as *failed*
with its error. Progress lines say the models and cells done and the time left at the rate so far.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from remnant.engine.measurement import Record
from remnant.records import RECORDS_FILE, CellRecord, Event, Reading, RecordStore
from remnant.runlock import FolderLock, held
from remnant.sweep.build import BuildResult
from remnant.sweep.cells import PlannedCell, model_cells
from remnant.sweep.context import Workspace
from remnant.sweep.executors import LocalExecutor, RayExecutor, TaskFailed
from remnant.sweep.measure import CellOutput, TaskDone, not_run
from remnant.sweep.pins import Pin, trust_store
from remnant.sweep.prepare import Prepared


@dataclass
class RunSummary:
    """What a run did: cells planned, found done, computed, failed; models finished; wall seconds."""

    models: int
    cells: int
    done_before: int
    computed: int = 0
    failed_tasks: list[str] = field(default_factory=list)
    builds: int = 0
    seconds: float = 0.0
    per_model: dict[str, float] = field(default_factory=dict)


@dataclass
class _Progress:
    total_cells: int
    done_cells: int
    total_models: int
    say: Callable[[str], None]
    start: float = field(default_factory=time.perf_counter)
    computed: int = 0
    models_done: int = 0

    def cell(self, label: str) -> None:
        self.computed += 1
        self.done_cells += 1
        left = self.total_cells - self.done_cells
        rate = (time.perf_counter() - self.start) / self.computed
        self.say(
            f"{self.models_done}/{self.total_models} models, {self.done_cells}/{self.total_cells} cells, "
            f"ETA {left * rate / 60:.1f} min · {label}"
        )


def _failed_records(
    prepared: Prepared, model_id: str, keys: set[str], reason: str
) -> list[tuple[PlannedCell, list[Record]]]:
    from remnant.engine.cell import CellTarget

    model = prepared.pool.model(model_id)
    out = []
    for cell, pm in model_cells(prepared.spec, model, prepared.measurements, prepared.pack.digest):
        if cell.key in keys:
            target = CellTarget(prepared.run_id, cell.key, cell.perturbation, pm.name, pm.surface)
            out.append((cell, not_run(pm, "failed", reason).measure(None, target)))
    return out


def _build_event(run_id: str, model_id: str, build: BuildResult) -> Event:
    kind = "diverged" if any(s == "diverged" for s in build.models.values()) else "stage_finished"
    return Event(
        run_id=run_id,
        stage="build",
        kind=kind,
        message=f"{build.job[:12]} for {model_id}: {build.status}"
        + (f" ({build.error})" if build.error else ""),
        data={
            "job": build.job,
            "status": build.status,
            "models": build.models,
            "seconds": round(build.seconds, 3),
            "pins": build.pins,  # what each stored checkpoint holds: later reads check against this (R23)
        },
    )


def workspace(
    prepared: Prepared,
    out: Path,
    fault: str | None = None,
    pins: dict[str, Pin] | None = None,
    token: str = "",
) -> Workspace:
    """The tasks' workspace; ``pins`` (key -> remnant.sweep.pins.Pin) are the stored checkpoints they may use,
    ``token`` marks the checkpoints this run builds (remnant.sweep.pins)."""
    import json

    plan = json.loads(json.dumps(prepared.plan_dict()))  # plain JSON values, as plan.json holds them
    return Workspace.of_plan(plan, out.resolve(), fault=fault, pins=dict(pins or {}), token=token)


def only_failed(records: list[CellRecord | Reading]) -> bool:
    """A cell every record of which (cell records, or an audit cell's readings) says it failed (a crashed or
    out-of-memory task): ``--retry-failed`` reruns it. A diverged build is an outcome, not a failure: kept."""
    return all(r.status == "failed" for r in records)


def run_sweep(
    prepared: Prepared,
    out: Path,
    executor: LocalExecutor | RayExecutor,
    *,
    say: Callable[[str], None],
    fault: str | None = None,
    retry_failed: bool = False,
    lock: FolderLock | None = None,
) -> RunSummary:
    """Run every pending cell of ``prepared`` through ``executor``, recording into ``out/records.jsonl``; with
    ``retry_failed``, cells recorded as failed are pending again (their records stay; the new ones follow).

    This process, the driver, holds the sweep folder's lock throughout (R23, :mod:`remnant.runlock`): the
    caller's ``lock`` when it holds it already, else one taken here (a folder in use is refused with its holder
    named). Workers, local or Ray, never take it: they write no records."""
    with held(out, lock, purpose="remnant sweep run", say=say, create=False):
        return _run_locked(prepared, out, executor, say=say, fault=fault, retry_failed=retry_failed)


def _run_locked(
    prepared: Prepared,
    out: Path,
    executor: LocalExecutor | RayExecutor,
    *,
    say: Callable[[str], None],
    fault: str | None,
    retry_failed: bool,
) -> RunSummary:
    """:func:`run_sweep` with the sweep folder's lock held."""
    from remnant.engine.runner import CellRunner

    start = time.perf_counter()
    store = RecordStore(out / RECORDS_FILE)
    torn = store.repair()
    if torn is not None:
        say(
            f"moved a torn tail (line {torn.line}, {torn.nbytes} bytes) to {torn.side_file.name}: its cell re-runs"
        )
    # the stored checkpoints this run's tasks may use: those records pin (remnant.sweep.pins)
    keys = [m.state for m in prepared.pool.models if m.path is None and m.pool != "base"]
    pins = trust_store(keys, prepared.store, store, prepared.run_id, say)
    runner = CellRunner(store, prepared.run_id, redo=only_failed if retry_failed else None)
    done = runner.recorded()
    pending: dict[str, set[str]] = {}
    for cell in prepared.cells:
        if cell.key not in done:
            pending.setdefault(cell.model, set()).add(cell.key)
    summary = RunSummary(
        len(prepared.pool.models), len(prepared.cells), len(prepared.cells) - sum(map(len, pending.values()))
    )
    progress = _Progress(summary.cells, summary.done_before, len(prepared.pool.models), say)
    progress.models_done = summary.models - len(pending)
    say(
        f"{summary.done_before}/{summary.cells} cells already recorded; {len(pending)} models to run ({executor.name})"
    )
    tasks = [
        (m.id, frozenset(c.key for c in prepared.cells if c.model == m.id and c.key in done))
        for m in prepared.pool.models
        if m.id in pending
    ]
    token = secrets.token_hex(16)  # marks what this run builds (remnant.sweep.pins)
    for model_id, item in executor.run(workspace(prepared, out, fault, pins, token), tasks):
        if isinstance(item, TaskDone):
            summary.per_model[model_id] = item.seconds
        elif isinstance(item, BuildResult):
            if item.status != "reused" or item.pins:
                store.append(_build_event(prepared.run_id, model_id, item))
                summary.builds += 1
        elif isinstance(item, CellOutput):
            runner.run(item.key, item.label, lambda item=item: list(item.records))  # type: ignore[misc]
            pending[model_id].discard(item.key)
            progress.cell(item.label)
        elif isinstance(item, TaskFailed):
            summary.failed_tasks.append(model_id)
            say(f"{model_id}: task failed after {item.tries} tries: {item.error}")
            for cell, records in _failed_records(
                prepared, model_id, pending[model_id], f"task failed: {item.error}"
            ):
                runner.run(cell.key, f"{model_id} [{cell.perturbation}] {cell.entry}", lambda r=records: r)  # type: ignore[misc]
                progress.cell(f"{model_id} [{cell.perturbation}] {cell.entry} (failed)")
            pending[model_id].clear()
        if model_id in pending and not pending[model_id]:
            progress.models_done += 1
            del pending[model_id]
    summary.computed = progress.computed
    summary.seconds = time.perf_counter() - start
    return summary


__all__ = ["RunSummary", "only_failed", "run_sweep", "workspace"]
