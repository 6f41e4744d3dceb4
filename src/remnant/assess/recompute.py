"""``remnant recompute RUN``: rates, verdict, tier, statement, manifest and reports again, from records alone.

Loads no model and imports no torch (a test checks ``sys.modules``): it reads ``records.jsonl``, ``prereg.json``,
``deviations.jsonl`` and the config copy in RUN and runs the same :func:`remnant.assess.finalize.finalize` that
``remnant assess`` ended with, so the statement comes out byte for byte the same (R24; Inspect AI's
``score`` re-judging a saved log). A deviation recorded since the run (R15) is applied; an unexplained change to
the config copy is refused (R14).

Before anything is rebuilt — and re-signed — the records are checked (R23: the manifest's per-cell table is only
as good as the records behind it). Each failure is a :class:`~remnant.records.RecordIntegrityError` (exit 1)
naming ``records.jsonl`` and the first bad line:

1. **The chain** (:meth:`~remnant.records.RecordStore.read_chain`): every line's ``prev`` is the digest of the line
   before it, so an edited, inserted, deleted or reordered line breaks the link of the line after it.
2. **The pins** (:func:`check_pins`): the chain head the existing ``manifest.json`` (``records``) and
   ``statement.json`` (``records_head``) pinned must be the head now. This catches what the chain alone cannot:
   the last line edited, lines cut off the end or appended, the whole file re-chained, or the chain stripped
   (records without links where a pin says they were chained). Records written before the chain are accepted
   only when nothing pinned them as chained, and the rebuilt statement then says "records not chained".
3. **The counts** (:func:`check_cell_counts`): each cell record's k/n is what its observations give under the
   harness's own rule (:func:`remnant.score.rates.count_items`), so a cell edited and re-chained still shows.

What the counts check cannot re-derive, and why: a utility cell has no per-item observations (the metric's reading
is recorded whole), so only its shape is checked — a proportion's value lies in [0, k/n] (its rate net of chance),
a reading with a nominal n counts k = 0; a Class D measurement (its ``risk`` set) is counted by the battery from
target and control entities under its own rule (:mod:`remnant.classd`), not re-derived here; a cell that did not
run (not_applicable, not_run, failed, diverged) must count k = n = 0. Those rest on the chain and the pins.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from remnant.assess.finalize import Outcome, finalize, load_run_config
from remnant.assess.runfiles import store
from remnant.errors import ConfigError
from remnant.jsonio import read_json
from remnant.records import (
    RECORDS_FILE,
    RECORDS_REQUIREMENT,
    AnyRecord,
    CellRecord,
    ChainState,
    Observation,
    RecordIntegrityError,
)
from remnant.run_manifest import MANIFEST_FILE, STATEMENT_FILE, RecordsChain
from remnant.runlock import held
from remnant.score.rates import count_items


def recompute(
    run_dir: str | Path, *, reports: bool = True, expect_head: str | None = None, wait: bool = False
) -> Outcome:
    """Check the records (module docstring), then rebuild everything downstream of them in ``run_dir``.

    ``expect_head`` is a chain head the caller holds from elsewhere (the ``records_head`` of a signed statement):
    a party who rewrote the records consistently, re-chained them and replaced manifest.json and statement.json
    passes the run folder's own pins, never this one. The run folder's lock is held throughout (R23,
    :mod:`remnant.runlock`): records are never read while an assessment appends to them, nor the statement
    rewritten under it; a folder in use is refused with its holder named, or waited for with ``wait``.
    """
    run = Path(run_dir)
    pin = None if expect_head is None else expected_pin(expect_head)
    with held(run, purpose="remnant recompute", wait=wait, create=False):
        records, chain = store(run).read_chain()
        check_cell_counts(records, run / RECORDS_FILE)
        check_pins(run, chain, extra=() if pin is None else (pin,))
        return finalize(run, load_run_config(run), reports=reports)


def expected_pin(head: str) -> Pin:
    """A pin given on the command line (``--expect-head sha256:HEX``); ConfigError when it is not one."""
    if re.fullmatch(r"sha256:[0-9a-f]{64}", head) is None:
        raise ConfigError(
            f"--expect-head {head!r}: not a chain head (sha256: then 64 lowercase hex digits)",
            requirement=RECORDS_REQUIREMENT,
        )
    return Pin("--expect-head", True, head)


@dataclass(frozen=True)
class Pin:
    """What an earlier finalize wrote about records.jsonl into one file: chained or not, and the head."""

    source: str
    chained: bool
    head: str | None
    lines: int | None = None


def read_pins(run: Path) -> Iterator[Pin]:
    """The pins in RUN's manifest.json (``records``) and statement.json (``records_head``), where they exist.

    A manifest without a ``records`` block pins nothing (written before the chain); a statement whose
    ``records_head`` is absent or missing pins the records as not chained. ConfigError (exit 2) when a file that
    exists cannot be read, or its pin is malformed.
    """
    manifest = _json(run / MANIFEST_FILE)
    if manifest is not None and manifest.get("records") is not None:
        try:
            block = RecordsChain.model_validate(manifest["records"])
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in ("records", *first["loc"]))
            raise ConfigError(
                f"{run / MANIFEST_FILE}: field {where}: {first['msg']}", requirement=RECORDS_REQUIREMENT
            ) from None
        yield Pin(MANIFEST_FILE, block.chained, block.head, block.lines)
    statement = _json(run / STATEMENT_FILE)
    if statement is not None:
        head = statement.get("records_head")
        if isinstance(head, str):
            yield Pin(STATEMENT_FILE, True, head)
        elif head is None or isinstance(head, dict) and head.get("absent") is True:
            yield Pin(STATEMENT_FILE, False, None)
        else:
            raise ConfigError(
                f"{run / STATEMENT_FILE}: field records_head: neither a sha256 reference nor an absent marker",
                requirement=RECORDS_REQUIREMENT,
            )


def _json(path: Path) -> dict[str, object] | None:
    if not path.exists():
        return None
    data = read_json(path, requirement=RECORDS_REQUIREMENT)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a JSON object", requirement=RECORDS_REQUIREMENT)
    return data


def check_pins(run: Path, chain: ChainState, *, extra: Sequence[Pin] = ()) -> None:
    """The records must be the ones the existing manifest and statement (and any ``extra`` pin) pinned (module
    docstring, step 2)."""
    path = run / RECORDS_FILE
    head = chain.head_ref
    for pin in [*read_pins(run), *extra]:
        if pin.chained and not chain.chained:
            raise RecordIntegrityError(
                f"{path}: line 1: carries no chain link (prev), but {pin.source} pins these records as chained: "
                "the chain was stripped or the file replaced"
            )
        if not pin.chained and chain.chained and chain.lines:
            raise RecordIntegrityError(
                f"{path}: line 1: carries a chain link (prev), but {pin.source} pins these records as not "
                "chained: the chain was added after they were pinned"
            )
        if pin.head is not None and pin.head != head:
            raise RecordIntegrityError(_moved_head(path, chain, pin))


def _moved_head(path: Path, chain: ChainState, pin: Pin) -> str:
    refs = [f"sha256:{d}" for d in chain.digests]
    if pin.head in refs:
        line = refs.index(str(pin.head)) + 1
        return (
            f"{path}: line {line + 1}: lines {line + 1}-{chain.lines} were appended after {pin.source} pinned "
            f"line {line} as the chain head; a resumed run is finished with `remnant assess --resume`, which "
            "pins them again"
        )
    if pin.lines is not None and pin.lines > chain.lines:
        return (
            f"{path}: line {chain.lines + 1}: missing: the file ends at line {chain.lines} but {pin.source} "
            f"pins {pin.lines} lines (lines were cut off the end)"
        )
    return (
        f"{path}: line {chain.lines}: the chain head (the last line's digest) is not the {pin.head} that "
        f"{pin.source} pins: the last line was edited, lines were cut off the end, or the file was re-chained"
    )


def check_cell_counts(records: Sequence[AnyRecord], path: Path) -> None:
    """Every cell record's k/n against its observations (module docstring, step 3). A record's line number is its
    index + 1: the store reads one record per line."""
    for index, record in enumerate(records):
        if isinstance(record, CellRecord):
            problem = count_problem(record, batch_observations(records, index))
            if problem is not None:
                raise RecordIntegrityError(
                    f"{path}: line {index + 1}: cell {record.attack}/{record.model_state}/{record.metric} at "
                    f"{record.checkpoint}: {problem}"
                )


def _group(record: Observation | CellRecord) -> tuple[str, str, str, str]:
    return (record.cell_key, record.model_state, record.attack, record.checkpoint)


def batch_observations(records: Sequence[AnyRecord], index: int) -> list[Observation]:
    """The observations a cell record at ``index`` was counted from, in file order.

    A cell is appended in one write as its observations, then its κ and w records (``score_outcomes``), so they
    are the run of lines directly before it with the same cell key, state, attack and checkpoint (a κ record
    between them and a w record is stepped over). A cell re-run after a torn write counts only its own batch,
    never the orphaned lines of the cut one.
    """
    cell = records[index]
    if not isinstance(cell, CellRecord):
        return []
    group = _group(cell)
    found: list[Observation] = []
    for record in reversed(records[:index]):
        if not isinstance(record, Observation | CellRecord) or _group(record) != group:
            break
        if isinstance(record, Observation):
            found.append(record)
    return found[::-1]


def count_problem(cell: CellRecord, observations: Sequence[Observation]) -> str | None:
    """Why ``cell``'s counts are not what its observations give (module docstring), or None."""
    if cell.status != "run":
        if cell.k or cell.n:
            return f"status {cell.status} yet k={cell.k}, n={cell.n}: a cell that did not run counts nothing"
        return None
    if cell.metric == "utility":
        return _utility_problem(cell)
    if cell.risk is not None or cell.metric not in ("kappa", "w"):
        return None
    counts = count_items(
        [o.kappa if o.kappa is not None else float(o.score or 0.0) for o in observations],
        [o.willing for o in observations],
    )
    want = (counts.k, counts.n) if cell.metric == "kappa" else (counts.willing_k, counts.willing_n)
    if (cell.k, cell.n) != want:
        return (
            f"k={cell.k}, n={cell.n}, but the {len(observations)} observations written with it give "
            f"k={want[0]}, n={want[1]}"
        )
    if cell.metric == "kappa" and cell.expected_k != counts.expected_k:
        return (
            f"expected_k {cell.expected_k!r} is not the sum of its observations' scores "
            f"({counts.expected_k!r})"
        )
    return None


def _utility_problem(cell: CellRecord) -> str | None:
    value = cell.value
    if cell.proportion is True:
        if value is None or not 0 <= value <= cell.k / cell.n:
            return (
                f"utility value {value!r} is not within [0, k/n = {cell.k}/{cell.n}] (a rate net of chance)"
            )
        return None
    if cell.k:
        return f"a utility reading with a nominal n counts k = 0, not {cell.k}"
    return None


__all__ = [
    "Pin",
    "batch_observations",
    "check_cell_counts",
    "check_pins",
    "count_problem",
    "expected_pin",
    "read_pins",
    "recompute",
]
