"""One writer per run folder and per sweep folder: an OS file lock held for as long as a process writes it (R23).

``records.jsonl`` is append-only and hash-chained (R23): each line's ``prev`` is the digest of the line before
it, ``--resume`` skips the cells already recorded, and a torn tail is moved aside before the next append. Two
processes appending to one folder at once would each chain onto a tail the other is about to extend (a forked
chain), both compute the same cells (duplicated cells), and one could "repair" the other's write in flight. So
every command that appends to a folder's records or rewrites its statement and manifest (``assess``,
``recompute``, ``sweep run``, ``study deviation``) holds the folder's lock for its whole run, taken in the Python
API it calls, so a script is held to it as the command line is. A second process on a folder in use is refused at
once (:class:`FolderInUse`, exit 2) with the holder named — pid, host, command and since when — or, given
``wait=True`` (``--wait``), waits for it.

The lock is ``flock(2)`` on :data:`LOCK_FILE` inside the folder, not the file's existence: the kernel releases it
when its process exits, however it exits, so a lock file left by a killed process blocks nobody; only the holder
it names is stale, and the next holder overwrites it. The holder is written into the lock file through the
locked descriptor, for a refused process to read. On release the file is unlinked while still locked; a process
that was waiting on the unlinked file finds the path gone (or another file there) and locks the path again, so
two holders never hold two different files. A folder the lock itself created for a command that then wrote
nothing is removed again (only when empty), so a refused or failed first run leaves no folder behind.

The lock file is claimant ground like every file in a run folder: it is opened without following a symlink, and
a lock file that is a symlink, not a regular file, or hard-linked elsewhere is refused (:class:`RecordError`
naming it), so writing the holder never writes outside the folder. Only the writer holds the lock: in a Ray
sweep the driver holds it and the workers, which never write records, never take it. ``flock`` works across
processes on one machine and on local filesystems; on a network filesystem it is only as good as the server's
lock support. Pure: stdlib only, so the pure core may use it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import json
import os
import shlex
import socket
import stat
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from remnant.errors import ConfigError, RecordError

#: The lock file inside a run or sweep folder.
LOCK_FILE = ".remnant.lock"
#: What two writers would break: the append-only, chained records of the folder.
REQUIREMENT = "R23"
#: Bytes of holder information read back (a hostile lock file cannot make a refusal read gigabytes).
HOLDER_BYTES = 4096
#: Longest command shown in a refusal; the holder's full argv is rarely needed to recognise it.
COMMAND_CHARS = 200


class FolderInUse(RecordError):
    """Another process holds the folder's lock (R23): it writes the folder now, so this one must not."""


@dataclass(frozen=True)
class Holder:
    """The process holding a folder's lock, as written into the lock file."""

    pid: int
    host: str
    command: str
    since: str

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}, `{self.command}`, since {self.since}"

    def to_json(self) -> str:
        return json.dumps(
            {"pid": self.pid, "host": self.host, "command": self.command, "since": self.since}, sort_keys=True
        )


@dataclass(frozen=True)
class FolderLock:
    """A held lock: the folder, its lock file, the descriptor holding ``flock`` and who holds it."""

    folder: Path
    path: Path
    fd: int
    holder: Holder
    created_folder: bool

    def covers(self, folder: Path) -> bool:
        """Whether this lock is the lock of ``folder`` (the same folder, however it is spelt)."""
        try:
            return os.path.samefile(self.folder, folder)
        except OSError:
            return False


def _printable(text: str, limit: int) -> str:
    """``text`` on one line, control characters shown as ``?``, at most ``limit`` characters: holder
    information comes from a file in a claimant's folder and goes into a one-line message."""
    clean = "".join(ch if ch.isprintable() else "?" for ch in text)
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"


