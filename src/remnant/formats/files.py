"""Finding a split's files in a dataset folder and reading its rows strictly, with provenance (R2, R23).

A split (TOFU's ``forget10``, MUSE's ``knowmem/forget_qa``) is looked for in the layouts of docs/formats.md,
"Folder layouts accepted", first match wins (the others are recorded as ``ignored``, never read). Parquet goes
first because a Hub snapshot of MUSE keeps stale ``.json`` files beside the Parquet ones ``datasets`` loads.

JSON lines are read one line at a time (at most :data:`MAX_LINE_BYTES`), Parquet one record batch at a time, and
a split holds at most :data:`MAX_ROWS` rows, so a huge or hostile file ends in an error, not in memory
exhaustion; each line goes through :func:`remnant.jsonio.loads_strict`. Every refusal is a
:class:`~remnant.errors.ConfigError` naming the file, the line (or row) and the field, citing R2: a target fixed
by documented provenance needs records that can be read one way only. Parquet needs ``pyarrow``, imported only
when a Parquet file is read."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from remnant.errors import ConfigError
from remnant.formats.arrow import arrow_records, saved_dataset
from remnant.jsonio import loads_strict

#: Longest JSON line read (bytes). A TOFU row is under 2 KB; a MUSE raw document under 100 KB.
MAX_LINE_BYTES = 8 * 2**20
#: Most rows one split may hold (TOFU ``full`` has 4,000; MUSE ``raw`` a few thousand).
MAX_ROWS = 1_000_000
#: Requirement cited by read errors: a target fixed by documented provenance (R2).
REQUIREMENT = "R2"

FileFormat = Literal["jsonl", "parquet", "arrow"]
Layout = Literal["parquet", "shards", "jsonl", "json", "folder", "saved"]
RowT = TypeVar("RowT", bound=BaseModel)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_]*$")
_SHARD = re.compile(r"^(?P<split>.+)-(?P<i>\d{5})-of-(?P<n>\d{5})\.parquet$")
_DATA_SUFFIXES = {".parquet": "parquet", ".jsonl": "jsonl", ".json": "jsonl"}
_FILE_FORMATS: dict[str, FileFormat] = {".parquet": "parquet", ".arrow": "arrow"}


@dataclass(frozen=True)
class SourceFile:
    """One file read: its path relative to the dataset folder, sha256 of its bytes, rows read, format."""

    path: str
    sha256: str
    rows: int
    format: FileFormat

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "sha256": self.sha256, "rows": self.rows, "format": self.format}


@dataclass(frozen=True)
class SplitSource:
    """Where one split's rows came from: the layout matched, the files read, and alternatives left unread."""

    name: str
    layout: Layout
    files: tuple[SourceFile, ...]
    ignored: tuple[str, ...] = ()

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "layout": self.layout,
            "rows": self.rows,
            "files": [f.to_json() for f in self.files],
        }
        if self.ignored:
            out["ignored"] = list(self.ignored)
        return out

    def where(self, index: int) -> str:
        """The file and 1-based row number of the split's ``index``-th row (for messages)."""
        for f in self.files:
            if index < f.rows:
                return f"{f.path} row {index + 1}"
            index -= f.rows
        return f"{self.name} row {index + 1}"


def check_name(name: str, what: str) -> str:
    """A split or config name is a plain word (no path separators, no dots): ConfigError otherwise."""
    if not _NAME.match(name):
        raise ConfigError(
            f"{what} name {name[:80]!r} is not a plain name (letters, digits, '_')", requirement=REQUIREMENT
        )
    return name


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def _shards(base: Path, split: str) -> list[Path]:
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if (m := _SHARD.match(p.name)) and m["split"] == split)


def _check_shards(shards: list[Path], root: Path) -> None:
    """Hub shards ``-0000i-of-0000N`` must be all there, each once: a missing shard is a silently short split."""
    total = {int(m["n"]) for p in shards if (m := _SHARD.match(p.name))}
    indices = sorted(int(m["i"]) for p in shards if (m := _SHARD.match(p.name)))
    if len(total) != 1 or indices != list(range(next(iter(total)))):
        raise ConfigError(
            f"{_relative(shards[0].parent, root)}: Parquet shards {[p.name for p in shards][:6]} are not one "
            "complete set -0000i-of-0000N",
            requirement=REQUIREMENT,
        )


