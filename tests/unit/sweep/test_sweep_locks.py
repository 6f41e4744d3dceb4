"""One writer per sweep folder (remnant.runlock, R23), with two real processes: while another process holds a
sweep folder, ``remnant sweep run`` (``--retry-failed`` too) exits 2 naming the folder and the holder and leaves
every file as it was; the driver holds the lock while the executor runs (workers, Ray's too, never take it), and
``prepare`` writes a sweep folder's inputs only under its lock."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sweep_fixtures import tiny_spec, write_spec

from lock_holders import holding, probe
from remnant.cli import main
from remnant.runlock import LOCK_FILE, FolderInUse, held


def _sweep_folder(tmp_path: Path, model_dir: Path) -> tuple[Path, Path]:
    """A spec and a sweep folder of that spec holding records (refused before anything reads them)."""
    spec = write_spec(tmp_path, tiny_spec(model_dir, tmp_path / "store"))
    out = tmp_path / "out"
    out.mkdir()
    (out / "spec.toml").write_bytes(spec.read_bytes())
    (out / "records.jsonl").write_bytes(b'{"entry_type":"event","prev":"0"}\n' * 3)
    return spec, out


def _files(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and p.name != LOCK_FILE}


@pytest.mark.parametrize("extra", [[], ["--retry-failed"]], ids=["run", "retry-failed"])
def test_sweep_run_into_a_folder_in_use_is_refused_and_changes_nothing(
    tmp_path: Path, tiny_llama_dir: Path, capsys: pytest.CaptureFixture[str], extra: list[str]
) -> None:
    spec, out = _sweep_folder(tmp_path, tiny_llama_dir)
    before = _files(out)
    with holding(out) as holder:
        code = main(["sweep", "run", str(spec), "--out", str(out), "--quiet", *extra])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(
        f"remnant sweep: error: {out}: in use by another remnant process (pid {holder.pid} "
    )
    assert err.rstrip().endswith("(R23)") and len(err.strip().splitlines()) == 1
    assert _files(out) == before


def test_prepare_writes_a_sweep_folders_inputs_only_under_its_lock(
    tmp_path: Path, tiny_llama_dir: Path
) -> None:
    from remnant.sweep.prepare import prepare

    spec, out = _sweep_folder(tmp_path, tiny_llama_dir)
    with holding(out) as holder, pytest.raises(FolderInUse, match=f"pid {holder.pid}"):
        prepare(spec, out=out)
    assert not (out / "plan.json").exists() and not (out / "pack").exists()
    with held(out, purpose="remnant sweep run") as lock:
        prepared = prepare(spec, out=out, lock=lock)  # the caller's lock, not a second one
        assert (out / "plan.json").is_file() and probe(out) is not None
    assert prepared.cells and probe(out) is None


class _ProbingExecutor:
    """An executor whose tasks, wherever they would run, find the folder's lock held by the driver."""

    name = "probe"

    def __init__(self, out: Path) -> None:
        self.out = out
        self.seen: list[str | None] = []

    def run(self, ws: Any, tasks: list[tuple[str, frozenset[str]]]) -> Iterator[tuple[str, Any]]:
        self.seen.append(probe(self.out))
        return iter(())


def test_the_driver_holds_the_lock_while_the_executor_runs(tmp_path: Path, tiny_llama_dir: Path) -> None:
    from remnant.sweep.driver import run_sweep
    from remnant.sweep.prepare import prepare

    spec = write_spec(tmp_path, tiny_spec(tiny_llama_dir, tmp_path / "store"))
    out = tmp_path / "out"
    prepared = prepare(spec, out=out)
    executor = _ProbingExecutor(out)
    summary = run_sweep(prepared, out, executor, say=lambda m: None)
    (refusal,) = executor.seen
    assert refusal is not None and f"(pid {os.getpid()} on " in refusal
    assert summary.computed == 0 and probe(out) is None
    with holding(out) as holder, pytest.raises(FolderInUse, match=f"pid {holder.pid}"):
        run_sweep(prepared, out, executor, say=lambda m: None)
    assert len(executor.seen) == 1  # refused before any task was handed out