def this_process(purpose: str) -> Holder:
    """The holder information of this process: ``purpose`` (e.g. ``remnant assess``) when the command line does
    not say it (a script calling the API), with the command line."""
    argv = [Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python", *sys.argv[1:]]
    command = shlex.join(argv)
    if purpose and not command.startswith("remnant "):
        command = f"{purpose} via {command}"
    since = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Holder(
        os.getpid(), _printable(socket.gethostname(), 100), _printable(command, COMMAND_CHARS), since
    )


def read_holder(fd: int) -> Holder | None:
    """The holder a lock file names, or None when it names none readable (being written, or not remnant's)."""
    try:
        raw = os.pread(fd, HOLDER_BYTES, 0)
        data = json.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    pid, host, command, since = (data.get(k) for k in ("pid", "host", "command", "since"))
    if (
        not isinstance(pid, int)
        or isinstance(pid, bool)
        or not all(isinstance(v, str) for v in (host, command, since))
    ):
        return None
    return Holder(
        pid,
        _printable(str(host), 100),
        _printable(str(command), COMMAND_CHARS),
        _printable(str(since), 40),
    )


def open_lock_file(path: Path) -> int:
    """Open (creating) the lock file without following a symlink; refuse anything but a file of its own."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RecordError(
                f"{path}: the folder's lock file is a symbolic link; remnant writes its lock only inside the "
                "folder (remove it)",
                requirement=REQUIREMENT,
            ) from None
        if exc.errno in (errno.EISDIR, errno.ENXIO):
            raise RecordError(
                f"{path}: the folder's lock file is not a regular file (remove it)", requirement=REQUIREMENT
            ) from None
        if isinstance(exc, FileNotFoundError):
            raise  # the folder went meanwhile: the caller makes it again or says it is missing
        raise RecordError(
            f"{path}: cannot open the folder's lock file ({exc.strerror}); a folder remnant writes must be "
            "writable",
            requirement=REQUIREMENT,
        ) from None
    info = os.fstat(fd)
    problem = (
        "is not a regular file"
        if not stat.S_ISREG(info.st_mode)
        else "is hard-linked to another file"
        if info.st_nlink > 1
        else None
    )
    if problem is not None:
        os.close(fd)
        raise RecordError(
            f"{path}: the folder's lock file {problem}; remnant writes its lock only inside the folder (remove it)",
            requirement=REQUIREMENT,
        )
    return fd


def _is_path(fd: int, path: Path) -> bool:
    """Whether ``fd`` is still the file at ``path`` (the holder before us unlinks it on release)."""
    mine = os.fstat(fd)
    try:
        there = os.lstat(path)
    except FileNotFoundError:
        return False
    return (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino)


def _busy(folder: Path, fd: int) -> FolderInUse:
    holder = read_holder(fd)
    who = holder.describe() if holder is not None else "a process that has not named itself yet"
    return FolderInUse(
        f"{folder}: in use by another remnant process ({who}); its records are append-only and chained, so a "
        "second writer is refused rather than interleaved: wait for it to finish, or pass --wait",
        requirement=REQUIREMENT,
    )


def _ensure_folder(folder: Path, create: bool) -> bool:
    """Make ``folder`` when ``create`` and it is absent; True when this call made it."""
    if folder.is_dir():
        return False
    if folder.exists() or folder.is_symlink():
        raise ConfigError(f"{folder}: is not a folder", requirement=REQUIREMENT)
    if not create:
        raise ConfigError(f"{folder}: no such folder", requirement=REQUIREMENT)
    try:
        folder.mkdir(parents=True)
    except FileExistsError:  # another process made it meanwhile
        return False
    return True


def _try_lock(fd: int, path: Path) -> bool:
    """``flock`` without waiting: True when taken, False when another process holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as exc:  # ENOLCK: a filesystem without locks
        raise RecordError(
            f"{path}: cannot lock the folder ({exc.strerror}); one writer per folder needs a filesystem with file "
            "locks",
            requirement=REQUIREMENT,
        ) from None
    return True


def _lock_fd(folder: Path, path: Path, *, wait: bool, say: Callable[[str], None] | None) -> int:
    """A descriptor of the file at ``path`` holding ``flock`` (module docstring)."""
    announced = False
    for _ in range(1000):  # each turn means another holder released meanwhile; never endless
        fd = open_lock_file(path)
        try:
            if not _try_lock(fd, path):
                if not wait:
                    raise _busy(folder, fd)
                if say is not None and not announced:
                    say(f"waiting for {folder}: {_busy(folder, fd)}")
                    announced = True
                fcntl.flock(fd, fcntl.LOCK_EX)
            if _is_path(fd, path):
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    raise RecordError(f"{path}: the lock changed hands 1000 times while waiting", requirement=REQUIREMENT)


def _lock_in(
    folder: Path, create: bool, *, wait: bool, say: Callable[[str], None] | None
) -> tuple[int, bool]:
    """The locked descriptor of ``folder``'s lock file, and whether ``folder`` was made for it."""
    created = False
    for _ in range(3):
        created = _ensure_folder(folder, create) or created
        try:
            return _lock_fd(folder, folder / LOCK_FILE, wait=wait, say=say), created
        except FileNotFoundError:
            continue  # the folder went between its check and the open (a refused first run cleaning up)
        except BaseException:
            _remove_if_empty(folder, created)
            raise
    raise RecordError(f"{folder}: removed again each time its lock was taken", requirement=REQUIREMENT)


def acquire(
    folder: str | Path,
    *,
    purpose: str,
    wait: bool = False,
    say: Callable[[str], None] | None = None,
    create: bool = True,
) -> FolderLock:
    """Take ``folder``'s lock (module docstring); :func:`release` it, or use :func:`hold`.

    ``create`` makes an absent folder (a new sweep folder); without it an absent folder is a ConfigError.
    :class:`FolderInUse` (exit 2) names the holder when another process has the folder and ``wait`` is false.
    """
    where = Path(folder)
    fd, created = _lock_in(where, create, wait=wait, say=say)
    lock = FolderLock(where, where / LOCK_FILE, fd, this_process(purpose), created)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, lock.holder.to_json().encode("utf-8") + b"\n", 0)
    except BaseException:
        release(lock)
        raise
    return lock


