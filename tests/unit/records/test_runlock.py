"""One writer per run or sweep folder (remnant.runlock, R23): the lock is an OS lock between real processes,
released however its holder ends, never a file's mere existence, and never written outside the folder."""

from __future__ import annotations

import errno
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lock_holders import holding, probe, start_holder
from remnant.errors import ConfigError, RecordError
from remnant.runlock import LOCK_FILE, FolderInUse, acquire, held, release


def test_a_second_process_is_refused_with_the_holder_named(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    with held(run, purpose="remnant assess") as lock:
        written = json.loads((run / LOCK_FILE).read_text())
        assert written == {
            "pid": os.getpid(),
            "host": lock.holder.host,
            "command": lock.holder.command,
            "since": lock.holder.since,
        }
        refusal = probe(run)
        assert refusal is not None
        assert refusal.startswith(f"{run}: in use by another remnant process (pid {os.getpid()} on ")
        assert f"since {lock.holder.since}" in refusal and refusal.endswith("(R23)")
        assert "remnant assess" in refusal
        # flock belongs to an open file: the same process asking again is refused too (why `held` exists)
        with pytest.raises(FolderInUse):
            acquire(run, purpose="again")
    assert probe(run) is None


def test_released_after_a_normal_exit_and_after_an_exception(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    with held(run, purpose="remnant recompute"):
        assert (run / LOCK_FILE).is_file()
    assert not (run / LOCK_FILE).exists() and run.is_dir()
    assert probe(run) is None
    with pytest.raises(KeyError), held(run, purpose="remnant recompute"):
        assert probe(run) is not None
        raise KeyError("a bug mid-run")
    assert not (run / LOCK_FILE).exists()
    assert probe(run) is None


def test_a_folder_made_for_the_lock_goes_again_only_when_nothing_was_written(tmp_path: Path) -> None:
    fresh = tmp_path / "a" / "sweep"
    with held(fresh, purpose="remnant sweep run"):
        assert fresh.is_dir()
    assert not fresh.exists()  # a refused or failed first run leaves no folder behind
    with held(fresh, purpose="remnant sweep run"):
        (fresh / "plan.json").write_text("{}")
    assert (fresh / "plan.json").read_text() == "{}" and not (fresh / LOCK_FILE).exists()
    with pytest.raises(ConfigError, match="no such folder"):
        acquire(tmp_path / "absent", purpose="remnant recompute", create=False)
    assert not (tmp_path / "absent").exists()


def test_a_killed_holder_blocks_nobody_and_its_stale_holder_is_replaced(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    holder = start_holder(run)
    assert probe(run) is not None
    os.kill(holder.pid, signal.SIGKILL)
    holder.proc.wait()
    holder.stop()
    stale = json.loads((run / LOCK_FILE).read_text())
    assert stale["pid"] == holder.pid  # the file is left, naming a dead process: it is not the lock
    with held(run, purpose="remnant assess") as lock:
        assert json.loads((run / LOCK_FILE).read_text())["pid"] == os.getpid() == lock.holder.pid


def test_a_lock_file_of_garbage_from_no_live_process_blocks_nobody(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / LOCK_FILE).write_bytes(b"\xff\x00not json" * 1000)
    with held(run, purpose="remnant assess"):
        assert json.loads((run / LOCK_FILE).read_text())["pid"] == os.getpid()


def test_a_holder_that_names_itself_in_control_characters_still_gives_one_line(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    forged = json.dumps(
        {"pid": 7, "host": "h\nx", "command": "\x1b[2Jrm -rf /\n" * 50, "since": "now\r"}
    ).encode()
    with holding(run, garbage=forged):
        with pytest.raises(FolderInUse) as caught:
            acquire(run, purpose="remnant assess")
        text = str(caught.value)
        assert "\n" not in text and "\r" not in text and "\x1b" not in text
        assert "pid 7 on h?x" in text and len(text) < 600
    with holding(run, garbage=b"\x00{not json"), pytest.raises(FolderInUse, match="has not named itself"):
        acquire(run, purpose="remnant assess")


@pytest.mark.parametrize("kind", ["symlink", "dangling-symlink", "hardlink", "folder", "fifo"])
def test_the_lock_never_follows_a_planted_lock_file_out_of_the_folder(tmp_path: Path, kind: str) -> None:
    run, outside = tmp_path / "run", tmp_path / "outside.txt"
    run.mkdir()
    lock = run / LOCK_FILE
    if kind != "dangling-symlink":
        outside.write_text("precious\n")
    if kind in ("symlink", "dangling-symlink"):
        lock.symlink_to(outside)
    elif kind == "hardlink":
        os.link(outside, lock)
    elif kind == "folder":
        lock.mkdir()
    else:
        os.mkfifo(lock)
    with pytest.raises(RecordError) as caught:
        acquire(run, purpose="remnant assess")
    assert str(lock) in str(caught.value) and str(caught.value).endswith("(R23)")
    if kind == "dangling-symlink":
        assert not outside.exists()  # not created through the link
    else:
        assert outside.read_text() == "precious\n"


def test_wait_waits_for_the_holder_then_takes_the_lock(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    said: list[str] = []
    holder = start_holder(run, seconds=1.0)
    try:
        start = time.monotonic()
        with held(run, purpose="remnant recompute", wait=True, say=said.append) as lock:
            assert holder.proc.poll() is not None or time.monotonic() - start > 0.5
            assert json.loads((run / LOCK_FILE).read_text())["pid"] == os.getpid() == lock.holder.pid
    finally:
        holder.stop()
    assert len(said) == 1 and said[0].startswith(f"waiting for {run}: ") and f"pid {holder.pid}" in said[0]


def test_a_waiter_on_a_released_file_locks_the_path_afresh(tmp_path: Path) -> None:
    """The holder unlinks its file on release; whoever was waiting on that file must not hold a lock nobody
    else can see, but lock the file now at the path."""
    run = tmp_path / "run"
    run.mkdir()
    first = acquire(run, purpose="first")
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(acquire(run, purpose="waiter", wait=True)))
    waiter.start()
    time.sleep(0.3)  # the waiter now blocks on the first holder's file
    release(first)
    waiter.join(timeout=30)
    (second,) = got
    assert isinstance(second, type(first))
    assert os.fstat(second.fd).st_ino == os.lstat(run / LOCK_FILE).st_ino
    with pytest.raises(FolderInUse):
        acquire(run, purpose="third")
    release(second)


def test_held_reuses_the_callers_lock_of_the_same_folder_only(tmp_path: Path) -> None:
    run, other = tmp_path / "run", tmp_path / "other"
    run.mkdir()
    other.mkdir()
    with held(run, purpose="remnant sweep run") as lock:
        with held(tmp_path / "." / "run", lock, purpose="x") as same:
            assert same is lock
        with pytest.raises(ValueError, match="not"), held(other, lock, purpose="x"):
            pass
        assert probe(run) is not None  # the inner block did not release the caller's lock
    with held(run, None, purpose="x"):
        assert probe(run) is not None
    assert probe(run) is None


@pytest.mark.parametrize(
    ("target", "error", "said"),
    [
        ("open", OSError(errno.EROFS, "Read-only file system"), "cannot open the folder's lock file"),
        ("flock", OSError(errno.ENOLCK, "No locks available"), "cannot lock the folder"),
    ],
    ids=["read-only-folder", "no-locks-filesystem"],
)
def test_a_folder_that_cannot_be_locked_is_one_line_naming_the_lock_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, error: OSError, said: str
) -> None:
    import fcntl

    run = tmp_path / "run"
    run.mkdir()
    real_open = os.open

    def failing_open(path: Any, *args: Any, **kwargs: Any) -> int:
        if str(path).endswith(LOCK_FILE):
            raise error
        return real_open(path, *args, **kwargs)

    def failing_flock(fd: int, operation: int) -> None:
        raise error

    if target == "open":
        monkeypatch.setattr(os, "open", failing_open)
    else:
        monkeypatch.setattr(fcntl, "flock", failing_flock)
    with pytest.raises(RecordError) as caught:
        acquire(run, purpose="remnant recompute")
    text = str(caught.value)
    assert text.startswith(f"{run / LOCK_FILE}: {said} ({error.strerror})") and text.endswith("(R23)")
