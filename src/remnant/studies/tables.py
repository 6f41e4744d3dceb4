"""The two tables a sweep leaves for the studies (the sweep/study contract): results and per-item values.

``DIR/results.parquet`` (or ``results.csv``): one row per model × perturbation with the fixed columns of
:data:`FIXED_COLUMNS` and one column per metric, oriented as the metric itself defines it (the study decides the
orientation, :mod:`remnant.studies.orientation`). ``DIR/items.parquet`` (or ``items.csv``): ``model``,
``perturbation``, ``metric``, ``item_id``, ``value``. Parquet is read with pyarrow when it is importable (the
``ray`` extra installs it); otherwise the CSV beside it is read, so the studies run from the pure core alone.

Every problem with a table is a :class:`~remnant.errors.ConfigError` naming the file, the row or column and R23
(the full per-cell results table a study reads must be the one the records produced).
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from remnant.errors import ConfigError

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
    items_source: str | None = None

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


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip() == "")


def _number(value: Any, where: str) -> float | None:
    """A finite float, or None for a missing or non-finite value (NaN is how Parquet writers mark missing)."""
    if _is_missing(value):
        return None
    if isinstance(value, bool):
        raise ConfigError(f"{where}: expected a number, got {value!r}", requirement="R23")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: expected a number, got {value!r}", requirement="R23") from None
    return x if math.isfinite(x) else None


def _text(value: Any) -> str | None:
    return None if _is_missing(value) else str(value)


def _seed(value: Any, where: str) -> int | None:
    x = _number(value, where)
    if x is None:
        return None
    if x != int(x):
        raise ConfigError(f"{where}: seed must be an integer, got {value!r}", requirement="R23")
    return int(x)


def _choice(value: Any, allowed: tuple[str, ...], where: str) -> str:
    text = _text(value)
    if text not in allowed:
        raise ConfigError(f"{where}: expected one of {', '.join(allowed)}, got {value!r}", requirement="R23")
    return text


def parse_results(records: Iterable[Mapping[str, Any]], source: str) -> tuple[list[ResultRow], list[str]]:
    """Rows of the results table from plain records (one mapping per row); ConfigError on a malformed one."""
    records = list(records)
    columns = list(dict.fromkeys(k for r in records for k in r))
    missing = [c for c in _REQUIRED if c not in columns]
    if missing:
        raise ConfigError(f"{source}: missing column(s) {', '.join(missing)}", requirement="R23")
    metric_columns = [c for c in columns if c not in FIXED_COLUMNS]
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


def parse_items(records: Iterable[Mapping[str, Any]], source: str) -> list[ItemValue]:
    """Item values from plain records; rows with a missing or non-finite value are skipped (not measured)."""
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


def _read_records(folder: Path, stem: str) -> tuple[list[dict[str, Any]], Path] | None:
    """Records of ``stem.parquet`` (pyarrow present) or ``stem.csv``; None when neither can be read."""
    parquet, text = folder / f"{stem}.parquet", folder / f"{stem}.csv"
    if parquet.is_file() and pyarrow_available():
        import pyarrow.parquet as pq  # type: ignore[import-untyped]  # pyarrow ships no stubs

        return [dict(r) for r in pq.read_table(parquet).to_pylist()], parquet
    if text.is_file():
        with text.open(encoding="utf-8", newline="") as handle:
            return [dict(r) for r in csv.DictReader(handle)], text
    return None


def _digest(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def load_pool(folder: str | Path, *, need_items: bool = False) -> PoolTable:
    """Read ``folder``'s results table (and items table when present); ConfigError when the results are absent."""
    root = Path(folder)
    if not root.is_dir():
        raise ConfigError(f"{root}: not a sweep folder", requirement="R23")
    found = _read_records(root, "results")
    if found is None:
        hint = (
            " (results.parquet needs pyarrow: pip install 'remnant[ray]')"
            if (root / "results.parquet").is_file()
            else ""
        )
        raise ConfigError(
            f"{root}: no results table (results.parquet or results.csv); run `remnant sweep report {root}`{hint}",
            requirement="R23",
        )
    records, path = found
    rows, metrics = parse_results(records, str(path))
    items_found = _read_records(root, "items")
    if items_found is None and need_items:
        raise ConfigError(f"{root}: no items table (items.parquet or items.csv)", requirement="R23")
    items = parse_items(items_found[0], str(items_found[1])) if items_found is not None else None
    return PoolTable(
        source=str(path),
        digest=_digest(path),
        rows=tuple(rows),
        metric_columns=tuple(metrics),
        items=tuple(items) if items is not None else None,
        items_source=str(items_found[1]) if items_found is not None else None,
    )


def write_csv_table(path: str | Path, records: Iterable[Mapping[str, Any]], columns: Iterable[str]) -> None:
    """Write records as CSV through :func:`remnant.atomic.write_atomic` (tests and examples build pools so)."""
    import io

    from remnant.atomic import write_atomic

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for rec in records:
        writer.writerow({k: ("" if v is None else v) for k, v in rec.items()})
    write_atomic(path, buffer.getvalue())


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
    "write_csv_table",
]
