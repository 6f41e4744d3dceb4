"""The two tables a sweep leaves for the studies (the sweep/study contract): results and per-item values.

``DIR/results.parquet`` (or ``results.csv``): one row per model × perturbation with the fixed columns of
:data:`FIXED_COLUMNS` and one column per metric, oriented as the metric itself defines it (the study decides the
orientation, :mod:`remnant.studies.orientation`). ``DIR/items.parquet`` (or ``items.csv``): ``model``,
``perturbation``, ``metric``, ``item_id``, ``value``. Parquet is read with pyarrow when it is importable (the
``ray`` extra installs it); otherwise the CSV beside it is read, so the studies run from the pure core alone.

Every problem with a table is a :class:`~remnant.errors.ConfigError` naming the file, the row or column and R23
(the full per-cell results table a study reads must be the one the records produced):

- a missing value is an empty cell (CSV) or a null (Parquet), which is how ``remnant sweep report`` writes one;
  NaN, an infinity or a number that overflows to one (``1e309``) is no measurement and is refused, never read as
  missing;
- a metric column empty in every row measured nothing and is refused (a study would report it as if evaluated);
- where both ``results.parquet`` and ``results.csv`` are present and pyarrow reads the Parquet, the Parquet is
  the table read and the CSV must hold the same rows and values: ``remnant sweep report`` writes both from the
  same records, so a disagreement means one was edited, and the study refuses it naming both files (the same for
  the items tables).
"""

from __future__ import annotations

import csv
import importlib.util
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from remnant.errors import ConfigError
from remnant.run_manifest import file_ref

Pool = Literal["target", "never_saw", "unlearned", "base"]
Perturbation = Literal["none", "nf4", "relearn"]

POOLS: tuple[str, ...] = ("target", "never_saw", "unlearned", "base")
PERTURBATIONS: tuple[str, ...] = ("none", "nf4", "relearn")
STATUSES: tuple[str, ...] = ("ok", "failed", "diverged")
#: The results table's fixed columns; every other column is a metric.
FIXED_COLUMNS: tuple[str, ...] = (
    "model",
    "pool",
    "method",
    "strength",
    "seed",
    "hyperparameters",
    "parent",
    "perturbation",
    "status",
    "error",
    "utility",
)
ITEM_COLUMNS: tuple[str, ...] = ("model", "perturbation", "metric", "item_id", "value")
_REQUIRED = ("model", "pool", "perturbation", "status")


@dataclass(frozen=True)
class ResultRow:
    """One model under one perturbation."""

    model: str
    pool: Pool
    perturbation: Perturbation
    status: str
    method: str | None = None
    strength: str | None = None
    seed: int | None = None
    hyperparameters: str = "{}"
    parent: str | None = None
    error: str | None = None
    utility: float | None = None
    metrics: Mapping[str, float | None] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def value(self, metric: str) -> float | None:
        """The metric's value as the table holds it (None: missing, not finite, or the row did not finish)."""
        if metric == "utility":
            return self.utility if self.ok else None
        return self.metrics.get(metric) if self.ok else None


@dataclass(frozen=True)
class ItemValue:
    """One item's value of one metric on one model under one perturbation."""

    model: str
    perturbation: str
    metric: str
    item_id: str
    value: float


@dataclass(frozen=True)
class PoolTable:
    """A sweep's results (and items, when present), indexed by (model, perturbation)."""

    source: str
    digest: str
    rows: tuple[ResultRow, ...]
    metric_columns: tuple[str, ...]
    items: tuple[ItemValue, ...] | None = None

    @cached_property
    def _index(self) -> dict[tuple[str, str], ResultRow]:
        return {(r.model, r.perturbation): r for r in self.rows}

    def row(self, model: str, perturbation: str = "none") -> ResultRow | None:
        return self._index.get((model, perturbation))

    def models(self, pool: str) -> list[str]:
        """Models of ``pool`` in table order (each once)."""
        return list(dict.fromkeys(r.model for r in self.rows if r.pool == pool))

    def value(self, model: str, metric: str, perturbation: str = "none") -> float | None:
        row = self.row(model, perturbation)
        return row.value(metric) if row is not None else None

    def item_values(self, metric: str, perturbation: str = "none") -> dict[str, dict[str, float]]:
        """``{model: {item_id: value}}`` of one metric under one perturbation (empty without an items table)."""
        out: dict[str, dict[str, float]] = {}
        for it in self.items or ():
            if it.metric == metric and it.perturbation == perturbation:
                out.setdefault(it.model, {})[it.item_id] = it.value
        return out


