"""The one way remnant writes a file: whole or not at all (temp file beside it, fsync, rename; R23, R24).

Every file remnant writes (statements, envelopes, manifests, packs, reports, cached cells, keys, configs copied
into a run) goes through :func:`write_atomic`, so a crash leaves the old file or the new one, never half of
either, and every file gets the same mode (:data:`FILE_MODE`, readable by all: statements and reports are meant
to be read). The one exception is a private signing key, written with :data:`PRIVATE_MODE`.

Folders of files (a saved model, a training checkpoint) are built in a temp folder beside the target and put in
place with :func:`replace_dir`, which follows the same rule one level up.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

#: Mode of every file remnant writes (``rw-r--r--``).
FILE_MODE = 0o644
#: Mode of a folder remnant creates through :func:`replace_dir` (``rwxr-xr-x``).
DIR_MODE = 0o755
#: Mode of a private signing key (``rw-------``): the only file not readable by all.
PRIVATE_MODE = 0o600


def write_atomic(
    path: str | Path, data: bytes | str, *, mode: int = FILE_MODE, exclusive: bool = False
) -> Path:
    """Write ``data`` (bytes, or text as UTF-8) to ``path`` atomically; return the path.

    A temp file in the same folder is written, fsync'd and renamed over ``path``; the folder entry is fsync'd
    too. A ``path`` that is an existing folder is refused by the rename (IsADirectoryError), never clobbered.
    ``exclusive=True`` never replaces an existing file (FileExistsError), even one that appeared meanwhile
    (the temp file is hard-linked into place): what a frozen pre-registration needs (R14).
    """
    target = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        if exclusive:
            os.link(tmp, target)
            Path(tmp).unlink()
        else:
            os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(target.parent)
    return target


def replace_dir(target: str | Path, build: Callable[[Path], None]) -> Path:
    """Build a folder with ``build(tmp)`` in a temp folder beside ``target``, fsync its files, rename it in place.

    An existing ``target`` folder is replaced only after the new one is complete, so a crash leaves the old
    folder or the new one.
    """
    out = Path(target)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    old = out.parent / f".{out.name}.old"
    try:
        build(tmp)
        for file in tmp.rglob("*"):
            if file.is_file():
                os.chmod(file, FILE_MODE)
                with file.open("rb") as handle:
                    os.fsync(handle.fileno())
        os.chmod(tmp, DIR_MODE)  # mkdtemp makes it private; a cached model or checkpoint is meant to be read
        if out.exists():
            shutil.rmtree(old, ignore_errors=True)
            os.replace(out, old)
        os.replace(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fsync_dir(out.parent)
    return out


def fsync_dir(directory: str | Path) -> None:
    """Make a folder's entries durable (POSIX; a no-op where folders cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


__all__ = ["DIR_MODE", "FILE_MODE", "PRIVATE_MODE", "fsync_dir", "replace_dir", "write_atomic"]
