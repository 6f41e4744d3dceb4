"""Records: entry models, the append-only store, migration, torn-line detection and repair (the chain itself:
test_records_chain.py)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from remnant.errors import RecordError, RemnantError
from remnant.records import (
    GENESIS,
    SCHEMA_VERSIONS,
    CellRecord,
    Deviation,
    Event,
    Observation,
    RecordStore,
    cell_key,
    chained_lines,
    line_digest,
    record_line,
    upgrade,
)
from remnant.statement.canonical import canonical_json


def obs(i: int = 0, **kw: object) -> Observation:
    base: dict[str, object] = dict(
        run_id="r1",
        cell_key="c" * 64,
        model_state="post_removal",
        attack="prefill",
        surface="inference_time",
        item_id=f"it{i}",
        checkpoint="final",
        kappa=i % 2 == 0,
        willing=True,
        score=None,
        output_excerpt="Élise lives in Varnholt",
        seed=i,
    )
    base.update(kw)
    return Observation.model_validate(base)


def cell(key: str = "k1", **kw: object) -> CellRecord:
    base: dict[str, object] = dict(
        run_id="r1",
        cell_key=key,
        attack="relearning",
        surface="relearning",
        model_state="control",
        metric="kappa",
        k=3,
        n=10,
        checkpoint="budget=16/step=3",
        budget=16,
        step=3,
        epoch=0.75,
        examples=12,
        params={"lr": 1e-4},
        elapsed_s=1.5,
    )
    base.update(kw)
    return CellRecord.model_validate(base)


def test_writes_are_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr("remnant.records.os.fsync", lambda fd: (synced.append(fd), real(fd))[1])
    store = RecordStore(tmp_path / "records.jsonl")
    store.append(cell("a"))  # file + new directory entry
    assert len(synced) == 2
    store.extend([cell("b"), cell("c")])  # one write, one fsync
    assert len(synced) == 3


def test_append_and_read_round_trip(tmp_path: Path) -> None:
    store = RecordStore(tmp_path / "run" / "records.jsonl")
    assert store.read() == []
    records = [
        obs(0),
        cell(),
        Event(run_id="r1", stage="install", kind="stage_started", at="2025-01-01T00:00:00Z"),
        Deviation(
            field="tau", old=0.5, new=0.6, reason="r", stage="relearning", recorded_at="2025-01-01T00:00:00Z"
        ),
    ]
    store.append(records[0])
    store.extend(records[1:])
    assert store.read() == records
    lines = store.path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 5
    first = json.loads(lines[0])
    assert (
        first["entry_type"] == "observation"
        and first["schema_version"] == SCHEMA_VERSIONS["observation"] == 3
    )
    # Canonical JSON lines: same records, same bytes (R24 determinism); each chained to the line before.
    assert first["prev"] == GENESIS
    prev = line_digest(lines[0] + b"\n")
    assert lines[1] == canonical_json({**records[1].model_dump(mode="json"), "prev": prev, "rest": 2})
    assert lines[1].startswith(b'{"attack":"relearning","budget":16,"cell_key":"k1",')
    assert b"null" not in lines[1].replace(b'"reason":null', b"")  # typed fields that do not apply: left off


def test_every_field_has_a_description() -> None:
    for model in (Observation, CellRecord, Event, Deviation):
        for name, info in model.model_fields.items():
            assert info.description, f"{model.__name__}.{name} has no description"


def test_cell_counts_are_checked() -> None:
    with pytest.raises(ValidationError, match="exceeds n"):
        cell(k=11, n=10)
    with pytest.raises(ValidationError, match="n >= 1"):
        cell(k=0, n=0)
    assert cell(k=0, n=0, status="diverged", reason="loss nan at step 4").status == "diverged"


def test_cell_key_is_sha256_of_canonical_inputs() -> None:
    key = cell_key(attack="prefill", budget=16, model="abc")
    assert key == hashlib.sha256(b'{"attack":"prefill","budget":16,"model":"abc"}').hexdigest()
    assert key == cell_key(model="abc", budget=16, attack="prefill")
    assert key != cell_key(attack="prefill", budget=17, model="abc")
    assert cell_key(x=1) == cell_key(x=1.0)  # JSON numbers, not Python types


def test_completed_cells(tmp_path: Path) -> None:
    store = RecordStore(tmp_path / "records.jsonl")
    store.extend([obs(1), cell("a"), cell("b", status="diverged", k=0, n=0), obs(2)])
    assert store.completed_cells() == {"a", "b"}


def test_v1_observation_is_upgraded_on_read(tmp_path: Path) -> None:
    """v1 (renamed fields) → v2 → v3 (chained); a chained line may follow a legacy one, linked to it."""
    v3 = obs(3).model_dump(mode="json")
    v1 = {k: v for k, v in v3.items() if k not in ("model_state", "output_excerpt")}
    v1.update(schema_version=1, state=v3["model_state"], excerpt=v3["output_excerpt"])
    path = tmp_path / "records.jsonl"
    legacy = canonical_json(v1) + b"\n"
    path.write_bytes(legacy + record_line(cell(), prev=line_digest(legacy)))
    assert RecordStore(path).read() == [obs(3), cell()]
    assert upgrade(dict(v1)) == v3


def test_every_older_version_upgrades_to_the_current_one() -> None:
    """Each entry type's pre-chain version reads as its current one: the chained version adds no field (a cell's
    typed fields of schema_version 3: test_records_cell_fields.py)."""
    for record in (obs(1), Event(run_id="r", stage="s", kind="note", at="t")):
        current = record.model_dump(mode="json")
        old = {**current, "schema_version": current["schema_version"] - 1}
        assert upgrade(old) == current


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"entry_type": "observation", "schema_version": 4}, "newer than this remnant reads"),
        ({"entry_type": "verdict", "schema_version": 1}, "unknown entry_type 'verdict'"),
        ({"entry_type": "cell"}, "no valid schema_version"),
        ({"entry_type": "cell", "schema_version": 2, "cell_key": "x"}, "field 'run_id'"),
    ],
)
def test_unreadable_entries_name_the_line(tmp_path: Path, entry: dict[str, object], message: str) -> None:
    path = tmp_path / "records.jsonl"
    first = record_line(cell(), prev=GENESIS)
    second = canonical_json({**entry, "prev": line_digest(first)}) + b"\n"
    path.write_bytes(first + second + record_line(cell("z"), prev=line_digest(second)))
    with pytest.raises(RecordError, match=f"records.jsonl: line 2: .*{message}"):
        RecordStore(path).read()


def test_torn_last_line_is_reported_with_line_number(tmp_path: Path) -> None:
    store = RecordStore(tmp_path / "records.jsonl")
    store.extend([cell("a"), cell("b")])
    torn = record_line(cell("c"), prev=GENESIS)[:37]
    with open(store.path, "ab") as handle:
        handle.write(torn)
    with pytest.raises(RecordError) as info:
        store.read()
    message = str(info.value)
    assert "records.jsonl: line 3 (the last) is torn" in message
    assert "must be re-run" in message and "records.jsonl.torn" in message
    assert isinstance(info.value, RemnantError)
    with pytest.raises(RecordError, match="call repair"):
        store.append(cell("d"))


def test_repair_moves_torn_tail_to_side_file_and_keeps_everything_else(tmp_path: Path) -> None:
    store = RecordStore(tmp_path / "records.jsonl")
    store.extend([cell("a"), cell("b")])
    torn = record_line(cell("c"), prev=GENESIS)[:-5]
    with open(store.path, "ab") as handle:
        handle.write(torn)
    tail = store.repair()
    assert tail is not None and tail.line == 3 and tail.nbytes == len(torn)
    assert tail.side_file == tmp_path / "records.jsonl.torn"
    assert tail.side_file.read_bytes() == torn + b"\n"
    assert store.read() == [cell("a"), cell("b")]
    assert store.completed_cells() == {"a", "b"}  # "c" is re-run
    assert store.repair() is None
    store.append(cell("c"))
    assert store.completed_cells() == {"a", "b", "c"}


def test_invalid_newline_terminated_last_line_is_torn_too(tmp_path: Path) -> None:
    store = RecordStore(tmp_path / "records.jsonl")
    store.append(cell("a"))
    with open(store.path, "ab") as handle:
        handle.write(b"\x00\x00\x00\n")
    with pytest.raises(RecordError, match="line 2 \\(the last\\) is torn"):
        store.read()
    tail = store.repair()
    assert tail is not None and tail.side_file.read_bytes() == b"\x00\x00\x00\n"
    assert store.read() == [cell("a")]


def test_corruption_in_the_middle_is_not_repaired(tmp_path: Path) -> None:
    store = RecordStore(tmp_path / "records.jsonl")
    store.path.write_bytes(
        b"".join(chained_lines([cell("a")])) + b"{broken\n" + b"".join(chained_lines([cell("b")]))
    )
    with pytest.raises(RecordError, match="line 2: cannot read as JSON"):
        store.read()
    assert store.repair() is None  # the tail is sound; the damage is elsewhere and must be looked at
    assert store.path.read_bytes().count(b"\n") == 3


def test_every_cut_of_the_last_write_reads_or_repairs_to_the_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash may cut the last write at any byte; the earlier records always survive and nothing is lost."""
    monkeypatch.setattr("remnant.records.os.fsync", lambda fd: None)  # durability is not under test here
    first = chained_lines([cell("a"), obs(1)])
    lines = first + chained_lines([cell("b")], prev=line_digest(first[-1]))
    good, last = lines[0] + lines[1], lines[2]
    for cut in range(len(last) + 1):
        path = tmp_path / f"r{cut}.jsonl"
        path.write_bytes(good + last[:cut])
        store = RecordStore(path)
        if cut in (0, len(last)):
            assert len(store.read()) == 2 + (cut == len(last))
            continue
        with pytest.raises(RecordError, match="torn"):
            store.read()
        tail = store.repair()
        assert tail is not None
        assert store.read() == [cell("a"), obs(1)]
        assert tail.side_file.read_bytes() == last[:cut] + (b"" if last[:cut].endswith(b"\n") else b"\n")


def test_appending_a_non_record_is_refused(tmp_path: Path) -> None:
    from remnant.config.assessment import Seeds

    with pytest.raises(RecordError, match="not a record type"):
        RecordStore(tmp_path / "records.jsonl").append(Seeds(master=1))


def test_large_whole_floats_survive_a_read_and_rewrite(tmp_path: Path) -> None:
    """RFC 8785 writes 1.1164625978417464e16 as an integer literal; reading it back must not make an int that
    canonical JSON then refuses (found by the property test)."""
    dev = Deviation(field="f", old=None, new=1.1164625978417464e16, reason="r", stage="s", recorded_at="t")
    store = RecordStore(tmp_path / "a.jsonl")
    store.append(dev)
    back = store.read()
    assert back == [dev] and isinstance(back[0], Deviation) and isinstance(back[0].new, float)
    copy = RecordStore(tmp_path / "b.jsonl")
    copy.extend(back)
    assert copy.path.read_bytes() == store.path.read_bytes()