def _is_missing(value: object) -> bool:
    return value is None or (isinstance(value, str) and value.strip() == "")


def _number(value: Any, where: str) -> float | None:
    """A finite float, or None for a missing value (an empty cell or a null); NaN and infinities are refused."""
    if _is_missing(value):
        return None
    if isinstance(value, bool):
        raise ConfigError(f"{where}: expected a number, got {value!r}", requirement="R23")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: expected a number, got {value!r}", requirement="R23") from None
    if not math.isfinite(x):
        raise ConfigError(
            f"{where}: {value!r} is not a finite number (a value not measured is an empty cell)",
            requirement="R23",
        )
    return x


def _text(value: object) -> str | None:
    return None if _is_missing(value) else str(value)


def _seed(value: object, where: str) -> int | None:
    x = _number(value, where)
    if x is None:
        return None
    if x != int(x):
        raise ConfigError(f"{where}: seed must be an integer, got {value!r}", requirement="R23")
    return int(x)


def _choice(value: object, allowed: tuple[str, ...], where: str) -> str:
    text = _text(value)
    if text not in allowed:
        raise ConfigError(f"{where}: expected one of {', '.join(allowed)}, got {value!r}", requirement="R23")
    return text


def parse_results(records: Iterable[Mapping[str, object]], source: str) -> tuple[list[ResultRow], list[str]]:
    """Rows of the results table from plain records (one mapping per row); ConfigError on a malformed one."""
    records = list(records)
    columns = list(dict.fromkeys(k for r in records for k in r))
    missing = [c for c in _REQUIRED if c not in columns]
    if missing:
        raise ConfigError(f"{source}: missing column(s) {', '.join(missing)}", requirement="R23")
    metric_columns = [c for c in columns if c not in FIXED_COLUMNS]
    for column in metric_columns:
        if all(_is_missing(r.get(column)) for r in records):
            raise ConfigError(
                f"{source}: column {column!r} is empty in every row; a metric with no value was not measured",
                requirement="R23",
            )
    rows: list[ResultRow] = []
    seen: dict[tuple[str, str], int] = {}
    pools: dict[str, str] = {}
    for i, rec in enumerate(records, start=2 if source.endswith(".csv") else 1):
        where = f"{source}: row {i}"
        model = _text(rec.get("model"))
        if model is None:
            raise ConfigError(f"{where}: empty model", requirement="R23")
        pool = _choice(rec.get("pool"), POOLS, f"{where}: column 'pool'")
        perturbation = _choice(rec.get("perturbation"), PERTURBATIONS, f"{where}: column 'perturbation'")
        status = _choice(rec.get("status"), STATUSES, f"{where}: column 'status'")
        key = (model, perturbation)
        if key in seen:
            raise ConfigError(
                f"{where}: model {model!r} under {perturbation!r} repeats row {seen[key]}", requirement="R23"
            )
        seen[key] = i
        if pools.setdefault(model, pool) != pool:
            raise ConfigError(
                f"{where}: model {model!r} is in pool {pool!r} here and {pools[model]!r} elsewhere",
                requirement="R23",
            )
        rows.append(
            ResultRow(
                model=model,
                pool=pool,  # type: ignore[arg-type]  # checked by _choice
                perturbation=perturbation,  # type: ignore[arg-type]
                status=status,
                method=_text(rec.get("method")),
                strength=_text(rec.get("strength")),
                seed=_seed(rec.get("seed"), f"{where}: column 'seed'"),
                hyperparameters=_text(rec.get("hyperparameters")) or "{}",
                parent=_text(rec.get("parent")),
                error=_text(rec.get("error")),
                utility=_number(rec.get("utility"), f"{where}: column 'utility'"),
                metrics={c: _number(rec.get(c), f"{where}: column {c!r}") for c in metric_columns},
            )
        )
    return rows, metric_columns


