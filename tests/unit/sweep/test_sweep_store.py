"""The checkpoint store's meta and the pins that vouch for it (R23): ``meta.json`` is read strictly, and a stored
checkpoint is used only when sweep records pin what it holds — the store's own word never suffices. No model is
trained here: metas and records are written by hand, as a hostile store or a killed build leaves them."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from remnant.errors import IntegrityError, RecordError
from remnant.records import Event, RecordStore
from remnant.states.store import CheckpointStore, dump_meta
from remnant.sweep.pins import Pin, pins_in, read_pins, trust_store

RUN = "sweep:tiny"
TOKEN = "ab" * 16


def _key(n: int) -> str:
    return f"{n:064x}"


def _digest(n: int) -> str:
    return f"{n:064x}"[::-1]


def _meta(key: str, *, records: Path | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "key": key,
        "job": "j" * 64,
        "checkpoint": "final",
        "parent": None,
        "model": "target-full-s0",
        "status": "ok",
        "weights_digest": _digest(1),
        "format": "delta",
    }
    if records is not None:
        meta["built_by"] = {"records": str(records), "run": TOKEN}
    meta.update(extra)
    return meta


def _store(root: Path, metas: list[dict[str, Any]]) -> CheckpointStore:
    store = CheckpointStore(root)
    for meta in metas:
        folder = store.folder(meta["key"])
        folder.mkdir(parents=True)
        (folder / "meta.json").write_text(json.dumps(meta))
    return store


def _pin_event(pins: dict[str, Pin]) -> Event:
    return Event(
        run_id=RUN,
        stage="build",
        kind="stage_finished",
        data={"pins": {k: v.model_dump(mode="json") for k, v in pins.items()}},
    )


OK1 = Pin(status="ok", weights_digest=_digest(1))


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"format": "zip"}, "format"),
        (
            {"format": "lora", "lora": {"rank": 4.5, "alpha": 8.0, "targets": "all-linear", "seed": 0}},
            "lora.rank",
        ),
        (
            {"format": "lora", "lora": {"rank": "4", "alpha": 8.0, "targets": "all-linear", "seed": 0}},
            "lora.rank",
        ),
        (
            {"format": "lora", "lora": {"rank": 4, "alpha": 8.0, "targets": "all-linear", "seed": True}},
            "lora.seed",
        ),
        ({"colour": "blue"}, "colour"),
        ({"weights_digest": "not-a-digest"}, "weights_digest"),
        ({"status": "fine"}, "status"),
    ],
)
def test_a_malformed_meta_is_refused_naming_the_file_and_the_field(
    tmp_path: Path, change: dict[str, Any], field: str
) -> None:
    store = _store(tmp_path, [_meta(_key(1), **change)])
    with pytest.raises(RecordError) as caught:
        store.meta(_key(1))
    text = str(caught.value)
    assert str(store.folder(_key(1)) / "meta.json") in text and f"'{field}" in text and "(R23)" in text


def test_a_meta_that_contradicts_itself_is_refused(tmp_path: Path) -> None:
    for bad in (
        _meta(_key(1), weights_digest=None),  # ok without its digest
        _meta(_key(2), status="diverged", reason="loss"),  # diverged, yet with a format
        _meta(_key(3), format="lora"),  # lora without its table
        _meta(_key(6), format="full"),  # a whole saved state without what it was built as
    ):
        store = _store(tmp_path / bad["key"][-1], [bad])
        with pytest.raises(RecordError, match="R23"):
            store.meta(bad["key"])
    with pytest.raises(RecordError, match="meta being written"):
        dump_meta(_meta(_key(4), format="zip"))  # a writer cannot store what the reader refuses
    good = _store(tmp_path / "good", [_meta(_key(5))]).meta(_key(5))
    assert (good.status, good.format, good.state) == ("ok", "delta", None)


def test_a_meta_filed_under_another_key_is_refused(tmp_path: Path) -> None:
    store = _store(tmp_path, [_meta(_key(1))])
    shutil.move(store.folder(_key(1)), store.folder(_key(2)))
    with pytest.raises(RecordError, match="not the meta of checkpoint"):
        store.meta(_key(2))


def test_pins_are_read_from_build_events_and_a_key_pinned_twice_differently_is_refused() -> None:
    other = Pin(status="ok", weights_digest=_digest(2))
    note = Event(run_id=RUN, stage="removal", kind="note", data={"pins": {_key(9): other.model_dump()}})
    assert pins_in([_pin_event({_key(1): OK1}), note, _pin_event({_key(1): OK1})], "r") == {_key(1): OK1}
    with pytest.raises(IntegrityError, match="pinned to two different weights"):
        pins_in([_pin_event({_key(1): OK1}), _pin_event({_key(1): other})], "r")
    bad = Event(run_id=RUN, stage="build", kind="note", data={"pins": {_key(1): {"status": "ok", "x": 1}}})
    with pytest.raises(RecordError, match="R23"):
        pins_in([bad], "r")


def test_own_pins_are_trusted_only_while_the_store_agrees(tmp_path: Path) -> None:
    records = RecordStore(tmp_path / "sweep" / "records.jsonl")
    records.append(_pin_event({_key(1): OK1}))
    store = _store(tmp_path / "store", [_meta(_key(1), records=records.path)])
    assert trust_store([_key(1)], store, records, RUN, say=lambda m: None) == {_key(1): OK1}
    # the delta rewritten and its meta's digest recomputed: the records still pin the built weights
    (store.folder(_key(1)) / "meta.json").write_text(json.dumps(_meta(_key(1), weights_digest=_digest(7))))
    with pytest.raises(IntegrityError) as caught:
        trust_store([_key(1)], store, records, RUN, say=lambda m: None)
    assert str(store.folder(_key(1))) in str(caught.value) and "R23" in str(caught.value)


def test_a_fresh_sweep_adopts_the_pin_of_the_sweep_that_built_a_checkpoint_and_records_it(
    tmp_path: Path,
) -> None:
    builder = RecordStore(tmp_path / "a" / "records.jsonl")
    builder.append(_pin_event({_key(1): OK1}))
    store = _store(tmp_path / "store", [_meta(_key(1), records=builder.path)])
    fresh = RecordStore(tmp_path / "b" / "records.jsonl")
    said: list[str] = []
    assert trust_store([_key(1)], store, fresh, RUN, say=said.append) == {_key(1): OK1}
    assert read_pins(fresh.path) == {_key(1): OK1} and said  # pinned in its own records from now on
    (note,) = fresh.read()
    assert isinstance(note, Event) and note.data["pinned_by"] == {_key(1): str(builder.path)}
    # the builder's pin disagrees with the store: refused, naming both
    (store.folder(_key(1)) / "meta.json").write_text(
        json.dumps(_meta(_key(1), records=builder.path, weights_digest=_digest(7)))
    )
    with pytest.raises(IntegrityError, match="pin weights"):
        trust_store([_key(1)], store, RecordStore(tmp_path / "c" / "records.jsonl"), RUN, say=lambda m: None)


def test_a_stored_checkpoint_nothing_pins_is_not_trusted(tmp_path: Path) -> None:
    """Left out of the trusted pins, so the task that needs it builds it again: a build killed before its event
    (built_by names this sweep), a builder whose records are gone or torn, a store from before pins."""
    own = RecordStore(tmp_path / "own" / "records.jsonl")
    own.append(Event(run_id=RUN, stage="build", kind="note"))
    torn = tmp_path / "torn" / "records.jsonl"
    torn.parent.mkdir()
    torn.write_text('{"entry_type": "event"')
    store = _store(
        tmp_path / "store",
        [
            _meta(_key(1), records=own.path),
            _meta(_key(2), records=tmp_path / "gone" / "records.jsonl"),
            _meta(_key(3), records=torn),
            _meta(_key(4)),
            _meta(_key(5), records=Path("relative/records.jsonl")),
        ],
    )
    keys = [_key(n) for n in range(1, 7)]  # key 6 is not stored at all
    assert trust_store(keys, store, own, RUN, say=lambda m: None) == {}
    assert len(own.read()) == 1  # nothing adopted, nothing appended


def _model_folder(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_a_file_rewritten_in_place_with_its_mtime_restored_gets_a_new_identity(
    tmp_path: Path, tiny_llama_dir: Path
) -> None:
    """The existing-pool digest cache keys on inode and ctime too: size and mtime can be put back by hand."""
    from remnant.sweep.prepare import file_tag, folder_digest

    folder = _model_folder(tiny_llama_dir, tmp_path / "m")
    cache: dict[str, Any] = {}
    before = folder_digest(folder, cache)
    weights = folder / "model.safetensors"
    stat = weights.stat()
    data = bytearray(weights.read_bytes())
    data[-5] ^= 0x01  # same size, other content
    time.sleep(0.02)  # the kernel's ctime clock is coarse
    with weights.open("r+b") as handle:  # in place: same inode
        handle.write(bytes(data))
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    after = weights.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (stat.st_ino, stat.st_size, stat.st_mtime_ns)
    assert file_tag(weights) not in cache
    assert folder_digest(folder, cache) != before
    assert folder_digest(folder, cache) == folder_digest(folder, {})  # the cache gives what hashing gives


def test_a_build_lock_that_is_a_link_is_never_followed_out_of_the_store(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "store")
    outside = tmp_path / "outside.txt"
    outside.write_text("mine", encoding="utf-8")
    (tmp_path / "store" / "locks").mkdir(parents=True)
    (tmp_path / "store" / "locks" / f"{'a' * 64}.lock").symlink_to(outside)
    with pytest.raises(RecordError, match="symbolic link"), store.lock("a" * 64):
        pass
    assert outside.read_text(encoding="utf-8") == "mine"
    with store.lock("b" * 64):  # an ordinary key still locks
        assert (tmp_path / "store" / "locks" / f"{'b' * 64}.lock").is_file()
