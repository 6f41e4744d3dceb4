"""One task: build a model if it is missing, then measure its pending cells, yielding each cell as it finishes.

The task is the same function under both executors (in-process, or a Ray task that streams its yields back).
It first yields the :class:`~remnant.sweep.build.BuildResult` of the model's job (and of the audit references'
jobs), then one :class:`CellOutput` per pending cell, perturbation by perturbation: ``none`` (the model itself),
``nf4`` (its decoder weights fake-quantized to NF4 for the measurements, restored after: R25) and ``relearn`` (a
copy fine-tuned for one epoch on the forget set, C-W1). The driver appends each cell's records to the one store
as it arrives, so a killed task loses only the cell it was computing. A model whose build or relearned copy
diverged, or whose parent could not be built, gets a *diverged* or *failed* record in each of its cells; a
measurement that raises is a *failed* cell (Annex B.6: outcomes, not crashes).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from copy import deepcopy
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

from remnant.engine.measurement import Measurement, NotRun, StateView, run_measurement
from remnant.engine.runner import CellRunner, MemoryStore
from remnant.records import AnyRecord
from remnant.standard.vocabulary import Status
from remnant.sweep.build import BuildResult, build_job
from remnant.sweep.cells import NF4, RELEARN, PlannedCell, model_cells, perturbed_digest, reference_states
from remnant.sweep.context import WorkerContext, Workspace
from remnant.sweep.suite import PoolMeasurement, Runtime, SuiteData, suite_data, suite_measurements


@dataclass(frozen=True)
class CellOutput:
    """One finished cell: its key, progress label, model, and records (observations, then cell records)."""

    key: str
    label: str
    model: str
    records: tuple[AnyRecord, ...]


@dataclass(frozen=True)
class TaskDone:
    """A task's end: the model and the seconds the task took (building included)."""

    model: str
    seconds: float


def inject_fault(ws: Workspace, label: str) -> None:
    """The test seam of a sweep, the worker's ``CellRunner.before_cell``: ``ws.fault`` =
    ``"exit|raise:MARKER:TEXT"`` ends the worker process (``exit``) or raises (``raise``) before the first cell
    whose label contains TEXT, once: the MARKER file records that it fired."""
    if not ws.fault:
        return
    import os
    from pathlib import Path

    kind, marker, text = ws.fault.split(":", 2)
    if text in label and not Path(marker).exists():
        Path(marker).write_text(label)
        if kind == "exit":
            os._exit(3)
        raise RuntimeError(f"injected fault before {label}")


@contextlib.contextmanager
def perturbed(ctx: WorkerContext, model: Any, perturbation: str) -> Iterator[tuple[Any, str | None]]:
    """``model`` under ``perturbation``, with the reason it could not be made (None when it could)."""
    if perturbation == NF4:
        from remnant.states.perturb import nf4

        with nf4(model):
            yield model, None
        return
    if perturbation != RELEARN:
        yield model, None
        return
    from remnant.engine.relearning import RelearnPlan
    from remnant.train.data import removal_data
    from remnant.train.loop import merge_lora
    from remnant.train.relearn import RelearnSpec

    settings = ctx.spec.perturbations.relearn
    forget = tuple(removal_data(ctx.pack, ctx.attributes).forget)
    spec = RelearnSpec(
        budgets=(len(forget),),
        lr=settings.lr,
        epochs=settings.epochs,
        checkpoint_epochs=(),
        seed=settings.seed,
        batch_size=settings.batch_size,
        grad_accum=settings.grad_accum,
        trainable=tuple(settings.trainable) if settings.trainable else None,
    )
    # the whole forget set once, in its order: one budget of the one relearning procedure (C-W1)
    plan = RelearnPlan(RELEARN, spec, forget, tuple(range(len(forget))), utility_at_end=False)
    state = StateView(RELEARN, "", model, ctx.tokenizer())
    outcome, copy = plan.relearn(
        state, len(forget), ctx.fmt(), label="relearn", progress=False, on_checkpoint=lambda m, p: {}
    )
    if outcome.diverged:
        yield None, f"relearning diverged at step {outcome.diverged_step}: {outcome.reason}"
        return
    copy = merge_lora(copy)
    copy.eval()
    yield copy, None
    del copy


def _runtime(ctx: WorkerContext, with_refs: bool) -> Runtime:
    from remnant.models.zoo import remnant_home

    # this node's cache (content-addressed, atomic writes): a task never writes the driver's sweep folder
    rt = Runtime(
        tokenizer=ctx.tokenizer(), fmt=ctx.fmt(), cache_dir=remnant_home() / "cache" / "uds", keep=ctx.kept
    )
    if with_refs:
        rt.full = ctx.load_model(ctx.pool.model(ctx.pool.references["full"]))
        rt.retain = ctx.load_model(ctx.pool.model(ctx.pool.references["retain"]))
    return rt


def _runner(ws: Workspace) -> tuple[CellRunner, MemoryStore]:
    """The task's cell runner: its records stay in memory until sent to the driver, the one writer."""
    store = MemoryStore()
    return CellRunner(store, ws.run_id, before_cell=partial(inject_fault, ws)), store


def _run_cell(
    runner: CellRunner, store: MemoryStore, cell: PlannedCell, live: PoolMeasurement, state: StateView
) -> CellOutput:
    """One cell through the runner, under the key the driver planned for it (resume depends on their agreeing)."""
    run_measurement(runner, live, state, role=cell.perturbation, planned=cell.key)
    return CellOutput(cell.key, live.label(cell.perturbation), cell.model, store.take())


