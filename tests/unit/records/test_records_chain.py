"""The records chain: each line carries the digest of the one before, and a read names the first broken link (R23).

Files here are built from the store's own bytes and then tampered with the way a party editing its records
would: edit, insert, delete, reorder, strip the links. Lines written before the chain (no ``prev``) still read.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from remnant.errors import IntegrityError, RecordError
from remnant.records import (
    CHAINED_SINCE,
    GENESIS,
    CellRecord,
    Event,
    Observation,
    RecordIntegrityError,
    RecordStore,
    chained_lines,
    line_digest,
)
from remnant.statement.canonical import canonical_json


def obs(i: int) -> Observation:
    return Observation(
        run_id="r1",
        cell_key="c" * 64,
        model_state="post_removal",
        attack="prefill",
        surface="inference_time",
        item_id=f"it{i}",
        checkpoint="final",
        kappa=i % 2 == 0,
        willing=True,
        seed=i,
    )


def cell(key: str = "k1", k: int = 3) -> CellRecord:
    return CellRecord(
        run_id="r1",
        cell_key=key,
        attack="prefill",
        surface="inference_time",
        model_state="post_removal",
        metric="kappa",
        k=k,
        n=10,
        checkpoint="final",
        elapsed_s=1.0,
    )


RECORDS = [obs(0), obs(1), cell("a"), obs(2), cell("b"), cell("c")]


@pytest.fixture
def store(tmp_path: Path) -> RecordStore:
    s = RecordStore(tmp_path / "records.jsonl")
    s.extend(RECORDS[:3])
    s.extend(RECORDS[3:])
    return s


def lines_of(store: RecordStore) -> list[bytes]:
    return store.path.read_bytes().splitlines(keepends=True)


def legacy(line: bytes) -> bytes:
    """The line as remnant wrote it before the chain: no ``prev``, the pre-chain schema version."""
    entry = json.loads(line)
    del entry["prev"]
    entry["schema_version"] = CHAINED_SINCE[entry["entry_type"]] - 1
    return canonical_json(entry) + b"\n"


def test_each_line_carries_the_digest_of_the_one_before(store: RecordStore) -> None:
    lines = lines_of(store)
    assert json.loads(lines[0])["prev"] == GENESIS == "0" * 64
    for before, line in zip(lines, lines[1:], strict=False):
        assert json.loads(line)["prev"] == hashlib.sha256(before).hexdigest()
    records, chain = store.read_chain()
    assert records == RECORDS  # prev belongs to the line, not the record
    assert chain.chained and chain.unchained == 0 and chain.lines == 6
    assert chain.head == hashlib.sha256(lines[-1]).hexdigest()
    # The second write links to the first write's last line; each line counts the lines after it in its write.
    first = chained_lines(RECORDS[:3])
    assert b"".join(lines) == b"".join(first + chained_lines(RECORDS[3:], prev=line_digest(first[-1])))
    assert [json.loads(line)["rest"] for line in lines] == [2, 1, 0, 2, 1, 0]


def tampered(store: RecordStore, lines: list[bytes]) -> RecordIntegrityError:
    store.path.write_bytes(b"".join(lines))
    with pytest.raises(RecordIntegrityError) as info:
        store.read()
    return info.value


def edit_k(line: bytes, k: int) -> bytes:
    entry = json.loads(line)
    entry["k"] = k
    return canonical_json(entry) + b"\n"


@pytest.mark.parametrize(
    ("name", "change", "first_bad"),
    [
        ("edited cell k", lambda ls: ls[:2] + [edit_k(ls[2], 9)] + ls[3:], 4),
        ("forged cell inserted before the real one", lambda ls: ls[:2] + [edit_k(ls[2], 9)] + ls[2:], 4),
        ("cell line deleted", lambda ls: ls[:2] + ls[3:], 3),
        ("observation deleted", lambda ls: ls[:1] + ls[2:], 2),
        ("two lines reordered", lambda ls: ls[:3] + [ls[4], ls[3]] + ls[5:], 4),
        ("first line deleted", lambda ls: ls[1:], 1),
        ("line duplicated", lambda ls: ls[:3] + [ls[2]] + ls[3:], 4),
        ("a line from another file", lambda ls: ls[:3] + [chained_lines([cell("zz")])[0]] + ls[4:], 4),
    ],
)
def test_tampering_names_the_first_broken_link(
    store: RecordStore, name: str, change: object, first_bad: int
) -> None:
    error = tampered(store, change(lines_of(store)))  # type: ignore[operator]
    message = str(error)
    assert f"records.jsonl: line {first_bad}: chain broken" in message, (name, message)
    assert message.endswith("(R23)") and "\n" not in message
    assert isinstance(error, RecordError) and isinstance(error, IntegrityError)


def test_stripping_links_is_refused_at_the_first_stripped_line(store: RecordStore) -> None:
    lines = lines_of(store)
    stripped = [
        canonical_json({k: v for k, v in json.loads(x).items() if k != "prev"}) + b"\n" for x in lines
    ]
    assert "records.jsonl: line 1: observation schema_version 3 carries no chain link" in str(
        tampered(store, stripped)
    )
    one = lines[:4] + stripped[4:5] + lines[5:]
    assert "line 5: cell schema_version 3 carries no chain link" in str(tampered(store, one))
    # Stripped and downgraded to a pre-chain line, in the middle of a chained file: still refused.
    assert "line 5: carries no chain link (prev) after chained lines" in str(
        tampered(store, lines[:4] + [legacy(lines[4])] + lines[5:])
    )
    # A pre-chain version carrying a link is no line remnant ever wrote.
    entry = json.loads(lines[0])
    entry["schema_version"] = 2
    forged = canonical_json(entry) + b"\n"
    assert "line 1: observation schema_version 2 predates the chain but carries a link" in str(
        tampered(store, [forged] + lines[1:])
    )


def test_a_file_written_before_the_chain_reads_and_says_so(store: RecordStore) -> None:
    lines = [legacy(x) for x in lines_of(store)]
    store.path.write_bytes(b"".join(lines))
    records, chain = store.read_chain()
    assert records == RECORDS
    assert not chain.chained and chain.unchained == chain.lines == 6
    assert chain.head == line_digest(lines[-1])
    # Resuming it chains the new lines to the last old one; the old ones stay unchained.
    store.append(cell("d"))
    records, chain = store.read_chain()
    assert records == RECORDS + [cell("d")] and chain.unchained == 6 and not chain.chained
    assert json.loads(lines_of(store)[-1])["prev"] == line_digest(lines[-1])


def test_repair_then_append_continues_the_chain_from_the_last_good_line(store: RecordStore) -> None:
    good = store.path.read_bytes()
    with open(store.path, "ab") as handle:
        handle.write(chained_lines([cell("x")], prev=line_digest(lines_of(store)[-1]))[0][:-9])
    with pytest.raises(RecordError, match="line 7 \\(the last\\) is torn"):
        store.read()
    tail = store.repair()
    assert tail is not None and tail.line == 7 and store.path.read_bytes() == good
    store.append(cell("x"))
    records, chain = store.read_chain()
    assert records == RECORDS + [cell("x")] and chain.chained
    assert json.loads(lines_of(store)[-1])["prev"] == line_digest(lines_of(store)[-2])


def test_repair_leaves_a_whole_last_line_with_a_wrong_link(store: RecordStore) -> None:
    """A crash cuts a write short; it never writes a whole line with the wrong link. That is not repaired."""
    lines = lines_of(store)
    store.path.write_bytes(b"".join(lines[:-1] + [edit_k(lines[-2], 1)]))
    assert store.repair() is None
    with pytest.raises(RecordIntegrityError, match="line 6: chain broken"):
        store.read()


@pytest.mark.parametrize("kept", [3, 4, 5])
def test_a_write_cut_between_its_lines_is_moved_aside_whole(store: RecordStore, kept: int) -> None:
    """The second write (3 lines) cut after 0, 1 or 2 of its lines: the lines it left are one torn tail, so the
    cell they belong to is re-run rather than half recorded (a crash costs at most the cell in flight)."""
    lines = lines_of(store)
    store.path.write_bytes(b"".join(lines[:kept]))
    if kept > 3:
        with pytest.raises(RecordError, match=f"line {kept} \\(the last\\) is torn: its write was cut short"):
            store.read()
        tail = store.repair()
        assert tail is not None and tail.line == 4 and tail.side_file.read_bytes() == b"".join(lines[3:kept])
    else:
        assert store.repair() is None
    assert store.read() == RECORDS[:3]
    store.extend(RECORDS[3:])
    assert store.read() == RECORDS


def test_a_cut_write_with_a_torn_line_is_moved_aside_whole(store: RecordStore) -> None:
    lines = lines_of(store)
    store.path.write_bytes(b"".join(lines[:4]) + lines[4][:20])
    tail = store.repair()
    assert tail is not None and tail.line == 4
    assert tail.side_file.read_bytes() == lines[3] + lines[4][:20] + b"\n"
    assert store.read() == RECORDS[:3]


def test_append_links_to_a_last_line_longer_than_the_read_window(tmp_path: Path) -> None:
    store = RecordStore(tmp_path / "records.jsonl")
    big = Event(run_id="r", stage="context", kind="note", message="m", data={"x": "y" * 200_000}, at="t")
    store.extend([obs(0), big])
    store.append(cell())
    records, chain = store.read_chain()
    assert records == [obs(0), big, cell()] and chain.chained


def test_a_folder_or_unreadable_file_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "records.jsonl"
    folder.mkdir()
    with pytest.raises(RecordError, match="records.jsonl: is a folder, not a file \\(R23\\)"):
        RecordStore(folder).read()
    if os.geteuid() != 0:  # root reads anything
        path = tmp_path / "locked.jsonl"
        path.write_bytes(b"")
        path.chmod(0)
        with pytest.raises(RecordError, match="cannot read"):
            RecordStore(path).read()


def test_an_empty_file_is_an_empty_chain(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_bytes(b"")
    records, chain = RecordStore(path).read_chain()
    assert records == [] and chain.head is None and chain.chained
    RecordStore(path).append(cell())
    assert json.loads(path.read_bytes())["prev"] == GENESIS
