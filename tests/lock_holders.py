"""Other processes holding a run or sweep folder's lock (remnant.runlock), for the tests of one writer per folder.

:func:`start_holder` starts a real second process that takes the folder's lock (or, with ``garbage``, flocks the
lock file by hand and writes those bytes as its holder), says when it holds it, and holds it until
:meth:`Holder.stop` or ``seconds``. :func:`probe` asks a fresh process whether it can take a folder's lock: the
only way to see a lock from outside the process holding it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HOLDER = r"""
import fcntl, os, sys, time
from pathlib import Path
folder, ready, stop, seconds, garbage = sys.argv[1:6]
if garbage:
    fd = os.open(Path(folder) / ".remnant.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, bytes.fromhex(garbage))
else:
    from remnant.runlock import acquire
    lock = acquire(folder, purpose="remnant assess", create=False)
Path(ready).write_text(str(os.getpid()))
deadline = time.monotonic() + float(seconds)
while not Path(stop).exists() and time.monotonic() < deadline:
    time.sleep(0.02)
"""

PROBE = r"""
import sys
from remnant.runlock import FolderInUse, held
try:
    with held(sys.argv[1], purpose="probe", create=False):
        pass
except FolderInUse as exc:
    print(exc)
    sys.exit(3)
"""


@dataclass(frozen=True)
class Holder:
    """A second process holding a folder's lock until :meth:`stop` (or its time runs out)."""

    proc: subprocess.Popen[bytes]
    stop_file: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        """Let the lock go and reap the process."""
        self.stop_file.touch()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()


def start_holder(folder: Path, *, seconds: float = 60.0, garbage: bytes = b"") -> Holder:
    """A process holding ``folder``'s lock once this returns. Its ready and stop files sit beside ``folder``,
    never in it, so they change nothing the lock guards."""
    tag = f"{folder.name}-{time.monotonic_ns()}"
    ready, stop = folder.parent / f"holder-{tag}.ready", folder.parent / f"holder-{tag}.stop"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder), str(ready), str(stop), str(seconds), garbage.hex()],
        stderr=subprocess.PIPE,
    )
    holder = Holder(proc, stop)
    deadline = time.monotonic() + 60
    while not ready.exists():
        if proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr is not None else b""
            holder.stop()
            raise AssertionError(f"the holder exited {proc.returncode}: {err!r}")
        if time.monotonic() > deadline:
            holder.stop()
            raise AssertionError("the holder never took the lock")
        time.sleep(0.02)
    return holder


@contextlib.contextmanager
def holding(folder: Path, *, seconds: float = 60.0, garbage: bytes = b"") -> Iterator[Holder]:
    """:func:`start_holder` for a ``with`` block, stopped however the block ends."""
    holder = start_holder(folder, seconds=seconds, garbage=garbage)
    try:
        yield holder
    finally:
        holder.stop()


def probe(folder: Path) -> str | None:
    """The refusal a fresh process gets on ``folder``'s lock (naming the holder), or None when it took it."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(folder)], capture_output=True, text=True, env=dict(os.environ)
    )
    if done.returncode == 0:
        return None
    assert done.returncode == 3, done.stderr
    return done.stdout.strip()


__all__ = ["Holder", "holding", "probe", "start_holder"]
