"""Splits saved by ``datasets`` (``Dataset.save_to_disk`` / ``DatasetDict.save_to_disk``), read strictly (R2).

A split folder is a saved dataset when it holds ``state.json`` (its ``_data_files`` name the Arrow files, read in
order) or ``dataset_dict.json`` naming exactly one split whose subfolder is one. The Arrow IPC stream files are
read with pyarrow (imported only then; ``datasets`` never) one record batch at a time and hashed as read, so
provenance and row limits are those of every other layout; every file named must be a regular file inside the
split folder. ``dataset_info.json`` is not read: the rows' own columns are validated."""

from __future__ import annotations

import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from remnant.errors import ConfigError
from remnant.jsonio import loads_strict

if TYPE_CHECKING:
    from hashlib import _Hash

STATE = "state.json"
DATASET_DICT = "dataset_dict.json"
REQUIREMENT = "R2"
#: Largest ``state.json`` / ``dataset_dict.json`` read (real ones are under 10 KB, even with many shards).
MAX_JSON_BYTES = 4 * 2**20
_ARROW_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\.arrow$")


def _json(path: Path) -> Any:
    if not path.is_file() or path.stat().st_size > MAX_JSON_BYTES:
        raise ConfigError(
            f"{path}: not a regular JSON file of at most {MAX_JSON_BYTES} bytes", requirement="R2"
        )
    return loads_strict(path.read_bytes(), source=str(path), requirement=REQUIREMENT)


def _dict_split(folder: Path) -> Path:
    """The one split folder a ``dataset_dict.json`` names (a saved DatasetDict of several is ambiguous)."""
    path = folder / DATASET_DICT
    data = _json(path)
    splits = data.get("splits") if isinstance(data, dict) else None
    if not isinstance(splits, list) or len(splits) != 1 or not isinstance(splits[0], str):
        raise ConfigError(
            f"{path}: 'splits' must name exactly one split (save the one split this folder stands for), "
            f"got {str(splits)[:80]}",
            requirement=REQUIREMENT,
        )
    name = splits[0]
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name) or ".." in name:
        raise ConfigError(f"{path}: split name {name[:80]!r} is not a plain folder name", requirement="R2")
    sub = folder / name
    if not (sub / STATE).exists():
        raise ConfigError(f"{path}: names split {name!r} but {sub / STATE} is missing", requirement="R2")
    return sub


def _arrow_file(folder: Path, entry: object, state: Path) -> Path:
    name = entry.get("filename") if isinstance(entry, dict) else None
    if not isinstance(name, str) or not _ARROW_NAME.match(name):
        raise ConfigError(
            f"{state}: _data_files entry {str(entry)[:80]} does not name an .arrow file in the folder",
            requirement=REQUIREMENT,
        )
    path = folder / name
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise ConfigError(f"{path}: named by {state.name} but missing", requirement=REQUIREMENT) from None
    if not real.is_relative_to(folder.resolve()) or not stat.S_ISREG(real.stat().st_mode):
        raise ConfigError(f"{path}: not a regular file inside {folder}", requirement=REQUIREMENT)
    return path


def saved_dataset(folder: Path) -> list[Path] | None:
    """The Arrow files of a saved dataset in ``folder`` in order (module docstring); None when it is not one."""
    if (folder / DATASET_DICT).exists():
        folder = _dict_split(folder)
    state = folder / STATE
    if not state.exists():
        return None
    data = _json(state)
    files = data.get("_data_files") if isinstance(data, dict) else None
    if not isinstance(files, list) or not files:
        raise ConfigError(f"{state}: '_data_files' must list the dataset's .arrow files", requirement="R2")
    if isinstance(data, dict) and data.get("_indices_data_files"):
        # an index mapping reorders or selects rows; save_to_disk flattens it, so its presence is foreign
        raise ConfigError(
            f"{state}: an indices mapping is not read; save with save_to_disk", requirement="R2"
        )
    paths = [_arrow_file(folder, entry, state) for entry in files]
    if len(set(paths)) != len(paths):
        raise ConfigError(f"{state}: '_data_files' names a file twice", requirement=REQUIREMENT)
    return paths


def arrow_records(path: Path, label: str, max_rows: int, digest: _Hash) -> Iterator[tuple[str, Any]]:
    """(``file row N``, record) for each row of an Arrow stream file, one record batch at a time."""
    try:
        import pyarrow as pa  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - pyarrow comes with datasets (the model extra) and the ray extra
        raise ConfigError(
            f"{label}: reading a saved dataset needs pyarrow (pip install 'remnant[model]')",
            requirement=REQUIREMENT,
        ) from None
    row = 0
    try:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(2**20), b""):
                digest.update(block)
        with pa.OSFile(str(path), "rb") as source:
            reader = pa.ipc.open_stream(source)
            names = reader.schema.names
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ConfigError(f"{label}: column {twice[0]!r} appears twice", requirement=REQUIREMENT)
            for batch in reader:
                if row + batch.num_rows > max_rows:
                    raise ConfigError(
                        f"{label}: more than the {max_rows} rows a split may hold", requirement=REQUIREMENT
                    )
                for record in batch.to_pylist():
                    row += 1
                    yield f"{label} row {row}", record
    except (OSError, pa.ArrowException) as exc:
        message = " ".join(str(exc).split())[:200]
        raise ConfigError(
            f"{label}: not a readable Arrow file (row {row + 1}): {message}", requirement=REQUIREMENT
        ) from None


__all__ = ["DATASET_DICT", "STATE", "arrow_records", "saved_dataset"]
