"""Run records: versioned entry models and an append-only JSONL store (DESIGN §1, R15, R22, R23).

Every line of ``RUN/records.jsonl`` (and ``RUN/deviations.jsonl``) is one entry, written as canonical JSON
(RFC 8785, so the same run gives the same bytes) and carrying ``entry_type`` and ``schema_version``::

    {"entry_type":"cell","schema_version":1,"attack":"prefill",...}

Entry types: ``observation`` (one scored item), ``cell`` (a completed cell, for ``--resume``), ``event`` (stage
started/finished, diverged, deviation adopted) and ``deviation`` (R15). Writes append whole lines in one call,
then flush and fsync, so a crash leaves at most one torn line at the end. :meth:`RecordStore.read` reports such
a line with its number; :meth:`RecordStore.repair` moves it to a ``.torn`` side file (never silently dropped) and
the cell it belonged to is simply re-run. Old schema versions are upgraded on read through :data:`MIGRATIONS`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from remnant.atomic import fsync_dir
from remnant.errors import RecordError
from remnant.jsonio import loads_strict
from remnant.statement.canonical import canonical_json

RECORDS_FILE = "records.jsonl"
DEVIATIONS_FILE = "deviations.jsonl"

#: Current schema version of each entry type; an entry written at an older version is upgraded on read.
SCHEMA_VERSIONS: dict[str, int] = {"observation": 2, "cell": 1, "event": 1, "deviation": 1}

#: A model state: the three the Standard names, or another named state (e.g. "shuffled_twin", "retrained").
StateName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")]


def utc_now() -> str:
    """The current UTC time as ISO 8601 with a ``Z`` suffix, to the second (R14 timestamps)."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def cell_key(**inputs: Any) -> str:
    """Content hash of a cell's inputs: hex sha256 of their canonical JSON (same inputs, same key; --resume)."""
    return hashlib.sha256(canonical_json(inputs)).hexdigest()


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Observation(_Entry):
    """One scored item on one model state under one attack at one checkpoint (R3, R6)."""

    entry_type: Literal["observation"] = Field(default="observation", description="Entry type tag.")
    schema_version: Literal[2] = Field(default=2, description="Schema version of this entry type.")
    run_id: str = Field(description="Run the observation belongs to.")
    cell_key: str = Field(description="Key of the cell this item is scored in.")
    model_state: StateName = Field(
        description="Model state: control, pre_removal, post_removal or another (R3)."
    )
    attack: str = Field(description="Registered attack name, or 'none' for an unattacked measurement.")
    surface: str = Field(
        description="Surface: relearning, inference_time, weight_transform, latent or utility."
    )
    item_id: str = Field(description="Pack item id scored.")
    checkpoint: str = Field(description="Checkpoint label, e.g. 'final' or 'budget=16/step=3' (C-W3).")
    kappa: bool | None = Field(default=None, description="Functional capability: output correct (R6).")
    willing: bool | None = Field(default=None, description="Willingness: output not a refusal (R6).")
    score: float | None = Field(
        default=None, allow_inf_nan=False, description="Graded score, when the metric has one."
    )
    output_excerpt: str = Field(
        default="", description="Start of the model output (redacted in customer reports, R18)."
    )
    seed: int = Field(description="Seed the observation was generated under (R23).")


CellStatus = Literal["run", "not_applicable", "not_run", "failed", "diverged"]


class CellRecord(_Entry):
    """A completed cell: k successes of n on one metric, state, attack and checkpoint (R19, R22)."""

    entry_type: Literal["cell"] = Field(default="cell", description="Entry type tag.")
    schema_version: Literal[1] = Field(default=1, description="Schema version of this entry type.")
    run_id: str = Field(description="Run the cell belongs to.")
    cell_key: str = Field(description="Content hash of the cell's inputs (cell_key()); --resume skips it.")
    attack: str = Field(description="Registered attack name, or 'none'.")
    surface: str = Field(
        description="Surface: relearning, inference_time, weight_transform, latent or utility."
    )
    model_state: StateName = Field(description="Model state measured (R3).")
    metric: str = Field(description="Metric counted: kappa, w, utility or a Class D rate (R6).")
    k: int = Field(ge=0, description="Successes counted.")
    n: int = Field(ge=0, description="Items scored (R19).")
    checkpoint: str = Field(description="Checkpoint label, e.g. 'final' or 'budget=16/step=3' (C-W3).")
    params: dict[str, Any] = Field(default_factory=dict, description="Exact parameters of the attack (R23).")
    elapsed_s: float = Field(ge=0, allow_inf_nan=False, description="Wall-clock seconds the cell took.")
    status: CellStatus = Field(
        default="run", description="run, not_applicable (C-Q2), not_run, failed, diverged."
    )
    reason: str | None = Field(default=None, description="Why the cell did not run, failed or diverged.")

    @model_validator(mode="after")
    def _counts(self) -> CellRecord:
        if self.k > self.n:
            raise ValueError(f"k ({self.k}) exceeds n ({self.n})")
        if self.status == "run" and self.n == 0:
            raise ValueError("a cell that ran scored n >= 1 items (R19)")
        return self