def parse_items(records: Iterable[Mapping[str, object]], source: str) -> list[ItemValue]:
    """Item values from plain records; rows with a missing value are skipped (not measured), a non-finite one is
    refused."""
    out: list[ItemValue] = []
    for i, rec in enumerate(records, start=2 if source.endswith(".csv") else 1):
        where = f"{source}: row {i}"
        missing = [c for c in ITEM_COLUMNS if c not in rec]
        if missing:
            raise ConfigError(f"{where}: missing column(s) {', '.join(missing)}", requirement="R23")
        value = _number(rec["value"], f"{where}: column 'value'")
        model, metric, item = (_text(rec[c]) for c in ("model", "metric", "item_id"))
        if model is None or metric is None or item is None:
            raise ConfigError(f"{where}: empty model, metric or item_id", requirement="R23")
        perturbation = _choice(rec["perturbation"], PERTURBATIONS, f"{where}: column 'perturbation'")
        if value is not None:
            out.append(ItemValue(model, perturbation, metric, item, value))
    return out


def pyarrow_available() -> bool:
    """Whether Parquet can be read here (pyarrow comes with the ``ray`` extra, not the pure core)."""
    return importlib.util.find_spec("pyarrow") is not None


def _parquet_records(path: Path) -> list[dict[str, object]]:
    import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no stubs
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    try:
        return [dict(r) for r in pq.read_table(path).to_pylist()]
    except pa.ArrowException as exc:
        raise ConfigError(f"{path}: not a readable Parquet table ({exc})", requirement="R23") from None


def _csv_records(path: Path) -> list[dict[str, object]]:
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            return [dict(r) for r in csv.DictReader(handle)]
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(f"{path}: not a readable CSV table ({exc})", requirement="R23") from None


def _read_records(folder: Path, stem: str) -> list[tuple[list[dict[str, object]], Path]]:
    """Every readable copy of ``stem``: ``stem.parquet`` first (pyarrow present), then ``stem.csv``; empty when
    neither can be read. The first is the table; the others must agree with it (module docstring)."""
    parquet, text = folder / f"{stem}.parquet", folder / f"{stem}.csv"
    copies: list[tuple[list[dict[str, object]], Path]] = []
    if parquet.is_file() and pyarrow_available():
        copies.append((_parquet_records(parquet), parquet))
    if text.is_file():
        copies.append((_csv_records(text), text))
    return copies


def _agree(
    table: Path,
    other: Path,
    first: Sequence[ResultRow | ItemValue],
    second: Sequence[ResultRow | ItemValue],
    what: str,
) -> None:
    """ConfigError naming both files unless ``first`` and ``second`` (parsed rows) are the same table."""
    if list(first) == list(second):
        return
    at = next((i for i, (a, b) in enumerate(zip(first, second, strict=False)) if a != b), None)
    where = (
        f"{table.name} has {len(first)} {what}(s), {other.name} {len(second)}"
        if at is None
        else f"{what} {at + 1} differs ({_label(first[at])})"
    )
    raise ConfigError(
        f"{other} disagrees with {table} ({where}); both are written from the same records, so one was edited: "
        "delete the stale one or rerun remnant sweep report",
        requirement="R23",
    )


def _label(row: ResultRow | ItemValue) -> str:
    extra = f", item {row.item_id}, metric {row.metric}" if isinstance(row, ItemValue) else ""
    return f"model {row.model}, perturbation {row.perturbation}{extra}"


