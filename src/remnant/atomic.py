"""The one way remnant writes a file: whole or not at all (temp file beside it, fsync, rename; R23, R24).

Every file remnant writes (statements, envelopes, manifests, packs, reports, cached cells, keys, configs copied
into a run) goes through :func:`write_atomic`, so a crash leaves the old file or the new one, never half of
either, and every file gets the same mode (:data:`FILE_MODE`, readable by all: statements and reports are meant
to be read). The one exception is a private signing key, written with :data:`PRIVATE_MODE`.

Folders of files (a saved model, a training checkpoint) are built in a temp folder beside the target and put in
place with :func:`replace_dir`, which follows the same rule one level up. Records are appended with
:func:`append_durable` and cut back with :func:`truncate_durable`.

Nothing here writes through a symbolic link (R23): a target that is a link is refused, never followed or
replaced, and with ``root`` (a run or sweep folder) so is a link on the way from ``root`` down to the target; so a
hostile ``RUN/records.jsonl.torn -> ~/.bashrc`` or ``RUN/states -> /elsewhere`` cannot make a write land outside
the folder the user named (:func:`refuse_links`). The folder the user named may itself sit under links of theirs.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from remnant.errors import ConfigError

#: Mode of every file remnant writes (``rw-r--r--``).
FILE_MODE = 0o644
#: Mode of a folder remnant creates through :func:`replace_dir` (``rwxr-xr-x``).
DIR_MODE = 0o755
#: Mode of a private signing key (``rw-------``): the only file not readable by all.
PRIVATE_MODE = 0o600


def refuse_links(path: str | Path, root: str | Path | None = None, *, requirement: str = "R23") -> Path:
    """``path``, after checking that writing it follows no symbolic link; ConfigError naming the link otherwise.

    ``path`` itself must not be a link; with ``root``, neither may any folder between ``root`` (exclusive) and
    ``path``. ``path`` outside ``root`` is refused too. Absent components are fine: they are made as folders.
    """
    target = Path(path)
    chain = [target]
    if root is not None:
        base = Path(root)
        try:
            rel = Path(os.path.abspath(target)).relative_to(os.path.abspath(base))
        except ValueError:
            raise ConfigError(
                f"{target}: is outside {base}, the folder it is written into (nothing written)",
                requirement=requirement,
            ) from None
        chain = [base.joinpath(*rel.parts[: i + 1]) for i in range(len(rel.parts))]
    for step in chain:
        if step.is_symlink():
            raise ConfigError(
                f"{step}: is a symbolic link (to {os.readlink(step)}); remnant never writes through a link "
                "(nothing written)",
                requirement=requirement,
            )
    return target


def write_atomic(
    path: str | Path,
    data: bytes | str,
    *,
    mode: int = FILE_MODE,
    exclusive: bool = False,
    root: str | Path | None = None,
) -> Path:
    """Write ``data`` (bytes, or text as UTF-8) to ``path`` atomically; return the path.

    A temp file in the same folder is written, fsync'd and renamed over ``path``; the folder entry is fsync'd
    too. A ``path`` that is an existing folder is refused by the rename (IsADirectoryError), never clobbered.
    ``exclusive=True`` never replaces an existing file (FileExistsError), even one that appeared meanwhile
    (the temp file is hard-linked into place): what a frozen pre-registration needs (R14). A ``path`` that is a
    symbolic link, or (with ``root``) below a link inside ``root``, is refused (:func:`refuse_links`).
    """
    target = refuse_links(path, root)
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


def json_text(value: object, *, sort_keys: bool = False) -> str:
    """Indented JSON, non-ASCII kept, trailing newline: the form of every JSON file remnant writes for people
    (statement.json, envelopes, manifests, pack.json, prereg.json)."""
    return json.dumps(value, indent=2, sort_keys=sort_keys, ensure_ascii=False) + "\n"


def write_json(path: str | Path, value: object, *, sort_keys: bool = False) -> Path:
    """Write ``value`` as :func:`json_text` to ``path`` with :func:`write_atomic`; return the path."""
    return write_atomic(path, json_text(value, sort_keys=sort_keys))


def replace_dir(target: str | Path, build: Callable[[Path], None]) -> Path:
    """Build a folder with ``build(tmp)`` in a temp folder beside ``target``, fsync its files, rename it in place.

    An existing ``target`` folder is replaced only after the new one is complete, so a crash leaves the old
    folder or the new one. A ``target`` that is a symbolic link is refused (:func:`refuse_links`); ``.`` or
    ``..`` is read as the folder it names.
    """
    out = Path(os.path.abspath(refuse_links(target)))  # abspath: `.` has no name to put a temp beside
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
    return Path(target)


def append_durable(path: str | Path, data: bytes) -> Path:
    """Append ``data`` to ``path`` in one write, flush and fsync (the file is made if absent); return the path.

    The file is opened with ``O_NOFOLLOW``: a ``path`` that is a symbolic link is refused (:func:`refuse_links`),
    even one that appears between the check and the open.
    """
    target = refuse_links(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = _open_nofollow(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    with os.fdopen(fd, "ab") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    return target


def truncate_durable(path: str | Path, size: int) -> None:
    """Cut ``path`` to ``size`` bytes and fsync it, refusing a ``path`` that is a symbolic link (``O_NOFOLLOW``)."""
    fd = _open_nofollow(refuse_links(path), os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)


def _open_nofollow(path: Path, flags: int) -> int:
    try:
        return os.open(path, flags | getattr(os, "O_NOFOLLOW", 0), FILE_MODE)
    except OSError:
        if path.is_symlink():  # ELOOP: it became a link after refuse_links looked
            refuse_links(path)
        raise


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


__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "PRIVATE_MODE",
    "append_durable",
    "fsync_dir",
    "json_text",
    "refuse_links",
    "replace_dir",
    "truncate_durable",
    "write_atomic",
    "write_json",
]
