"""The checkpoint store on object storage (R23), against moto's S3 server started by the test: a checkpoint is
uploaded and sealed, read back by another worker through its own cache, refused when an object changed after the
seal, built by exactly one of several concurrent builders, and a lease its holder left behind is taken over only
once it goes stale."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fixtures_s3 import BUCKET
from remnant.errors import ConfigError, IntegrityError, RecordError
from remnant.states.remote import LeaseTiming
from remnant.states.store import CheckpointStore, dump_meta

URI = f"s3://{BUCKET}/pool"
KEY = f"{7:064x}"
PREFIX = f"pool/ckpt/{KEY}"
FAST = LeaseTiming(stale=30.0, beat=0.2, poll=0.05)


def _meta(key: str, **extra: Any) -> dict[str, Any]:
    meta = {"key": key, "job": "j" * 64, "checkpoint": "final", "parent": None, "model": "target-full-s0"}
    return {**meta, "status": "ok", "weights_digest": "d" * 64, "format": "delta", **extra}


def _build(key: str, payload: bytes) -> Callable[[Path], dict[str, Any]]:
    def build(tmp: Path) -> dict[str, Any]:
        (tmp / "delta.safetensors").write_bytes(payload)
        return _meta(key)

    return build


def _objects(s3: Any) -> list[str]:
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", []))


def test_a_checkpoint_is_sealed_on_s3_and_read_back_through_another_workers_cache(
    s3: Any, tmp_path: Path
) -> None:
    writer = CheckpointStore(URI, cache=tmp_path / "writer")
    assert not writer.has(KEY) and writer.root == tmp_path / "writer"
    writer.put(KEY, _build(KEY, b"weights-1"))
    assert writer.has(KEY)
    assert _objects(s3) == [f"{PREFIX}/delta.safetensors", f"{PREFIX}/meta.json", f"{PREFIX}/seal.json"]
    seal = json.loads(s3.get_object(Bucket=BUCKET, Key=f"{PREFIX}/seal.json")["Body"].read())
    assert seal["files"]["delta.safetensors"] == {
        "sha256": hashlib.sha256(b"weights-1").hexdigest(),
        "size": 9,
    }
    reader = CheckpointStore(URI, cache=tmp_path / "reader")  # another worker: nothing of it on its disk
    assert reader.meta(KEY).weights_digest == "d" * 64 and reader.where(KEY) == f"{URI}/ckpt/{KEY}"
    folder = reader.local(KEY)
    assert folder == tmp_path / "reader" / "ckpt" / KEY
    assert (folder / "delta.safetensors").read_bytes() == b"weights-1"
    other = f"{8:064x}"
    reader.put(
        other, lambda tmp: _meta(other, status="diverged", weights_digest=None, format=None, reason="nan")
    )
    assert writer.meta(other).status == "diverged" and writer.meta(other).reason == "nan"


def test_an_object_changed_after_the_seal_is_refused_by_its_digest(s3: Any, tmp_path: Path) -> None:
    CheckpointStore(URI, cache=tmp_path / "writer").put(KEY, _build(KEY, b"weights-1"))
    s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/delta.safetensors", Body=b"weights-2")
    fresh = CheckpointStore(URI, cache=tmp_path / "fresh")
    with pytest.raises(IntegrityError, match=r"delta\.safetensors: its bytes are not the ones its seal.*R23"):
        fresh.local(KEY)
    assert not fresh.folder(KEY).exists()  # nothing of a refused download is kept
    s3.put_object(
        Bucket=BUCKET, Key=f"{PREFIX}/meta.json", Body=dump_meta(_meta(KEY, weights_digest="e" * 64))
    )
    with pytest.raises(IntegrityError, match=r"meta\.json: its bytes are not the ones its seal.*R23"):
        fresh.meta(KEY)


def test_a_changed_or_linked_cache_copy_is_downloaded_again(s3: Any, tmp_path: Path) -> None:
    CheckpointStore(URI, cache=tmp_path / "writer").put(KEY, _build(KEY, b"weights-1"))
    reader = CheckpointStore(URI, cache=tmp_path / "reader")
    weights = reader.local(KEY) / "delta.safetensors"
    weights.write_bytes(b"weights-X")
    assert (reader.local(KEY) / "delta.safetensors").read_bytes() == b"weights-1"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"weights-1")
    weights.unlink()
    weights.symlink_to(elsewhere)  # the same bytes, through a link: never followed
    assert not (reader.local(KEY) / "delta.safetensors").is_symlink()


def test_a_seal_naming_anything_but_meta_and_safetensors_is_refused(s3: Any, tmp_path: Path) -> None:
    CheckpointStore(URI, cache=tmp_path / "writer").put(KEY, _build(KEY, b"weights-1"))
    seal = {
        "files": {"meta.json": {"sha256": "0" * 64, "size": 1}, "model.pkl": {"sha256": "0" * 64, "size": 1}}
    }
    s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/seal.json", Body=json.dumps(seal).encode())
    with pytest.raises(RecordError, match=r"seal\.json.*model\.pkl.*R23"):
        CheckpointStore(URI, cache=tmp_path / "reader").local(KEY)
    # a whole state's folder holds model files only: no pickle, no file outside it, no other folder
    for name in ("state/model.pkl", "state/../meta.json", "other/config.json", "state/sub/config.json"):
        seal["files"] = {"meta.json": seal["files"]["meta.json"], name: {"sha256": "0" * 64, "size": 1}}
        s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/seal.json", Body=json.dumps(seal).encode())
        with pytest.raises(RecordError, match=r"is not a file a checkpoint may hold.*R23"):
            CheckpointStore(URI, cache=tmp_path / "reader").local(KEY)


def test_of_concurrent_builders_of_one_state_exactly_one_builds(s3: Any, tmp_path: Path) -> None:
    built: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def builder(n: int) -> None:
        store = CheckpointStore(URI, cache=tmp_path / f"w{n}", timing=FAST)
        start.wait()
        try:
            with store.lock(KEY):  # what remnant.sweep.build does: check, under the lock, then build
                if not store.has(KEY):
                    built.append(n)
                    time.sleep(0.5)
                    store.put(KEY, _build(KEY, f"by {n}".encode()))
        except BaseException as exc:  # noqa: BLE001 - reported below, with the thread's result
            errors.append(exc)

    threads = [threading.Thread(target=builder, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == [] and len(built) == 1
    local = CheckpointStore(URI, cache=tmp_path / "reader").local(KEY)
    assert (local / "delta.safetensors").read_bytes() == f"by {built[0]}".encode()
    assert not any("/locks/" in k for k in _objects(s3))  # every lease released


def test_a_lease_left_by_a_dead_builder_is_taken_over_once_stale(s3: Any, tmp_path: Path) -> None:
    lease = f"pool/locks/{KEY}.lease"
    s3.put_object(Bucket=BUCKET, Key=lease, Body=b'{"holder": "dead"}')
    store = CheckpointStore(URI, cache=tmp_path / "w", timing=LeaseTiming(stale=1.5, beat=0.2, poll=0.1))
    began = time.monotonic()
    with store.lock(KEY):
        waited = time.monotonic() - began
        assert b"dead" not in s3.get_object(Bucket=BUCKET, Key=lease)["Body"].read()
    assert 1.0 <= waited < 20.0
    assert lease not in _objects(s3)


def test_a_lease_its_holder_renews_is_never_taken_over(s3: Any, tmp_path: Path) -> None:
    timing = LeaseTiming(stale=2.5, beat=0.2, poll=0.05)
    order: list[str] = []
    holding = threading.Event()

    def hold() -> None:
        with CheckpointStore(URI, cache=tmp_path / "h", timing=timing).lock(KEY):
            order.append("holder in")
            holding.set()
            time.sleep(4.5)  # longer than `stale`: only the renewals keep it
            order.append("holder out")

    thread = threading.Thread(target=hold)
    thread.start()
    assert holding.wait(30)
    with CheckpointStore(URI, cache=tmp_path / "w", timing=timing).lock(KEY):
        order.append("waiter in")
    thread.join(30)
    assert order == ["holder in", "holder out", "waiter in"]


def test_building_into_a_store_without_conditional_writes_is_refused() -> None:
    from remnant.states.remote import _S3Lease

    with pytest.raises(
        ConfigError, match=r"gs://b/p: building into this store needs a conditional write.*R23"
    ):
        _S3Lease("gs://b/p", "b/p/locks/x.lease", FAST)