def load_pool(folder: str | Path, *, need_items: bool = False) -> PoolTable:
    """Read ``folder``'s results table (and items table when present); ConfigError when the results are absent."""
    root = Path(folder)
    if not root.is_dir():
        raise ConfigError(f"{root}: not a sweep folder", requirement="R23")
    found = _read_records(root, "results")
    if not found:
        hint = (
            " (results.parquet needs pyarrow: pip install 'remnant[ray]')"
            if (root / "results.parquet").is_file()
            else ""
        )
        raise ConfigError(
            f"{root}: no results table (results.parquet or results.csv); run `remnant sweep report {root}`{hint}",
            requirement="R23",
        )
    (records, path), *others = found
    rows, metrics = parse_results(records, str(path))
    for other_records, other in others:
        other_rows, other_metrics = parse_results(other_records, str(other))
        if sorted(other_metrics) != sorted(metrics):
            raise ConfigError(
                f"{other} disagrees with {path} (metric columns {sorted(other_metrics)} against "
                f"{sorted(metrics)}); delete the stale one or rerun remnant sweep report",
                requirement="R23",
            )
        _agree(path, other, rows, other_rows, "row")
    items_found = _read_records(root, "items")
    if not items_found and need_items:
        raise ConfigError(f"{root}: no items table (items.parquet or items.csv)", requirement="R23")
    items: list[ItemValue] | None = None
    if items_found:
        (item_records, items_path), *other_items = items_found
        items = parse_items(item_records, str(items_path))
        for other_records, other in other_items:
            _agree(items_path, other, items, parse_items(other_records, str(other)), "item")
    return PoolTable(
        source=str(path),
        digest=file_ref(path),
        rows=tuple(rows),
        metric_columns=tuple(metrics),
        items=tuple(items) if items is not None else None,
    )


#: The pool spec as given, copied into the pool folder by ``remnant sweep run`` (the spec a study pre-registers).
SPEC_COPY = "spec.toml"


def require_spec(folder: str | Path, declared: str | None, study: str) -> None:
    """ConfigError unless the pool folder's spec has the digest the study declares (``pool_spec``; None: not
    declared): a study pre-registered against one pool design reads no other (R14); a recalibrated design is a
    recorded deviation of ``pool_spec`` (R15), which the registration check applies before this one."""
    if declared is None:
        return
    spec = Path(folder) / SPEC_COPY
    if not spec.is_file():
        raise ConfigError(
            f"{spec}: the {study} declares pool_spec {declared} but the pool folder has no spec",
            requirement="R14",
        )
    found = file_ref(spec)
    if found != declared:
        raise ConfigError(
            f"{spec}: the {study} is pre-registered against pool_spec {declared}, but this pool's spec is "
            f"{found}; record the change with `remnant study deviation OUT pool_spec` (R15) or study the "
            "registered pool",
            requirement="R14",
        )


def require_finished(table: PoolTable, pools: Sequence[str], study: str) -> None:
    """ConfigError naming the table unless every pool in ``pools`` has a model whose unperturbed row finished
    (status ``ok``): a study over a pool with no finished row would report every AUC and ρ as missing and exit
    as if it had evaluated something (R23: the per-cell table must hold what the study compares)."""
    for pool in pools:
        models = table.models(pool)
        if not any((row := table.row(m)) is not None and row.ok for m in models):
            found = f"its {len(models)} model(s) all failed or diverged" if models else "it has no model"
            raise ConfigError(
                f"{table.source}: the {study} compares pool {pool!r}, but {found} (no row with status ok "
                "under perturbation none); nothing is evaluable",
                requirement="R23",
            )


def csv_text(rows: Iterable[Mapping[str, object]], columns: Sequence[str]) -> str:
    """``rows`` as CSV with ``columns`` in order (None or a missing key as an empty field; a key not among
    ``columns`` is not written): the one CSV form of the results and items tables."""
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if row.get(c) is None else row[c] for c in columns])
    return buffer.getvalue()


def write_csv_table(
    path: str | Path, records: Iterable[Mapping[str, object]], columns: Iterable[str]
) -> None:
    """Write records as CSV (:func:`csv_text`) through :func:`remnant.atomic.write_atomic` (tests and examples
    build pools so)."""
    from remnant.atomic import write_atomic

    write_atomic(path, csv_text(records, list(columns)))


__all__ = [
    "FIXED_COLUMNS",
    "ITEM_COLUMNS",
    "PERTURBATIONS",
    "POOLS",
    "ItemValue",
    "PoolTable",
    "ResultRow",
    "load_pool",
    "parse_items",
    "parse_results",
    "pyarrow_available",
    "require_finished",
    "require_spec",
    "SPEC_COPY",
    "csv_text",
    "write_csv_table",
]