def _remove_if_empty(folder: Path, created: bool) -> None:
    if created:
        with contextlib.suppress(OSError):  # not empty (something was written) or already gone: keep it
            folder.rmdir()


def release(lock: FolderLock) -> None:
    """Unlink the lock file while still holding it, then let go (module docstring)."""
    try:
        if _is_path(lock.fd, lock.path):
            lock.path.unlink()
    except OSError:
        pass  # a folder made read-only meanwhile: the file stays, and closing still releases the lock
    finally:
        os.close(lock.fd)
    _remove_if_empty(lock.folder, lock.created_folder)


@contextlib.contextmanager
def held(
    folder: str | Path,
    lock: FolderLock | None = None,
    *,
    purpose: str,
    wait: bool = False,
    say: Callable[[str], None] | None = None,
    create: bool = True,
) -> Iterator[FolderLock]:
    """The caller's ``lock`` when it already holds ``folder`` (a command holding one lock across several API
    calls), else ``folder``'s lock taken for the block, released on a normal exit and on an exception alike.
    flock is per open file, so taking it a second time in the same process would refuse the process itself."""
    if lock is not None:
        if not lock.covers(Path(folder)):
            raise ValueError(f"the lock held is {lock.folder}'s, not {folder}'s")
        yield lock
        return
    taken = acquire(folder, purpose=purpose, wait=wait, say=say, create=create)
    try:
        yield taken
    finally:
        release(taken)


__all__ = [
    "LOCK_FILE",
    "REQUIREMENT",
    "FolderInUse",
    "FolderLock",
    "Holder",
    "acquire",
    "held",
    "open_lock_file",
    "read_holder",
    "release",
    "this_process",
]
