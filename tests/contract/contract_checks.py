"""The contract's checks on one case (test_contract_measurements.py runs them over every case; the examples of
docs/extending.md run them on the components they add, to show what a new component gets for free)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from contract_cases import Case, FirstRuns, World

from remnant.engine.measurement import Measurement, cell_key_of, run_measurement
from remnant.engine.runner import CellRunner
from remnant.records import CellRecord, Observation, Reading, RecordStore, parse_record
from remnant.standard.vocabulary import STATUSES

RUN_ID = "contract"


class Killed(Exception):
    """Raised from ``before_cell``: the run is killed before the cell computes."""


def state_of(case: Case, world: World) -> Any:
    return world.state if case.reads_state else None


def first_run(case: Case, world: World, first_runs: FirstRuns, tmp: Path) -> tuple[Path, list[CellRecord]]:
    """The case's measurement run once on a fresh store, shared by the checks (the model work is the cost)."""
    if case.id not in first_runs.done:
        path = tmp / "records.jsonl"
        runner = CellRunner(RecordStore(path), RUN_ID)
        cells = run_measurement(runner, case.build(world, None), state_of(case, world))
        assert (runner.computed, runner.reused) == (1, 0)
        first_runs.done[case.id] = (path, cells)
    path, cells = first_runs.done[case.id]
    return Path(path), list(cells)


def record_names(measurement: Measurement) -> set[str]:
    """The names a measurement's records may carry: its own, or each name it writes under (the battery)."""
    names = getattr(measurement, "names", None)
    if names is not None and not isinstance(names, str):
        return {measurement.name, *names}
    return {measurement.name}


def _name(record: Any) -> str:
    return str(record.measurement if isinstance(record, Reading) else record.attack)


def comparable(records: list[Any]) -> list[dict[str, Any]]:
    """Records as JSON without their wall-clock seconds (the only field two identical runs may differ in)."""
    return [r.model_dump(mode="json", exclude={"elapsed_s"}) for r in records]


def check_records(case: Case, world: World, path: Path, cells: list[CellRecord]) -> None:
    """(a) Every record validates and round-trips, carries the cell's key, run, state, name and surface; cell
    records count 0 <= k <= n with a status and, when not run, a reason (R19); the smoke statuses are the case's."""
    measurement = case.build(world, None)
    read = RecordStore(path).read()
    records = [r for r in read if isinstance(r, Observation | CellRecord | Reading)]
    assert records and records == read  # a cell writes observations, cell records or readings only
    key = cell_key_of(measurement, state_of(case, world))
    role = world.state.role if case.reads_state else "post_removal"
    assert cells == [r for r in records if isinstance(r, CellRecord)]
    for record in records:
        assert parse_record(json.loads(record.model_dump_json())) == record  # validates, round-trips
        assert record.run_id == RUN_ID and record.cell_key == key and record.model_state == role
        assert _name(record) in record_names(measurement), _name(record)
        assert record.surface in {measurement.surface, *case.extra_surfaces}, record.surface
    for cell in cells:
        assert cell.status in STATUSES and 0 <= cell.k <= cell.n
        if cell.status == "run":
            assert cell.n >= 1 and cell.reason is None
        else:
            assert cell.k == cell.n == 0 and cell.reason
    # a cell ends in status-bearing records: cell records, or an audit's readings (C-H6: no cell record)
    ends: list[CellRecord | Reading] = [*cells] or [r for r in records if isinstance(r, Reading)]
    assert ends and {r.status for r in ends} == case.statuses
    scored = [(o.attack, o.checkpoint, o.item_id) for o in records if isinstance(o, Observation)]
    assert len(scored) == len(set(scored)), "an item is scored twice at one checkpoint of one cell"


def check_identical_key(case: Case, world: World) -> None:
    """(b) Two measurements built from identical inputs have one key; the state's weights digest and role are in
    it (a status-only measurement reads no state and has no roles)."""
    state = state_of(case, world)
    first, second = case.build(world, None), case.build(world, None)
    assert first is not second and cell_key_of(first, state) == cell_key_of(second, state)
    if state is None:
        assert first.roles() == ()
        return
    key = cell_key_of(first, state)
    assert cell_key_of(first, replace(state, digest="f" * 64)) != key
    assert cell_key_of(first, replace(state, role="control")) != key


def check_variant(case: Case, world: World, variant: str) -> None:
    """(b) Changing the one input ``variant`` names changes the key."""
    state = state_of(case, world)
    changed, base = case.build(world, variant), case.build(world, None)
    assert cell_key_of(changed, state) != cell_key_of(base, state), f"{variant} is not in the key"


def check_resume(case: Case, world: World, path: Path, cells: list[CellRecord], tmp: Path) -> None:
    """(c) A second run on the same store computes nothing and appends nothing; a run killed before the cell
    writes nothing of it, and resuming writes the records the uninterrupted run wrote."""
    state = state_of(case, world)
    written = RecordStore(path).read()
    again = CellRunner(RecordStore(path), RUN_ID)
    assert run_measurement(again, case.build(world, None), state) == cells
    assert (again.computed, again.reused) == (0, 1)
    assert RecordStore(path).read() == written

    def kill(label: str) -> None:
        raise Killed(label)

    cut = tmp / "interrupted.jsonl"
    killed = CellRunner(RecordStore(cut), RUN_ID, before_cell=kill)
    try:
        run_measurement(killed, case.build(world, None), state)
    except Killed:
        pass
    else:
        raise AssertionError("before_cell was not called before the cell computed")
    assert RecordStore(cut).read() == []
    resumed = CellRunner(RecordStore(cut), RUN_ID)
    run_measurement(resumed, case.build(world, None), state)
    assert (resumed.computed, resumed.reused) == (1, 0)
    assert comparable(RecordStore(cut).read()) == comparable(written)


__all__ = [
    "RUN_ID",
    "Killed",
    "check_identical_key",
    "check_records",
    "check_resume",
    "check_variant",
    "comparable",
    "first_run",
    "record_names",
    "state_of",
]
