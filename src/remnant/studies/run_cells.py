"""A model-side study's runs through the one cell runner: one (model, method, seed) run is one engine cell.

The readmission study reads an estimator on every run of the latent-probe design (Annex B.2-B.4). Each run is a
:class:`RunMeasurement` run by :func:`remnant.engine.measurement.run_measurement` through a
:class:`~remnant.engine.runner.CellRunner`, like an assessment's white-box audit, and it writes what an audit
writes: :class:`~remnant.records.Reading` records, never a cell record (C-H6: a reading never adjudicates). One
reading per state and cell — the post-removal model, the procedure control (C-H3a) and the content control
(C-H3b) at one (layer, position, setting) — and one ``run`` reading with the run's gates and relearning recovery.

The cell key hashes the study, the estimator and its parameters, the design as it applies to the run (not the
lists of models, seeds and methods), the model as named and its never-modified weights digest, the pack's digest,
the method and the seed: everything that determines the run's states and figures, known before any state is
trained. A rerun into the same folder therefore skips every recorded run without training its states, and a run
killed mid-way costs only the run in flight (R23). The study's cells (``readmission-cells.json``) are rebuilt
from the records alone (:func:`cells_from_readings`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, TypeVar

from remnant.engine.cell import CellTarget
from remnant.engine.measurement import Measurement, Record, State, StateView
from remnant.errors import RecordError
from remnant.records import Reading as Figure
from remnant.studies.readmission import Cell, Reading, RunOutcome

if TYPE_CHECKING:
    from remnant.states.store import CheckpointStore
    from remnant.studies.latent_probe import LatentProbeConfig
    from remnant.studies.latent_probe_states import PlannedRun, RunStates

#: The version of the run cell's readings: a change to what a run records is a new version (and new keys).
VERSION = "1.0"
#: The states a cell's readings name (C-H7c), the post-removal model first, and the state each one reads.
STATES = {"removed": "post_removal", "procedure": "procedure_control", "content": "content_control"}
T = TypeVar("T")
#: The role of the reading that carries the run's gates and recovery.
RUN = "run"


@dataclass(frozen=True)
class Estimated:
    """What an estimator read on one run: its cells and, for a study that keeps more per run than its cells (the
    latent-probe study's κ and direction result), that result as JSON text (recorded verbatim)."""

    cells: list[Cell]
    result: str | None = None


#: The estimator on one run: (its states, its gates) -> what it read.
Estimate = Callable[["RunStates", dict[str, bool]], Estimated]


class _StudyCell(Measurement):
    """What every study cell shares: kind ``study``, read on the post-removal model of one run, written as
    readings of ``study`` under ``component`` (never cell records, C-H6)."""

    kind: ClassVar[str] = "study"
    surface = "latent"
    study: str
    component: dict[str, object]

    def roles(self) -> tuple[str, ...]:
        return ("post_removal",)

    def _figure(self, target: CellTarget, role: str, **fields: object) -> Figure:
        state = STATES.get(role, "post_removal")
        return Figure(
            run_id=target.run_id,
            cell_key=target.key,
            measurement=self.name,
            audit=self.study,
            component=self.component,
            model_state=state,
            role=role,
            states=[state, "installed", "control"],
            reference="control",
            **fields,
        )

    def _run_figure(
        self, target: CellTarget, value: float | None, details: dict[str, object], why: str
    ) -> Figure:
        """The ``run`` reading: the run's headline figure (``why`` there is none) and what it recorded."""
        figure = _finite(value)
        reason = None if figure is not None else why
        return self._figure(
            target, RUN, layer="-", position="-", value=figure, details=details, reason=reason
        )


class RunMeasurement(_StudyCell):
    """One study run (module docstring): builds the run's states only when its cell is not recorded."""

    def __init__(
        self,
        study: str,
        estimator: str,
        params: dict[str, object],
        design: LatentProbeConfig,
        run: PlannedRun,
        estimate: Estimate,
    ) -> None:
        self.study, self.estimator, self.params, self.design = study, estimator, params, design
        self.run, self.model, self.method, self.seed = run, run.model, run.method, run.seed
        self.name = f"{study}.{estimator}"
        self.component = {"name": estimator, "version": VERSION, "params": params}
        self._estimate = estimate

    def key_inputs(self) -> dict[str, object]:
        return {
            "study": self.study,
            "estimator": self.estimator,
            "version": VERSION,
            "params": self.params,
            "design": self._run_design(),
            "model": self.model,
            "pack": self.run.pack,
            "method": self.method,
            "seed": self.seed,
        }

    def label(self, role: str) -> str:
        return f"{self.name}: {self.model} {self.method} seed {self.seed}"

    def _run_design(self) -> dict[str, object]:
        """The design as it applies to this run: without the lists of models, seeds and methods (a study that
        adds a seed or a method keeps the keys of the runs it had) and with this method's parameters only."""
        design = self.design.model_dump(mode="json", exclude={"models", "seeds", "methods", "per_model"})
        design["method_params"] = {self.method: design["method_params"].get(self.method, {})}
        return design

    def measure(self, state: State | None, target: CellTarget) -> list[Record]:
        run = self.run.states()
        gates = run.gates(self.design)
        read = self._estimate(run, gates)
        outcome = RunOutcome(
            model=self.model, method=self.method, seed=self.seed, gates=gates, recovery=run.recovery
        )
        # as JSON text: records are canonical JSON (keys sorted), and the gates keep their declared order
        details: dict[str, object] = {"run": outcome.model_dump_json()}
        if read.result is not None:
            details["result"] = read.result
        figure = self._run_figure(target, outcome.recovery, details, "no removed gap: recovery undefined")
        return [figure, *(r for c in read.cells for r in self._readings(target, c))]

    def _readings(self, target: CellTarget, cell: Cell) -> list[Figure]:
        """The cell's three readings; the post-removal one carries what the cell says beyond its figures."""
        meta = cell.model_dump(mode="json", exclude={"removed", "procedure", "content"})
        out = []
        for role, reading in (
            ("removed", cell.removed),
            ("procedure", cell.procedure),
            ("content", cell.content),
        ):
            value = reading.value if isinstance(reading, Reading) else reading
            interval = reading.ci95 if isinstance(reading, Reading) else None
            out.append(
                self._figure(
                    target,
                    role,
                    layer=str(cell.layer),
                    position=cell.position,
                    value=_finite(value),
                    interval=interval if interval is not None and all(map(math.isfinite, interval)) else None,
                    details={"cell": meta} if role == "removed" else {},
                    reason=None if value is not None else cell.note or "no figure on these inputs",
                )
            )
        return out


class RowMeasurement(_StudyCell):
    """One run of a study whose result is a row, not cells (the Goodhart arm's (λ, seed) removal): one ``run``
    reading with the row as JSON text (recorded verbatim) and its headline figure as the value. ``key`` is every
    input that determines the row; ``row()`` computes it (building what it needs) only when the cell is not
    recorded."""

    def __init__(
        self,
        study: str,
        component: dict[str, object],
        key: dict[str, object],
        label: str,
        row: Callable[[], tuple[float | None, str]],
    ) -> None:
        self.study, self.component, self._key, self._label, self._row = study, component, key, label, row
        self.name = f"{study}.{component['name']}"

    def key_inputs(self) -> dict[str, object]:
        return {"study": self.study, "version": VERSION, "component": self.component, **self._key}

    def label(self, role: str) -> str:
        return f"{self.name}: {self._label}"

    def measure(self, state: State | None, target: CellTarget) -> list[Record]:
        value, text = self._row()
        return [self._run_figure(target, value, {"result": text}, "no figure on this run")]


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


@contextlib.contextmanager
def _refused(source: str, r: Figure) -> Iterator[None]:
    """Reading ``r`` back as hostile input: what this module did not write is refused, naming ``source`` (the
    records file) and the cell, never raised raw."""
    try:
        yield
    except (KeyError, TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        raise RecordError(
            f"{source}: reading {r.role!r} of cell {r.cell_key[:12]}: not what a study run wrote "
            f"({type(exc).__name__}: {exc})",
            requirement="R23",
        ) from None


def cells_from_readings(readings: Iterable[Figure], source: str) -> tuple[list[Cell], list[RunOutcome]]:
    """The study's cells and runs, rebuilt from its readings in record order (module docstring)."""
    cells: list[Cell] = []
    runs: list[RunOutcome] = []
    pending: dict[str, Figure] = {}
    for r in readings:
        with _refused(source, r):
            if r.role == RUN:
                runs.append(RunOutcome.model_validate_json(r.details["run"]))
                continue
            pending[r.role] = r
            if set(pending) == set(STATES):
                cells.append(_cell(pending))
                pending = {}
    if pending:
        raise RecordError(f"{source}: a study cell has readings {sorted(pending)} only", requirement="R23")
    return cells, runs


def run_results(readings: Iterable[Figure], source: str, parse: Callable[[str], T]) -> list[T]:
    """The per-run results a study recorded beside its runs (JSON text: :class:`Estimated`, :class:`RowMeasurement`),
    each read by ``parse``, in record order; a reading without one, or one ``parse`` refuses, is refused with the
    file (``source``) and the cell named (the records are read back as hostile input)."""
    out = []
    for r in (r for r in readings if r.role == RUN):
        with _refused(source, r):
            result = r.details.get("result")
            if not isinstance(result, str):
                raise TypeError("it holds no study result")
            out.append(parse(result))
    return out


def _cell(readings: dict[str, Figure]) -> Cell:
    def control(role: str) -> Reading | None:
        r = readings[role]
        return Reading(value=r.value, ci95=r.interval) if r.value is not None and r.interval else None

    meta = readings["removed"].details["cell"]
    return Cell.model_validate(
        {
            **meta,
            "removed": readings["removed"].value,
            "procedure": control("procedure"),
            "content": control("content"),
        }
    )


def study_runs(
    study: str,
    estimator: str,
    params: dict[str, object],
    design: LatentProbeConfig,
    estimate_for: Callable[[LatentProbeConfig, str], Estimate],
    *,
    log: Callable[[str], None] | None,
    states: CheckpointStore | None,
    progress: bool,
) -> Iterator[tuple[RunMeasurement, StateView]]:
    """Every (model, method, seed) run of ``design`` as a cell on its never-modified model, lazily (a run's
    states are built only if its cell is computed: :func:`remnant.studies.latent_probe_states.planned_runs`);
    ``estimate_for(config as it applies to the model, model)`` is the estimator of that model's runs."""
    from remnant.studies.latent_probe_states import planned_runs

    for model in design.models:
        mcfg = design.for_model(model)
        estimate = estimate_for(mcfg, model)
        for run in planned_runs(model, mcfg, log=log, states=states, progress=progress):
            yield (
                RunMeasurement(study, estimator, params, mcfg, run, estimate),
                StateView("post_removal", run.origin),
            )


@contextlib.contextmanager
def recording(out: Path, study: str) -> Iterator[Path]:
    """The study's folder, locked for this process (the one writer of its records, R23) and marked as remnant's
    first, so a study killed at any point leaves a folder it may resume; yields its records file."""
    from remnant.cli_paths import mark_output
    from remnant.records import RECORDS_FILE
    from remnant.runlock import held

    with held(out, purpose=f"remnant study {study}"):
        mark_output(out, "study")
        yield out / RECORDS_FILE


def record_cells(
    cells: Iterable[tuple[Measurement, StateView]],
    records: Path | None,
    run_id: str,
    log: Callable[[str], None] | None = None,
) -> tuple[list[Figure], str]:
    """Run each (cell, state) through the one cell runner, in order, into ``records`` (a records file, appended
    to; None: memory only); the readings of those cells in that order, and where they were read from. ``cells``
    may be lazy: a run's states are built when its cell is taken, and only when it is not recorded."""
    from remnant.engine.measurement import cell_key_of, run_measurement
    from remnant.engine.runner import CellRunner, CellStore, MemoryStore
    from remnant.records import RecordStore

    store: CellStore = MemoryStore()
    if records is not None:
        RecordStore(records).repair()  # a killed run's torn last write: its run is measured again
        store = RecordStore(records)
    runner = CellRunner(store, run_id, progress=log)
    keys = []
    for cell, state in cells:
        run_measurement(runner, cell, state)
        keys.append(cell_key_of(cell, state))
    by_key: dict[str, list[Figure]] = {}  # each key's readings in record order
    for r in store.read():
        if isinstance(r, Figure):
            by_key.setdefault(r.cell_key, []).append(r)
    return [r for key in keys for r in by_key.get(key, [])], str(records or "memory")


__all__ = [
    "RUN",
    "STATES",
    "VERSION",
    "Estimate",
    "Estimated",
    "RowMeasurement",
    "RunMeasurement",
    "cells_from_readings",
    "record_cells",
    "recording",
    "study_runs",
    "run_results",
]
