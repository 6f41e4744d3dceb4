"""A sweep whose checkpoint store is on object storage (``[resources] store = "s3://…"``, R23), against moto's S3
server started by the test: it builds, seals and reads its checkpoints through the store's URI and writes the
records a local store gives, and a rerun reuses every checkpoint and cell."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sweep_fixtures import comparable, tiny_spec, write_spec

from fixtures_s3 import BUCKET, _moto_server, s3  # noqa: F401 - fixtures
from remnant.cli import main
from remnant.records import RECORDS_FILE


def test_a_sweep_on_an_s3_store_writes_the_records_of_a_local_one(
    s3: Any,  # noqa: F811 - the fixture
    tmp_path: Path,
    tiny_llama_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REMNANT_HOME", str(tmp_path / "home"))  # where the store's local cache goes
    uri = f"s3://{BUCKET}/sweeps"
    text = tiny_spec(tiny_llama_dir, tmp_path / "store")
    local = write_spec(tmp_path / "local", text)
    remote = write_spec(tmp_path / "remote", text.replace(str(tmp_path / "store"), uri))
    assert main(["sweep", "run", str(local), "--out", str(tmp_path / "a"), "--quiet"]) == 0
    assert main(["sweep", "run", str(remote), "--out", str(tmp_path / "b"), "--quiet"]) == 0
    assert comparable(tmp_path / "a" / RECORDS_FILE) == comparable(tmp_path / "b" / RECORDS_FILE)
    objects = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]]
    sealed = {k.split("/")[2] for k in objects if k.endswith("/seal.json")}
    assert sealed == {p.name for p in (tmp_path / "store" / "ckpt").iterdir()} and len(sealed) == 3
    assert not any("/locks/" in k for k in objects)
    before = _cells(tmp_path / "b" / RECORDS_FILE)
    assert main(["sweep", "run", str(remote), "--out", str(tmp_path / "b"), "--quiet"]) == 0
    assert _cells(tmp_path / "b" / RECORDS_FILE) == before > 0  # every cell reused, nothing rebuilt


def _cells(path: Path) -> int:
    from remnant.records import CellRecord, RecordStore

    return sum(isinstance(r, CellRecord) for r in RecordStore(path).read())