def _folder_files(folder: Path, root: Path) -> list[Path]:
    """Data files directly in ``folder`` or one level down, in path order, all of one format."""
    files = sorted(
        p
        for pattern in ("*", "*/*")
        for p in folder.glob(pattern)
        if p.suffix in _DATA_SUFFIXES and not p.name.startswith(".")
    )
    for p in files:
        if not p.is_file():
            raise ConfigError(f"{_relative(p, root)}: is a folder, not a data file", requirement=REQUIREMENT)
    if not files:
        raise ConfigError(
            f"{_relative(folder, root)}: a split folder holds no .parquet, .jsonl or .json file",
            requirement=REQUIREMENT,
        )
    formats = {_DATA_SUFFIXES[p.suffix] for p in files}
    if len(formats) > 1:
        raise ConfigError(
            f"{_relative(folder, root)}: a split folder mixes Parquet and JSON files; keep one format",
            requirement=REQUIREMENT,
        )
    return files


def candidates(base: Path, split: str) -> list[tuple[Layout, list[Path]]]:
    """Every layout of ``split`` present under ``base``, looked for in precedence order (module docstring)."""
    found: list[tuple[Layout, list[Path]]] = []
    single: tuple[tuple[Layout, str], ...] = (("parquet", ".parquet"), ("jsonl", ".jsonl"), ("json", ".json"))
    for layout, suffix in single:
        path = base / f"{split}{suffix}"
        if path.exists():
            found.append((layout, [path]))
        if layout == "parquet" and (shards := _shards(base, split)):
            found.append(("shards", shards))
    folder = base / split
    if folder.is_dir():
        found.append(("folder", [folder]))
    return found


def locate(root: Path, base: Path, split: str) -> tuple[Layout, list[Path], tuple[str, ...]]:
    """The files of ``split`` under ``base`` (layout, files, ignored alternatives); ConfigError if none."""
    found = candidates(base, split)
    if not found:
        raise ConfigError(
            f"{base}: split {split!r} not found (looked for {split}.parquet, Parquet shards "
            f"{split}-0000i-of-0000N.parquet, {split}.jsonl, {split}.json and a folder {split}/)",
            requirement=REQUIREMENT,
        )
    layout, paths = found[0]
    ignored = tuple(_relative(p, root) for _, ps in found[1:] for p in ps)
    if layout == "shards":
        _check_shards(paths, root)
    elif layout == "folder":
        saved = saved_dataset(paths[0])  # a Dataset.save_to_disk folder (its Arrow files), else data files
        layout, paths = ("saved", saved) if saved is not None else ("folder", _folder_files(paths[0], root))
    for p in paths:
        if p.is_dir():
            raise ConfigError(f"{p}: is a folder, not a data file", requirement=REQUIREMENT)
    return layout, paths, ignored


def describe_error(exc: ValidationError) -> str:
    """A pydantic error as one line: the first problem's field and message, and how many more there are."""
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "(row)"
    more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    return f"field {field!r}: {first['msg']}{more}"


def _drop_index(record: dict[str, Any], where: str) -> dict[str, Any]:
    """An ``index`` column (the row number OpenUnlearning adds) is accepted when it is a whole number, and
    dropped: a row's position is its index."""
    if "index" not in record:
        return record
    value = record["index"]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(
            f"{where}: field 'index': a row index is a whole number >= 0, got {str(value)[:40]!r}",
            requirement=REQUIREMENT,
        )
    return {k: v for k, v in record.items() if k != "index"}


