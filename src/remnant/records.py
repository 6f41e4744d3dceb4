"""Run records: versioned entry models and an append-only, hash-chained JSONL store (R15, R22, R23).

Every line of ``RUN/records.jsonl`` (and ``RUN/deviations.jsonl``) is one entry, written as canonical JSON
(RFC 8785, so the same run gives the same bytes) and carrying ``entry_type``, ``schema_version`` and ``prev``::

    {"attack":"prefill",...,"entry_type":"cell","prev":"9f2c…","schema_version":3,...}

Entry types: ``observation`` (one scored item), ``cell`` (a completed cell, for ``--resume``), ``event`` (stage
started/finished, diverged, deviation adopted), ``deviation`` (R15) and ``reading`` (one white-box audit figure:
supplementary, never read by the verdict or the tier, C-H6). Writes append whole lines in one call,
then flush and fsync, so a crash leaves at most one torn line at the end. :meth:`RecordStore.read` reports such
a line with its number; :meth:`RecordStore.repair` moves it to a ``.torn`` side file (never silently dropped) and
the cell it belonged to is simply re-run. Old schema versions are upgraded on read through :data:`MIGRATIONS`.

**The chain.** ``prev`` is the sha256 (hex) of the previous line's bytes, newline included; the first line's
``prev`` is :data:`GENESIS` (64 zeros). So the digest of the last line — the *chain head* — commits to every line
before it: editing, inserting, deleting or reordering a line breaks the link of the line after it, and
:meth:`RecordStore.read` raises :class:`RecordIntegrityError` naming that first bad line (R23: the manifest's
per-cell table is only as good as the records it is rebuilt from). What the chain cannot show on its own — the
last line edited, lines cut off the end, or the whole file re-chained — shows against the head that the manifest
and the statement pin (``remnant recompute`` compares them). ``prev`` belongs to the line, not to the record: the
store adds it on write and checks and strips it on read, so a record reads back equal to the one appended, and a
cell copied from a shared cache into another run is chained where it lands.

Lines written before the chain (observation schema_version ≤ 2, the other types 1) carry no ``prev``; they still
read, and :class:`ChainState` counts them (``unchained``), so a run folder written before the chain recomputes to
the same figures and its statement says the records are not chained. A line at a chained schema version without
``prev``, or an unchained line after a chained one, is refused: a chain cannot be stripped line by line.

**Writes.** Each chained line also carries ``rest``, the number of lines after it in the same write (0 on a write's
last line). One cell's observations and records go in one write; a crash in the middle of it can leave complete
lines of that write, and ``rest`` > 0 on the file's last line shows it: :meth:`RecordStore.repair` moves the whole
cut write aside, so the cell is re-run rather than counted done with some of its records missing.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    model_serializer,
    model_validator,
)

from remnant.atomic import append_durable, fsync_dir, truncate_durable
from remnant.errors import IntegrityError, RecordError, RemnantError
from remnant.jsonio import loads_strict
from remnant.standard.derive import label_budget, parse_checkpoint
from remnant.standard.vocabulary import Risk, Status
from remnant.statement.canonical import canonical_json, canonical_sha256

RECORDS_FILE = "records.jsonl"
DEVIATIONS_FILE = "deviations.jsonl"

#: Current schema version of each entry type; an entry written at an older version is upgraded on read.
SCHEMA_VERSIONS: dict[str, int] = {"observation": 3, "cell": 3, "event": 2, "deviation": 2, "reading": 1}

#: The first schema version of each entry type whose lines carry ``prev`` (the chain); older lines predate it.
CHAINED_SINCE: dict[str, int] = {"observation": 3, "cell": 2, "event": 2, "deviation": 2, "reading": 1}

#: ``prev`` of a file's first line: no line comes before it.
GENESIS = "0" * 64

#: On every chained line: how many lines follow it in the same write (0 on a write's last line). A file whose
#: last line still expects more was cut in the middle of a write: that whole write is the torn tail.
BATCH_FIELD = "rest"

#: The requirement a records file that cannot be trusted breaks: the manifest's per-cell table is rebuilt from it.
RECORDS_REQUIREMENT = "R23"


class RecordIntegrityError(RecordError, IntegrityError):
    """Records contradict their chain, their pinned head or themselves: a line was edited, inserted, deleted or
    reordered (R23). A failed check (exit 1), where a :class:`RecordError` alone is unreadable input (exit 2)."""

    def __init__(self, message: str, *, requirement: str | None = RECORDS_REQUIREMENT) -> None:
        super().__init__(message, requirement=requirement)


#: A model state: the three the Standard names, or another named state (e.g. "shuffled_twin", "retrained").
StateName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")]


def utc_now() -> str:
    """The current UTC time as ISO 8601 with a ``Z`` suffix, to the second (R14 timestamps)."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def cell_key(**inputs: object) -> str:
    """Content hash of a cell's inputs: hex sha256 of their canonical JSON (same inputs, same key; --resume)."""
    return canonical_sha256(inputs)


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Observation(_Entry):
    """One scored item on one model state under one attack at one checkpoint (R3, R6)."""

    entry_type: Literal["observation"] = Field(default="observation", description="Entry type tag.")
    schema_version: Literal[3] = Field(default=3, description="Schema version of this entry type.")
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


