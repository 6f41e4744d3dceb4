"""One writer per run folder (remnant.runlock, R23), with two real processes: while another process holds a run
folder, ``remnant assess`` (fresh or ``--resume``) and ``remnant recompute`` exit 2 naming the folder and the
holder and leave every file as it was; ``--wait`` waits for it instead; and each command holds the lock itself
for its whole run, so a second one can never get in between its first check and its last write."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from records_fixtures import copy_run

from lock_holders import holding, probe
from remnant.cli import main
from remnant.runlock import LOCK_FILE


def _snapshot(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and p.name != LOCK_FILE}


def _config(chained_run: Path) -> Path:
    return chained_run.parent / "config.toml"  # records_fixtures.assess_once wrote it beside the run


@pytest.mark.parametrize("resume", [True, False], ids=["resume", "fresh"])
def test_assess_into_a_run_in_use_is_refused_and_changes_nothing(
    chained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], resume: bool
) -> None:
    run = copy_run(chained_run, tmp_path / "run")
    before = _snapshot(run)
    argv = ["assess", str(_config(chained_run)), "--out", str(run), "--quiet"] + (
        ["--resume"] if resume else []
    )
    with holding(run) as holder:
        code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(
        f"remnant assess: error: {run}: in use by another remnant process (pid {holder.pid} on "
    )
    assert "`remnant assess" in err and "since " in err and err.rstrip().endswith("(R23)")
    assert len(err.strip().splitlines()) == 1
    assert _snapshot(run) == before  # records.jsonl, statement, manifest: byte for byte


def test_recompute_of_a_run_in_use_is_refused_by_the_real_command(chained_run: Path, tmp_path: Path) -> None:
    run = copy_run(chained_run, tmp_path / "run")
    before = _snapshot(run)
    with holding(run) as holder:
        done = subprocess.run(
            [sys.executable, "-m", "remnant.cli", "recompute", str(run)],
            capture_output=True,
            text=True,
            env=dict(os.environ),
        )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"remnant recompute: error: {run}: in use by another remnant process")
    assert f"(pid {holder.pid} on " in done.stderr and "(R23)" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert _snapshot(run) == before


def test_recompute_wait_waits_for_the_holder(
    chained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy_run(chained_run, tmp_path / "run")
    statement = (run / "statement.json").read_bytes()
    with holding(run, seconds=1.0) as holder:
        code = main(["recompute", str(run), "--no-reports", "--wait"])
        assert holder.proc.poll() is not None  # the holder had let go before recompute got the lock
    assert code == 0, capsys.readouterr().err
    assert (run / "statement.json").read_bytes() == statement
    assert not (run / LOCK_FILE).exists()


class Crash(Exception):
    """What a test raises in the middle of a command."""


def _probing(folder: Path, seen: list[str | None], then: Any) -> Any:
    def probed(*args: Any, **kwargs: Any) -> Any:
        seen.append(probe(folder))
        return then(*args, **kwargs)

    return probed


def test_assess_holds_the_lock_from_its_first_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chained_run: Path
) -> None:
    from remnant.assess import run as run_module
    from remnant.config import load_config
    from remnant.prereg import freeze

    run = tmp_path / "run"
    cfg = load_config(_config(chained_run))
    freeze(cfg, run)
    seen: list[str | None] = []

    def stop(*args: Any, **kwargs: Any) -> Any:
        raise Crash("the process dies mid-run")

    monkeypatch.setattr(run_module, "_open_run", _probing(run, seen, stop))
    with pytest.raises(Crash):
        run_module.assess(cfg, run, session=run_module.Session(progress=False, log=lambda _: None))
    (refusal,) = seen
    assert refusal is not None and f"(pid {os.getpid()} on " in refusal
    assert probe(run) is None and not (run / LOCK_FILE).exists()  # released by the crash


def test_recompute_holds_the_lock_while_it_rewrites(
    chained_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from remnant.assess import recompute as recompute_module

    run = copy_run(chained_run, tmp_path / "run")
    seen: list[str | None] = []
    from remnant.assess.finalize import finalize

    monkeypatch.setattr(recompute_module, "finalize", _probing(run, seen, finalize))
    recompute_module.recompute(run, reports=False)
    (refusal,) = seen
    assert refusal is not None and f"(pid {os.getpid()} on " in refusal
    assert probe(run) is None


def test_a_deviation_is_not_recorded_into_a_run_in_use(chained_run: Path, tmp_path: Path) -> None:
    """remnant.prereg.record_deviation (what ``remnant study deviation`` calls) appends to the chained
    deviations.jsonl of the folder: one writer there too."""
    from remnant.prereg import record_deviation
    from remnant.runlock import FolderInUse

    run = copy_run(chained_run, tmp_path / "run")
    with holding(run) as holder, pytest.raises(FolderInUse) as caught:
        record_deviation(run, "tau", 0.5, 0.6, "a reason", "after the first attack")
    assert f"{run}: in use" in str(caught.value) and f"pid {holder.pid}" in str(caught.value)
    assert not (run / "deviations.jsonl").exists()