def not_run(pm: PoolMeasurement, status: str, reason: str) -> PoolMeasurement:
    """``pm`` as a cell that cannot be measured on its model (its build failed or diverged, its relearned copy
    diverged, its task failed): one not-run record under the same key (Annex B.6: an outcome, not a crash)."""
    inner = pm.inner
    why = NotRun(inner.kind, pm.name, pm.surface, cast(Status, status), reason, inner.key_inputs())
    return PoolMeasurement(pm.entry, why, pm.model, pm.perturbation)


def _statuses(
    ctx: WorkerContext,
    cells: list[tuple[PlannedCell, PoolMeasurement]],
    pack_digest: str,
    status: str,
    reason: str,
) -> Iterator[CellOutput]:
    """The cells of a model that cannot be measured, each through :func:`not_run`."""
    runner, store = _runner(ctx.ws)
    for cell, pm in cells:
        state = StateView(cell.perturbation, _digest(ctx, cell, pack_digest))
        yield _run_cell(runner, store, cell, not_run(pm, status, reason), state)


def _digest(ctx: WorkerContext, cell: PlannedCell, pack_digest: str) -> str:
    return perturbed_digest(ctx.spec, ctx.pool.model(cell.model), cell.perturbation, pack_digest)


def _own_status(ctx: WorkerContext, model_id: str, build: BuildResult) -> tuple[str, str] | None:
    """(status, reason) when the model cannot be measured: its build failed or diverged."""
    if build.status == "failed":
        return "failed", build.error or "the build failed"
    if build.models.get(model_id, "ok") != "ok":
        model = ctx.pool.model(model_id)
        meta = ctx.store.meta(model.state)
        return meta.status, meta.reason or "the build did not finish"
    return None


def measure_model(
    ws: Workspace, model_id: str, done: frozenset[str]
) -> Iterator[BuildResult | CellOutput | TaskDone]:
    """The task (module docstring): yields build results, then each pending cell of ``model_id``, then its end."""
    import time

    start = time.perf_counter()
    yield from _task(ws, model_id, done)
    yield TaskDone(model_id, time.perf_counter() - start)


def _task(ws: Workspace, model_id: str, done: frozenset[str]) -> Iterator[BuildResult | CellOutput]:
    from remnant.sweep.prepare import TOFU_DIR

    ctx = ws.open()
    ctx.apply_threads()
    model = ctx.pool.model(model_id)
    data = suite_data(
        ctx.pack, ctx.attributes, ctx.spec.pack.system_prompt, ctx.root / TOFU_DIR, ctx.spec.suite.max_items
    )
    refs = reference_states(ctx.pool) if ctx.spec.suite.audits else {}
    plain = suite_measurements(ctx.spec.suite, data, refs, ctx.dtype)
    pending = [
        (c, pm) for c, pm in model_cells(ctx.spec, model, plain, data.pack_digest) if c.key not in done
    ]
    if not pending:
        return
    build = build_job(ctx, model.job)
    yield build
    blocked = _own_status(ctx, model_id, build)
    if blocked is None and refs:
        for ref in sorted(set(ctx.pool.references.values())):
            ref_build = build_job(ctx, ctx.pool.model(ref).job)
            yield ref_build
            if _own_status(ctx, ref, ref_build) is not None:
                blocked = ("failed", f"the audits' reference {ref} could not be built")
    if blocked is not None:
        yield from _statuses(ctx, pending, data.pack_digest, *blocked)
        return
    yield from _measure(ctx, model_id, data, refs, pending)


def _expect_metrics(
    measurements: Mapping[str, Measurement], cells: list[tuple[PlannedCell, PoolMeasurement]]
) -> None:
    """Tell each metric suite which of its metrics are pending on this state: those read its one shared pass
    (over the whole suite), and the state is let go once they have."""
    from remnant.metrics.measurement import MetricMeasurement

    metric_cells = [m for c, _ in cells if isinstance(m := measurements[c.entry], MetricMeasurement)]
    for suite in {id(m.suite): m.suite for m in metric_cells}.values():
        suite.expect(m.metric for m in metric_cells if m.suite is suite)


def _measure(
    ctx: WorkerContext,
    model_id: str,
    data: SuiteData,
    refs: dict[str, str],
    pending: list[tuple[PlannedCell, PoolMeasurement]],
) -> Iterator[CellOutput]:
    runtime = _runtime(ctx, bool(refs))
    # perturbations change the weights: a copy, not the worker's shared one
    weights = deepcopy(ctx.load_model(ctx.pool.model(model_id)))
    measurements = dict(suite_measurements(ctx.spec.suite, data, refs, ctx.dtype, runtime))
    runner, store = _runner(ctx.ws)
    for perturbation in dict.fromkeys(c.perturbation for c, _ in pending):
        cells = [(c, pm) for c, pm in pending if c.perturbation == perturbation]
        with perturbed(ctx, weights, perturbation) as (state_model, reason):
            if state_model is None:
                yield from _statuses(ctx, cells, data.pack_digest, "diverged", str(reason))
                continue
            digest = _digest(ctx, cells[0][0], data.pack_digest)
            state = StateView(perturbation, digest, state_model, runtime.tokenizer)
            _expect_metrics(measurements, cells)
            for cell, _pm in cells:
                live = PoolMeasurement(cell.entry, measurements[cell.entry], model_id, perturbation)
                yield _run_cell(runner, store, cell, live, state)


__all__ = ["CellOutput", "TaskDone", "inject_fault", "measure_model", "not_run", "perturbed"]