EventKind = Literal["stage_started", "stage_finished", "diverged", "deviation", "resumed", "note"]


class Event(_Entry):
    """Something that happened to the run: a stage began or ended, training diverged, a deviation was adopted."""

    entry_type: Literal["event"] = Field(default="event", description="Entry type tag.")
    schema_version: Literal[1] = Field(default=1, description="Schema version of this entry type.")
    run_id: str = Field(description="Run the event belongs to.")
    stage: str = Field(description="Stage name, e.g. 'install', 'removal', 'relearning'.")
    kind: EventKind = Field(description="What happened.")
    message: str = Field(default="", description="Human-readable detail.")
    at: str = Field(default_factory=utc_now, description="UTC timestamp (ISO 8601, Z).")
    data: dict[str, Any] = Field(default_factory=dict, description="Structured detail (e.g. step, loss).")


class Deviation(_Entry):
    """A change to a pre-registered field, with its reason and the stage it was adopted at (R15)."""

    entry_type: Literal["deviation"] = Field(default="deviation", description="Entry type tag.")
    schema_version: Literal[1] = Field(default=1, description="Schema version of this entry type.")
    field: str = Field(min_length=1, description="Dotted pre-registered field changed (R15).")
    old: Any = Field(description="Its frozen value (R15).")
    new: Any = Field(description="The value used instead (R15).")
    reason: str = Field(min_length=1, description="Why it changed (R15).")
    stage: str = Field(min_length=1, description="Stage at which the change was adopted (R15).")
    recorded_at: str = Field(default_factory=utc_now, description="UTC timestamp of the record (R15).")


Record = Annotated[Observation | CellRecord | Event | Deviation, Field(discriminator="entry_type")]
_RECORD_TYPES = (Observation, CellRecord, Event, Deviation)
_RECORD: TypeAdapter[Observation | CellRecord | Event | Deviation] = TypeAdapter(Record)


def _observation_v1_to_v2(entry: dict[str, Any]) -> dict[str, Any]:
    """v1 (pre-release) named the state ``state`` and the excerpt ``excerpt``."""
    out = {k: v for k, v in entry.items() if k not in ("state", "excerpt")}
    out["model_state"] = entry.get("state")
    out["output_excerpt"] = entry.get("excerpt", "")
    out["schema_version"] = 2
    return out


#: (entry_type, version) → function upgrading an entry of that version to the next one.
MIGRATIONS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {
    ("observation", 1): _observation_v1_to_v2,
}


def upgrade(entry: dict[str, Any]) -> dict[str, Any]:
    """Bring one raw entry to its current schema version through :data:`MIGRATIONS` (RecordError if impossible)."""
    etype = entry.get("entry_type")
    if etype not in SCHEMA_VERSIONS:
        raise RecordError(f"unknown entry_type {etype!r} (known: {', '.join(sorted(SCHEMA_VERSIONS))})")
    version = entry.get("schema_version")
    current = SCHEMA_VERSIONS[str(etype)]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise RecordError(f"{etype} entry has no valid schema_version ({version!r})")
    if version > current:
        raise RecordError(f"{etype} schema_version {version} is newer than this remnant reads ({current})")
    while version < current:
        step = MIGRATIONS.get((str(etype), version))
        if step is None:
            raise RecordError(f"no migration for {etype} schema_version {version}")
        entry = step(entry)
        version = int(entry["schema_version"])
    return entry


def parse_record(entry: dict[str, Any]) -> Observation | CellRecord | Event | Deviation:
    """Validate one raw entry (upgrading it first); RecordError names the offending field."""
    try:
        return _RECORD.validate_python(upgrade(entry))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:]) or "(entry)"
        raise RecordError(f"{entry.get('entry_type')} entry: field '{where}': {first['msg']}") from None


def record_line(record: BaseModel) -> bytes:
    """One record as its canonical JSON line, newline-terminated (the bytes the store appends)."""
    return canonical_json(record.model_dump(mode="json")) + b"\n"


@dataclass(frozen=True)
class TornTail:
    """What :meth:`RecordStore.repair` moved aside: the line it started at and where it now lies."""

    line: int
    nbytes: int
    side_file: Path