#: Whose counts a Class D record holds: the target canaries or the never-installed control entities (D4).
Entities = Literal["target", "control"]


class CellRecord(_Entry):
    """A completed cell: k successes of n on one metric, state, attack and checkpoint (R19, R22).

    What it measured beyond its counts is in the typed fields of :data:`CELL_DETAIL_FIELDS` (schema_version 3),
    each null where it does not apply; readers use them, not the ``checkpoint`` label (C-W3). Records written
    before (schema_version ≤ 2) held these in ``params``; :data:`MIGRATIONS` moves them on read.
    """

    entry_type: Literal["cell"] = Field(default="cell", description="Entry type tag.")
    schema_version: Literal[3] = Field(default=3, description="Schema version of this entry type.")
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
    checkpoint: str = Field(
        description="Checkpoint label as statements show it: final, removal_stage or a relearning one (C-W3)."
    )
    budget: int | None = Field(
        default=None, ge=0, description="Relearning budget: examples the curve relearns on (C-W1, C-W3)."
    )
    step: int | None = Field(
        default=None,
        ge=0,
        description="Optimiser step of a relearning checkpoint; null at a curve's end (C-W3).",
    )
    epoch: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="Epochs of relearning done at the checkpoint (C-W3).",
    )
    examples: int | None = Field(
        default=None,
        ge=0,
        description="Relearning examples seen at the checkpoint: round(epoch x budget) (C-W3).",
    )
    risk: Risk | None = Field(
        default=None, description="Class D risk measured: singling_out, linkability or inference (D-2 - D-4)."
    )
    method: str | None = Field(
        default=None, description="Class D method: direct, likelihood or the attack it runs under (D-5.1)."
    )
    baseline: float | None = Field(
        default=None,
        allow_inf_nan=False,
        description="No-extraction baseline of a Class D rate: forced-choice chance, population (D-3, D-4.2).",
    )
    entities: Entities | None = Field(
        default=None,
        description="Class D counts on the target canaries or never-installed control entities (D4).",
    )
    expected_k: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="Analytic count: sum of item probabilities, k its round.",
    )
    component: dict[str, Any] | None = Field(
        default=None, description="Registered component measured: name, version and every parameter (R23)."
    )
    attack_component: dict[str, Any] | None = Field(
        default=None,
        description="The attack a Class D measurement runs under: name, version, parameters (R23).",
    )
    utility_metric: str | None = Field(
        default=None,
        description="Utility metric read, by its name in utility.metrics (R9); metric is 'utility'.",
    )
    value: float | None = Field(
        default=None,
        allow_inf_nan=False,
        description="The value read: a utility metric's (higher is better, R10, R11) or a metric's aggregate.",
    )
    proportion: bool | None = Field(
        default=None,
        description="Whether value is the k/n proportion counted; else n is nominal and k = 0 (R19).",
    )
    adjudicating: bool | None = Field(
        default=None, description="False on an arm that never decides (C-W6: relearning on the scored items)."
    )
    reused_step0: bool | None = Field(
        default=None,
        description="A Class D step-0 count reused from the direct measurement, same state (D-5.3).",
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="Any further parameter no field holds (R23); empty as remnant writes.",
    )
    elapsed_s: float = Field(ge=0, allow_inf_nan=False, description="Wall-clock seconds the cell took.")
    status: Status = Field(
        default="run", description="run, not_applicable (C-Q2), not_run, failed, diverged."
    )
    reason: str | None = Field(default=None, description="Why the cell did not run, failed or diverged.")

    @model_validator(mode="after")
    def _consistent(self) -> CellRecord:
        if self.k > self.n:
            raise ValueError(f"k ({self.k}) exceeds n ({self.n})")
        if self.status == "run" and self.n == 0:
            raise ValueError("a cell that ran scored n >= 1 items (R19)")
        problem = _cell_detail_problem(self)
        if problem is not None:
            raise ValueError(problem)
        return self

    @model_serializer(mode="wrap")
    def _without_unset_details(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A typed field that does not apply (null) is left off the line, so a line holds what its cell measured;
        it reads back as null."""
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if v is not None or k not in CELL_DETAIL_FIELDS}


#: The typed fields of a cell record beyond its identity, counts and status (schema_version 3).
CELL_DETAIL_FIELDS: tuple[str, ...] = (
    "budget",
    "step",
    "epoch",
    "examples",
    "risk",
    "method",
    "baseline",
    "entities",
    "expected_k",
    "component",
    "attack_component",
    "utility_metric",
    "value",
    "proportion",
    "adjudicating",
    "reused_step0",
)


def _cell_detail_problem(cell: CellRecord) -> str | None:
    """Why a cell record's typed fields contradict each other or its label (C-W3, D4, R10), or None."""
    shadowed = sorted(set(cell.params) & set(CELL_DETAIL_FIELDS))
    if shadowed:
        return (
            f"params.{shadowed[0]}: a typed field holds it since cell schema_version 3; set the field "
            f"{shadowed[0]!r} (engine.cell.cell_record(fields=...)), not params"
        )
    if cell.entities is not None and cell.risk is None:
        return "entities is set on a cell that measures no Class D risk (D4)"
    at = (cell.step, cell.epoch, cell.examples)
    if cell.budget is None and any(x is not None for x in at):
        return "step, epoch or examples without the relearning budget (C-W3)"
    if cell.budget is not None and label_budget(cell.checkpoint) != cell.budget:
        return f"checkpoint {cell.checkpoint!r} is not a checkpoint of relearning budget {cell.budget} (C-W3)"
    if cell.step is not None and parse_checkpoint(cell.checkpoint) != (cell.budget, cell.step):
        return f"checkpoint {cell.checkpoint!r} is not step {cell.step} of budget {cell.budget} (C-W3)"
    if cell.surface == "relearning" and cell.status == "run" and any(x is None for x in (cell.budget, *at)):
        return "a relearning checkpoint that ran carries its budget, step, epoch and examples (C-W3)"
    reading = (cell.utility_metric, cell.value, cell.proportion)
    if cell.metric != "utility" and cell.utility_metric is not None:
        return f"utility_metric on a {cell.metric!r} cell, not a utility reading (R9)"
    if cell.metric == "utility" and cell.status == "run" and any(x is None for x in reading):
        return "a utility reading that ran carries its utility_metric, value and proportion (R10, R11)"
    return None


EventKind = Literal["stage_started", "stage_finished", "diverged", "deviation", "resumed", "note"]


class Event(_Entry):
    """Something that happened to the run: a stage began or ended, training diverged, a deviation was adopted."""

    entry_type: Literal["event"] = Field(default="event", description="Entry type tag.")
    schema_version: Literal[2] = Field(default=2, description="Schema version of this entry type.")
    run_id: str = Field(description="Run the event belongs to.")
    stage: str = Field(description="Stage name, e.g. 'install', 'removal', 'relearning'.")
    kind: EventKind = Field(description="What happened.")
    message: str = Field(default="", description="Human-readable detail.")
    at: str = Field(default_factory=utc_now, description="UTC timestamp (ISO 8601, Z).")
    data: dict[str, Any] = Field(default_factory=dict, description="Structured detail (e.g. step, loss).")


class Deviation(_Entry):
    """A change to a pre-registered field, with its reason and the stage it was adopted at (R15)."""

    entry_type: Literal["deviation"] = Field(default="deviation", description="Entry type tag.")
    schema_version: Literal[2] = Field(default=2, description="Schema version of this entry type.")
    field: str = Field(min_length=1, description="Dotted pre-registered field changed (R15).")
    old: Any = Field(description="Its frozen value (R15).")
    new: Any = Field(description="The value used instead (R15).")
    reason: str = Field(min_length=1, description="Why it changed (R15).")
    stage: str = Field(min_length=1, description="Stage at which the change was adopted (R15).")
    recorded_at: str = Field(default_factory=utc_now, description="UTC timestamp of the record (R15).")


ReadingStatus = Literal["run", "failed", "not_run"]


class Reading(_Entry):
    """One white-box (latent) audit figure on one model state: supplementary, never adjudicating (C-H6, C-H7).

    An audit cell writes readings and no cell record, so nothing the verdict or the tier reads can hold a latent
    figure (C-H6). Each reading carries what C-H7(b) asks beside the value — the never-modified reference it was
    computed against, the states compared, the layer and the token position — so the statement's ``latent``
    block is rebuilt from records alone (``remnant recompute``). A reading that did not produce a figure says why
    (``status`` failed or not_run, or run with ``value`` null when the statistic is undefined on these inputs).
    """

    entry_type: Literal["reading"] = Field(default="reading", description="Entry type tag.")
    schema_version: Literal[1] = Field(default=1, description="Schema version of this entry type.")
    run_id: str = Field(description="Run the reading belongs to.")
    cell_key: str = Field(
        description="Content hash of the audit cell's inputs (cell_key()); --resume skips it."
    )
    measurement: str = Field(description="Registered audit name (uds, j_access, direction_survival, ...).")
    audit: str = Field(description="The config table that declared it (audits.<name>).")
    component: dict[str, Any] = Field(
        description="The audit's registered name, version and every parameter (R23)."
    )
    surface: Literal["latent"] = Field(default="latent", description="Always latent (C-H6).")
    adjudicating: Literal[False] = Field(default=False, description="Always false: no verdict weight (C-H6).")
    model_state: StateName = Field(
        description="The audited model state (post_removal or an Annex B control)."
    )
    role: str = Field(description="removed, procedure_control or content_control (C-H7c).")
    states: list[str] = Field(description="Model states compared, the audited one first (C-H7b).")
    reference: str = Field(description="Never-modified reference the figure was computed against (C-H7b).")
    layer: str = Field(description="Layer or layers read (C-H7b).")
    position: str = Field(description="Token position(s) read (C-H7b).")
    value: float | None = Field(
        default=None, allow_inf_nan=False, description="The figure; null when none was produced (see reason)."
    )
    interval: tuple[float, float] | None = Field(
        default=None, description="Its 95% interval, where the audit computes one."
    )
    details: dict[str, Any] = Field(
        default_factory=dict, description="Counts and settings behind the figure."
    )
    status: ReadingStatus = Field(default="run", description="run, failed (the audit raised) or not_run.")
    reason: str | None = Field(
        default=None, description="Why there is no figure (failed, not run, undefined)."
    )
    elapsed_s: float = Field(default=0.0, ge=0, allow_inf_nan=False, description="Wall-clock seconds.")

    @model_validator(mode="after")
    def _explained(self) -> Reading:
        if (self.status != "run" or self.value is None) and not self.reason:
            raise ValueError("a reading without a figure says why (reason)")
        if self.status != "run" and self.value is not None:
            raise ValueError(f"a {self.status} reading carries no value")
        return self


Record = Annotated[Observation | CellRecord | Event | Deviation | Reading, Field(discriminator="entry_type")]
_RECORD_TYPES = (Observation, CellRecord, Event, Deviation, Reading)
_RECORD: TypeAdapter[Observation | CellRecord | Event | Deviation | Reading] = TypeAdapter(Record)


def _observation_v1_to_v2(entry: dict[str, Any]) -> dict[str, Any]:
    """v1 (pre-release) named the state ``state`` and the excerpt ``excerpt``."""
    out = {k: v for k, v in entry.items() if k not in ("state", "excerpt")}
    out["model_state"] = entry.get("state")
    out["output_excerpt"] = entry.get("excerpt", "")
    out["schema_version"] = 2
    return out


def _to_chained(entry: dict[str, Any]) -> dict[str, Any]:
    """The chained version adds no field to the entry: its line carries ``prev``, which the store checks and
    strips before the entry is parsed. An unchained line upgrades to it unchanged but for the version."""
    return {**entry, "schema_version": int(entry["schema_version"]) + 1}


#: Keys of a cell's ``params`` before schema_version 3 → the typed field that holds them since (``metric``
#: only on a utility reading: the utility metric's name).
CELL_PARAMS_MOVED: dict[str, str] = {
    **{name: name for name in CELL_DETAIL_FIELDS if name not in ("attack_component", "utility_metric")},
    "attack": "attack_component",
    "metric": "utility_metric",
}


def _cell_v2_to_v3(entry: dict[str, Any]) -> dict[str, Any]:
    """v3 moved what ``params`` held into typed fields (:data:`CELL_PARAMS_MOVED`); anything else stays there.

    A relearning curve's diverged record and its relearned copy's utility readings carried their budget only in
    the label (``budget=B/diverged``, ``budget=B/final``): it is read from there, as v3 records carry it. The
    line itself is untouched: the chain was verified on its bytes before this upgrade runs."""
    held = entry.get("params", {})
    if not isinstance(held, dict):
        return {**entry, "schema_version": 3}  # not a v2 cell remnant wrote: validation names the field
    params = dict(held)
    out = {k: v for k, v in entry.items() if k != "params"}
    for key, field in CELL_PARAMS_MOVED.items():
        if key in params and (key != "metric" or entry.get("metric") == "utility"):
            out[field] = params.pop(key)
    checkpoint = entry.get("checkpoint")
    budget = label_budget(checkpoint) if isinstance(checkpoint, str) else None
    if out.get("budget") is None and budget is not None:
        out["budget"] = budget
    out["params"] = params
    out["schema_version"] = 3
    return out


#: (entry_type, version) → function upgrading an entry of that version to the next one.
MIGRATIONS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {
    ("observation", 1): _observation_v1_to_v2,
    ("observation", 2): _to_chained,
    ("cell", 1): _to_chained,
    ("cell", 2): _cell_v2_to_v3,
    ("event", 1): _to_chained,
    ("deviation", 1): _to_chained,
}


def entry_version(entry: Mapping[str, object]) -> tuple[str, int]:
    """``(entry_type, schema_version)`` of one raw entry; RecordError when either is unknown or too new."""
    etype = entry.get("entry_type")
    if etype not in SCHEMA_VERSIONS:
        raise RecordError(f"unknown entry_type {etype!r} (known: {', '.join(sorted(SCHEMA_VERSIONS))})")
    version = entry.get("schema_version")
    current = SCHEMA_VERSIONS[str(etype)]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise RecordError(f"{etype} entry has no valid schema_version ({version!r})")
    if version > current:
        raise RecordError(f"{etype} schema_version {version} is newer than this remnant reads ({current})")
    return str(etype), version


def upgrade(entry: dict[str, Any]) -> dict[str, Any]:
    """Bring one raw entry to its current schema version through :data:`MIGRATIONS` (RecordError if impossible)."""
    etype, version = entry_version(entry)
    current = SCHEMA_VERSIONS[etype]
    while version < current:
        step = MIGRATIONS.get((str(etype), version))
        if step is None:
            raise RecordError(f"no migration for {etype} schema_version {version}")
        entry = step(entry)
        version = int(entry["schema_version"])
    return entry


def parse_record(entry: dict[str, Any]) -> AnyRecord:
    """Validate one raw entry (upgrading it first); RecordError names the offending field."""
    try:
        return _RECORD.validate_python(upgrade(entry))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:]) or "(entry)"
        raise RecordError(f"{entry.get('entry_type')} entry: field '{where}': {first['msg']}") from None


