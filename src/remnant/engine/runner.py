"""The one cell runner: every measurement's cells run at most once per run, through one record store.

:class:`CellRunner` skips a cell whose key the run's records already hold (``--resume``: a crash costs at most the
cell in flight), imports one a :class:`CellCache` shared between runs holds (the demo's three assessments share
one control), and computes the rest, appending each cell's records in one write (``RecordStore.extend``), so a
cell is recorded whole or, after a crash, re-run whole (:meth:`remnant.records.RecordStore.repair`). Its store
is a run's :class:`~remnant.records.RecordStore` or, in a sweep worker, a :class:`MemoryStore` whose records
the worker sends to the driver, the one writer of the sweep's store.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from remnant.atomic import write_atomic
from remnant.records import AnyRecord, CellRecord, Observation, Reading, RecordStore, chained_lines

#: What a cell writes: observations and cell records, or (a white-box audit, C-H6) readings.
Record = Observation | CellRecord | Reading


class CellStore(Protocol):
    """Where a runner's records go: what it holds already (read) and one cell's records in one write (extend)."""

    def read(self) -> list[AnyRecord]: ...

    def extend(self, records: Sequence[AnyRecord]) -> None: ...


class MemoryStore:
    """Records held in memory: a sweep worker's cells, which the driver appends to the one store (:meth:`take`)."""

    def __init__(self) -> None:
        self._records: list[AnyRecord] = []

    def read(self) -> list[AnyRecord]:
        return list(self._records)

    def extend(self, records: Sequence[AnyRecord]) -> None:
        self._records.extend(records)

    def take(self) -> tuple[AnyRecord, ...]:
        """The records held, handed over and forgotten (the worker keeps no cell it has sent)."""
        out, self._records = tuple(self._records), []
        return out


class CellCache:
    """Records of computed cells by key, shared between runs (``DIR/<key>.jsonl``)."""

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)

    def get(self, key: str) -> list[AnyRecord] | None:
        path = self.dir / f"{key}.jsonl"
        return RecordStore(path).read() if path.is_file() else None

    def put(self, key: str, records: Sequence[AnyRecord]) -> None:
        write_atomic(self.dir / f"{key}.jsonl", b"".join(chained_lines(records)))


@dataclass
class CellRunner:
    """Runs cells at most once per run: skips completed keys, imports cached ones, computes the rest.

    ``before_cell(label)`` is called before a cell is computed (a test raises there, or a sweep's fault seam
    ends the worker, to simulate a kill).
    ``redo(records)``, when given, marks a recorded cell to compute again (a sweep's ``--retry-failed``): it sees
    every record of the cell, cell records and an audit cell's readings alike; the old records stay in the
    append-only store and the new ones follow them.
    """

    store: CellStore
    run_id: str
    cache: CellCache | None = None
    before_cell: Callable[[str], None] | None = None
    progress: Callable[[str], None] | None = None
    redo: Callable[[list[CellRecord | Reading]], bool] | None = None
    _done: dict[str, list[CellRecord]] = field(default_factory=dict)
    computed: int = 0
    reused: int = 0

    def __post_init__(self) -> None:
        recorded: dict[str, list[CellRecord | Reading]] = {}
        for record in self.store.read():
            # an audit cell writes readings and no cell record (C-H6): its readings say whether it ran
            if isinstance(record, CellRecord | Reading):
                recorded.setdefault(record.cell_key, []).append(record)
        for key, records in recorded.items():
            if self.redo is None or not self.redo(records):
                self._done[key] = [r for r in records if isinstance(r, CellRecord)]

    def recorded(self) -> set[str]:
        """Keys this runner will not compute again (recorded in the store, less those ``redo`` marks)."""
        return set(self._done)

    def run(self, key: str, label: str, compute: Callable[[], list[Record]]) -> list[CellRecord]:
        """The cell records of ``key``: from this run, from the shared cache, or computed now."""
        if key in self._done:
            self.reused += 1
            return self._done[key]
        cached = self.cache.get(key) if self.cache is not None else None
        records: Sequence[AnyRecord]
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


__all__ = ["CellCache", "CellRunner", "CellStore", "MemoryStore", "Record"]