class RecordStore:
    """An append-only JSONL file of records. Appends are whole lines, flushed and fsync'd; nothing is rewritten.

    ``repair()`` is the only operation that shortens the file, and only by moving a torn tail to the side file.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @property
    def side_file(self) -> Path:
        """Where torn tails are kept: ``records.jsonl.torn`` beside the store."""
        return self.path.with_name(self.path.name + ".torn")

    def append(self, record: BaseModel) -> None:
        """Append one record atomically (one write, flush, fsync)."""
        self.extend([record])

    def extend(self, records: Iterable[BaseModel]) -> None:
        """Append records in one write, then flush and fsync; refuses to append after a torn line."""
        lines: list[bytes] = []
        for record in records:
            if not isinstance(record, _RECORD_TYPES):
                raise RecordError(f"{self.path}: cannot append a {type(record).__name__}: not a record type")
            lines.append(record_line(record))
        payload = b"".join(lines)
        if not payload:
            return
        created = not self.path.exists()
        if not created:
            self._refuse_torn_tail()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        if created:
            fsync_dir(self.path.parent)

    def _refuse_torn_tail(self) -> None:
        with open(self.path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            if handle.tell() == 0:
                return
            handle.seek(-1, os.SEEK_END)
            last = handle.read(1)
        if last != b"\n":
            raise RecordError(
                f"{self.path}: the last line is torn (no trailing newline); call repair() before appending, "
                "and re-run the last cell"
            )

    def read(self) -> list[Observation | CellRecord | Event | Deviation]:
        """Every record in file order, upgraded to current schema versions; RecordError on a torn or bad line."""
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        lines = data.split(b"\n")
        complete, tail = lines[:-1], lines[-1]
        out: list[Observation | CellRecord | Event | Deviation] = []
        for number, raw in enumerate(complete, start=1):
            try:
                out.append(self._parse(raw, number))
            except RecordError as exc:
                if number == len(complete) and not tail:
                    raise self._torn(number, str(exc)) from None
                raise
        if tail:
            raise self._torn(len(complete) + 1, "no trailing newline: the write was cut short")
        return out

    def _parse(self, raw: bytes, number: int) -> Observation | CellRecord | Event | Deviation:
        entry = loads_strict(raw, source=f"{self.path}: line {number}", error=RecordError)
        if not isinstance(entry, dict):
            raise RecordError(f"{self.path}: line {number} is not a JSON object")
        try:
            return parse_record(entry)
        except RecordError as exc:
            raise RecordError(f"{self.path}: line {number}: {exc}") from None

    def _torn(self, number: int, why: str) -> RecordError:
        return RecordError(
            f"{self.path}: line {number} (the last) is torn: {why}. The cell it belonged to must be re-run; "
            f"RecordStore.repair() (or `remnant assess --resume`) moves the torn line to {self.side_file.name}"
        )

    def repair(self) -> TornTail | None:
        """Move a torn last line into the side file and truncate it off; None when the tail is sound.

        The side file gets the torn bytes and a newline, and is fsync'd before the store is shortened, so the
        bytes exist somewhere at every moment. A bad line that is not the last is not a crash artefact: that is
        reported (RecordError), not repaired.
        """
        if not self.path.exists():
            return None
        data = self.path.read_bytes()
        if not data:
            return None
        if data.endswith(b"\n"):
            start = data.rfind(b"\n", 0, len(data) - 1) + 1
            number = data.count(b"\n")
            try:
                self._parse(data[start:-1], number)
                return None
            except RecordError:
                pass
        else:
            start = data.rfind(b"\n") + 1
            number = data.count(b"\n") + 1
        torn = data[start:]
        with open(self.side_file, "ab") as side:
            side.write(torn if torn.endswith(b"\n") else torn + b"\n")
            side.flush()
            os.fsync(side.fileno())
        with open(self.path, "r+b") as handle:
            handle.truncate(start)
            handle.flush()
            os.fsync(handle.fileno())
        self.read()  # what remains must read cleanly, or the damage was not a torn tail
        return TornTail(line=number, nbytes=len(torn), side_file=self.side_file)

    def completed_cells(self) -> set[str]:
        """Keys of every cell recorded (including diverged and failed ones), for ``--resume``."""
        return {r.cell_key for r in self.read() if isinstance(r, CellRecord)}


__all__ = [
    "DEVIATIONS_FILE",
    "MIGRATIONS",
    "RECORDS_FILE",
    "SCHEMA_VERSIONS",
    "CellRecord",
    "Deviation",
    "Event",
    "Observation",
    "Record",
    "RecordStore",
    "TornTail",
    "cell_key",
    "parse_record",
    "record_line",
    "upgrade",
    "utc_now",
]