def _jsonl_records(path: Path, label: str, max_line: int, digest: hashlib._Hash) -> Iterator[tuple[str, Any]]:
    """(``file:line``, parsed value) for each non-blank line, hashing the bytes as they are read."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise ConfigError(f"{label}: cannot read: {exc.strerror or exc}", requirement=REQUIREMENT) from None
    with handle:
        lineno = 0
        while raw := handle.readline(max_line + 1):
            lineno += 1
            digest.update(raw)
            where = f"{label}:{lineno}"
            if len(raw) > max_line and not raw.endswith(b"\n"):
                raise ConfigError(f"{where}: line longer than {max_line} bytes", requirement=REQUIREMENT)
            if not raw.strip():
                continue
            value = loads_strict(raw, source=where, requirement=REQUIREMENT)
            if not isinstance(value, dict):
                hint = " (a JSON array? rows are JSON lines, one object a line, as Dataset.to_json writes)"
                raise ConfigError(
                    f"{where}: a row is a JSON object, got {type(value).__name__}"
                    + (hint if isinstance(value, list) else ""),
                    requirement=REQUIREMENT,
                )
            yield where, value


def _parquet_records(
    path: Path, label: str, max_rows: int, digest: hashlib._Hash
) -> Iterator[tuple[str, Any]]:
    """(``file row N``, record) for each Parquet row, one record batch at a time."""
    try:
        import pyarrow as pa  # type: ignore[import-untyped]
        import pyarrow.parquet as pq  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - pyarrow is in the dev and ray extras
        raise ConfigError(
            f"{label}: reading Parquet needs pyarrow (pip install pyarrow), or convert the split to JSON lines",
            requirement=REQUIREMENT,
        ) from None
    try:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(2**20), b""):
                digest.update(block)
        pfile = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise ConfigError(f"{label}: not a readable Parquet file: {exc}", requirement=REQUIREMENT) from None
    names = pfile.schema_arrow.names
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"{label}: column {twice[0]!r} appears twice", requirement=REQUIREMENT)
    if pfile.metadata.num_rows > max_rows:
        raise ConfigError(
            f"{label}: {pfile.metadata.num_rows} rows, more than the {max_rows} a split may hold",
            requirement=REQUIREMENT,
        )
    row = 0
    try:
        for batch in pfile.iter_batches(batch_size=1024):
            for record in batch.to_pylist():
                row += 1
                yield f"{label} row {row}", record
    except pa.ArrowException as exc:
        raise ConfigError(f"{label}: cannot read row {row + 1}: {exc}", requirement=REQUIREMENT) from None


def read_split(
    root: Path,
    base: Path,
    split: str,
    model: type[RowT],
    *,
    check: Callable[[RowT, str], None] | None = None,
    max_rows: int = MAX_ROWS,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> tuple[tuple[RowT, ...], SplitSource]:
    """Read every row of ``split`` under ``base`` (``root`` is the dataset folder, for relative paths), each validated
    by ``model`` (strict pydantic, unknown columns refused, an ``index`` column dropped) and then by
    ``check(row, where)``, which raises for what a split kind requires."""
    check_name(split, "split")
    layout, paths, ignored = locate(root, base, split)
    rows: list[RowT] = []
    files: list[SourceFile] = []
    for path in paths:
        label = str(path)
        digest = hashlib.sha256()
        fmt = _FILE_FORMATS.get(path.suffix, "jsonl")
        records = (
            _parquet_records(path, label, max_rows, digest)
            if fmt == "parquet"
            else arrow_records(path, label, max_rows, digest)
            if fmt == "arrow"
            else _jsonl_records(path, label, max_line_bytes, digest)
        )
        before = len(rows)
        for where, record in records:
            if len(rows) >= max_rows:
                raise ConfigError(
                    f"{where}: split {split!r} holds more than {max_rows} rows", requirement=REQUIREMENT
                )
            try:
                row = model.model_validate(_drop_index(record, where))
            except ValidationError as exc:
                raise ConfigError(f"{where}: {describe_error(exc)}", requirement=REQUIREMENT) from None
            if check is not None:
                check(row, where)
            rows.append(row)
        files.append(SourceFile(_relative(path, root), digest.hexdigest(), len(rows) - before, fmt))
    if not rows:  # an empty split would score as 0.0 (or as nothing) rather than be refused
        raise ConfigError(
            f"{', '.join(str(p) for p in paths)}: split {split!r} holds no rows; there is nothing to read",
            requirement=REQUIREMENT,
        )
    return tuple(rows), SplitSource(split, layout, tuple(files), ignored)


#: The files a dataset repo's snapshot is fetched with: the data layouts read here, and the dataset card.
HUB_PATTERNS = ("*.json", "*.jsonl", "*.parquet", "*.arrow", "*.md")


def check_folder(folder: str | Path) -> Path:
    """The dataset folder as a Path; ConfigError when it is missing or a file. A string naming no path that
    can only be a hub id (``locuslab/TOFU``) is that dataset repo's snapshot, from the local Hugging Face cache
    when offline (:mod:`remnant.hub`)."""
    root = Path(folder)
    if isinstance(folder, str):
        from remnant.hub import is_hub_id, snapshot

        if is_hub_id(folder):
            return snapshot(folder, repo_type="dataset", patterns=HUB_PATTERNS, error=ConfigError)
    if not root.exists():
        raise ConfigError(f"{root}: no such folder", requirement=REQUIREMENT)
    if not root.is_dir():
        raise ConfigError(f"{root}: is a file, not a dataset folder", requirement=REQUIREMENT)
    return root


def require(row: BaseModel, where: str, fields: tuple[str, ...], split: str) -> None:
    """Raise ConfigError naming the first of ``fields`` that ``row`` lacks (None) for ``split``."""
    for name in fields:
        if getattr(row, name) is None:
            raise ConfigError(
                f"{where}: field {name!r}: required in split {split!r}, missing or null",
                requirement=REQUIREMENT,
            )


__all__ = [
    "MAX_LINE_BYTES",
    "MAX_ROWS",
    "SourceFile",
    "SplitSource",
    "candidates",
    "check_folder",
    "check_name",
    "describe_error",
    "locate",
    "read_split",
    "require",
]