def line_digest(line: bytes) -> str:
    """The chain's digest of one line: sha256 hex of its bytes, the newline included."""
    return hashlib.sha256(line).hexdigest()


def record_line(record: BaseModel, *, prev: str, rest: int = 0) -> bytes:
    """One record as its canonical JSON line chained to ``prev`` (the digest of the line before it, or
    :data:`GENESIS` for a first line), with ``rest`` the number of lines that follow it in the same write;
    newline-terminated: the bytes the store appends."""
    line = {**record.model_dump(mode="json"), "prev": prev, BATCH_FIELD: rest}
    return canonical_json(line) + b"\n"


def chained_lines(records: Iterable[BaseModel], *, prev: str = GENESIS) -> list[bytes]:
    """The lines of ``records`` appended (in one write) after a line whose digest is ``prev``, each chained to
    the one before and counting the lines after it in the write."""
    batch = list(records)
    out: list[bytes] = []
    for index, record in enumerate(batch):
        if not isinstance(record, _RECORD_TYPES):
            raise RecordError(f"cannot write a {type(record).__name__}: not a record type")
        out.append(record_line(record, prev=prev, rest=len(batch) - index - 1))
        prev = line_digest(out[-1])
    return out


@dataclass(frozen=True)
class ChainState:
    """What :meth:`RecordStore.read_chain` verified: the chain head, and how many leading lines predate the chain.

    ``digests`` holds every line's digest in order, so a head pinned earlier can be found (lines appended since)
    or not (the file was edited or cut).
    """

    digests: tuple[str, ...]
    unchained: int

    @property
    def lines(self) -> int:
        return len(self.digests)

    @property
    def head(self) -> str | None:
        """Digest of the last line (hex), None for an empty file."""
        return self.digests[-1] if self.digests else None

    @property
    def head_ref(self) -> str | None:
        """The head as manifests, statements and pins cite it (``sha256:<hex>``, R23), None for an empty file."""
        return f"sha256:{self.head}" if self.head is not None else None

    @property
    def chained(self) -> bool:
        """Whether every line carries its link, so the head commits to the whole file."""
        return self.unchained == 0


@dataclass(frozen=True)
class TornTail:
    """What :meth:`RecordStore.repair` moved aside: the line it started at and where it now lies."""

    line: int
    nbytes: int
    side_file: Path


AnyRecord = Observation | CellRecord | Event | Deviation | Reading
_NO_LINK = object()


class RecordStore:
    """An append-only, hash-chained JSONL file of records (module docstring). Appends are whole lines, flushed and
    fsync'd; nothing is rewritten.

    ``repair()`` is the only operation that shortens the file, and only by moving a torn tail to the side file;
    the chain then continues from the last good line.
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
        """Append records in one write, chained to the last line, then flush and fsync; refuses to append after a
        torn line."""
        batch = list(records)
        for record in batch:
            if not isinstance(record, _RECORD_TYPES):
                raise RecordError(f"{self.path}: cannot append a {type(record).__name__}: not a record type")
        if not batch:
            return
        created = not self.path.exists()
        prev = GENESIS if created else self._tail_digest()
        payload = b"".join(chained_lines(batch, prev=prev))
        append_durable(self.path, payload)  # never through a link out of the run (R23)
        if created:
            fsync_dir(self.path.parent)

    def _tail_digest(self) -> str:
        """Digest of the last line (GENESIS for an empty file), read backwards from the end; refuses a torn tail."""
        with open(self.path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size == 0:
                return GENESIS
            handle.seek(size - 1)
            if handle.read(1) != b"\n":
                raise RecordError(
                    f"{self.path}: the last line is torn (no trailing newline); call repair() before "
                    "appending, and re-run the last cell",
                    requirement=RECORDS_REQUIREMENT,
                )
            tail, start = b"", size
            while start > 0 and b"\n" not in tail[:-1]:
                step = min(start, 1 << 16)
                start -= step
                handle.seek(start)
                tail = handle.read(step) + tail
        return line_digest(tail[tail.rfind(b"\n", 0, len(tail) - 1) + 1 :])

    def read(self) -> list[AnyRecord]:
        """Every record in file order, upgraded to current schema versions; RecordError on a torn or bad line,
        :class:`RecordIntegrityError` on a broken chain."""
        return self.read_chain()[0]

    def read_chain(self) -> tuple[list[AnyRecord], ChainState]:
        """The records and the verified chain (module docstring): RecordIntegrityError names the first line whose
        link does not match the line before it; RecordError a line that cannot be read, or a torn tail."""
        data = self._bytes()
        complete, tail = data.split(b"\n")[:-1], data.split(b"\n")[-1]
        out, chain, expected_rest = self._verify(complete, torn_tail=bool(tail))
        if tail:
            raise self._torn(len(complete) + 1, "no trailing newline: the write was cut short")
        if expected_rest:
            raise self._torn(
                len(complete), f"its write was cut short ({expected_rest} more line(s) expected)"
            )
        return out, chain

    def _verify(self, complete: list[bytes], *, torn_tail: bool) -> tuple[list[AnyRecord], ChainState, int]:
        """Read and verify complete lines; also returns how many more lines the last line's write expected."""
        out: list[AnyRecord] = []
        digests: list[str] = []
        unchained = expected_rest = 0
        for number, raw in enumerate(complete, start=1):
            try:
                record, link, rest = self._parse(raw, number)
            except RecordIntegrityError:
                raise
            except RecordError as exc:
                if number == len(complete) and not torn_tail:
                    raise self._torn(number, str(exc)) from None
                raise
            if link is _NO_LINK:
                if unchained < len(digests):
                    raise RecordIntegrityError(
                        f"{self.path}: line {number}: carries no chain link (prev) after chained lines: a line "
                        "stripped of its link, or one inserted"
                    )
                unchained += 1
            elif link != (digests[-1] if digests else GENESIS):
                raise RecordIntegrityError(self._broken(number))
            if expected_rest and rest != expected_rest - 1:
                raise RecordIntegrityError(
                    f"{self.path}: line {number}: line {number - 1} said {expected_rest} more line(s) of its "
                    f"write follow, and this line says {rest}: the write was cut or lines were spliced in"
                )
            expected_rest = rest
            out.append(record)
            digests.append(line_digest(raw + b"\n"))
        return out, ChainState(tuple(digests), unchained), expected_rest

    def _bytes(self) -> bytes:
        if not self.path.exists():
            return b""
        try:
            return self.path.read_bytes()
        except OSError as exc:
            why = "is a folder, not a file" if self.path.is_dir() else f"cannot read: {exc.strerror or exc}"
            raise RecordError(f"{self.path}: {why}", requirement=RECORDS_REQUIREMENT) from None

    def _broken(self, number: int) -> str:
        if number == 1:
            return (
                f"{self.path}: line 1: chain broken: its prev is not the genesis value, so it is not the first "
                "line written (lines were deleted or reordered before it)"
            )
        return (
            f"{self.path}: line {number}: chain broken: its prev is not the digest of line {number - 1} (line "
            f"{number - 1} was edited or inserted, or lines were deleted or reordered before line {number})"
        )

    def _parse(self, raw: bytes, number: int) -> tuple[AnyRecord, object, int]:
        """One line's record, its link (``prev``, or _NO_LINK for a line that predates the chain) and how many
        lines follow it in its write (0 for a line that predates the chain)."""
        where = f"{self.path}: line {number}"
        entry = loads_strict(raw, source=where, error=RecordError, requirement=RECORDS_REQUIREMENT)
        if not isinstance(entry, dict):
            raise RecordError(f"{where} is not a JSON object", requirement=RECORDS_REQUIREMENT)
        link = entry.pop("prev", _NO_LINK)
        rest = entry.pop(BATCH_FIELD, 0)  # the chain covers it: stripping it changes the line's digest
        if not isinstance(rest, int) or isinstance(rest, bool) or rest < 0:
            raise RecordIntegrityError(f"{where}: '{BATCH_FIELD}' must be a count >= 0")
        try:
            etype, version = entry_version(entry)
            if (version >= CHAINED_SINCE[etype]) != (link is not _NO_LINK):
                raise RecordIntegrityError(
                    f"{where}: {etype} schema_version {version} "
                    + (
                        "carries no chain link (prev): a chained line with its link removed"
                        if link is _NO_LINK
                        else "predates the chain but carries a link (prev)"
                    )
                )
            return parse_record(entry), link, rest
        except RecordIntegrityError:
            raise
        except RecordError as exc:
            raise RecordError(f"{where}: {exc}", requirement=RECORDS_REQUIREMENT) from None

    def _torn(self, number: int, why: str) -> RecordError:
        return RecordError(
            f"{self.path}: line {number} (the last) is torn: {why}. The cell it belonged to must be re-run; "
            f"RecordStore.repair() (or `remnant assess --resume`) moves the torn line to {self.side_file.name}",
            requirement=RECORDS_REQUIREMENT,
        )

    def repair(self) -> TornTail | None:
        """Move a torn tail into the side file and truncate it off; None when the tail is sound.

        The torn tail is a last line cut short (no newline, or not a record), and with it every line of the write
        it belonged to: a crash in the middle of a write of several lines (one cell's observations and records)
        leaves complete lines whose last one still expects more (``rest`` > 0), and the whole write goes, so the
        cell is re-run rather than half-recorded. The side file gets the torn bytes and is fsync'd before the
        store is shortened, so the bytes exist somewhere at every moment. A bad line that is not the last is not a
        crash artefact: that is reported (RecordError), not repaired; nor is a whole last line whose chain link is
        wrong. The next append chains to the last good line.
        """
        data = self._bytes()
        if not data:
            return None
        start = self._torn_start(data)
        if start is None:
            return None
        torn = data[start:]
        number = data.count(b"\n", 0, start) + 1
        # neither the side file nor the store is written through a link out of the run (R23)
        append_durable(self.side_file, torn if torn.endswith(b"\n") else torn + b"\n")
        truncate_durable(self.path, start)
        self.read()  # what remains must read cleanly, or the damage was not a torn tail
        return TornTail(line=number, nbytes=len(torn), side_file=self.side_file)

    def _torn_start(self, data: bytes) -> int | None:
        """Byte offset where the torn tail starts (see :meth:`repair`), or None when the file ends cleanly or its
        damage is not a crash's (an edited or spliced line is reported by :meth:`read`, never repaired)."""
        start = len(data)
        if not data.endswith(b"\n"):
            start = data.rfind(b"\n") + 1
        else:
            last = data.rfind(b"\n", 0, len(data) - 1) + 1
            try:
                self._parse(data[last:-1], data.count(b"\n"))
            except RecordIntegrityError:
                return None
            except RecordError:
                start = last
        complete = data[:start].split(b"\n")[:-1]
        try:
            _, _, expected_rest = self._verify(complete, torn_tail=True)
        except RecordError:
            return None
        # a write cut between lines: its complete lines still expect more; the whole write is the torn tail
        while expected_rest and complete:
            rest_here = expected_rest
            start -= len(complete.pop()) + 1
            expected_rest = self._rest_of(complete[-1]) if complete else 0
            if expected_rest != rest_here + 1:
                break
        return None if start == len(data) else start

    @staticmethod
    def _rest_of(raw: bytes) -> int:
        """The ``rest`` count a complete line carries (0 when it has none or cannot be read)."""
        try:
            entry = loads_strict(raw, source="records line")
        except RemnantError:
            return 0
        rest = entry.get(BATCH_FIELD) if isinstance(entry, dict) else None
        return rest if isinstance(rest, int) and not isinstance(rest, bool) and rest > 0 else 0

    def completed_cells(self) -> set[str]:
        """Keys of every cell recorded (including diverged and failed ones), for ``--resume``."""
        return {r.cell_key for r in self.read() if isinstance(r, CellRecord)}


__all__ = [
    "BATCH_FIELD",
    "CELL_DETAIL_FIELDS",
    "CELL_PARAMS_MOVED",
    "CHAINED_SINCE",
    "DEVIATIONS_FILE",
    "GENESIS",
    "MIGRATIONS",
    "RECORDS_FILE",
    "RECORDS_REQUIREMENT",
    "SCHEMA_VERSIONS",
    "AnyRecord",
    "CellRecord",
    "ChainState",
    "Deviation",
    "Entities",
    "Event",
    "Observation",
    "Reading",
    "Record",
    "RecordIntegrityError",
    "RecordStore",
    "TornTail",
    "cell_key",
    "chained_lines",
    "entry_version",
    "line_digest",
    "parse_record",
    "record_line",
    "upgrade",
    "utc_now",
]
