"""The results table and the items table of a sweep, rebuilt from its records alone (the pool-table contract).

One row per model × perturbation (``none``, ``nf4``, ``relearn``): the model's labels from ``plan.json``, the
row's ``status`` (``failed`` when a cell of it failed — ``error`` says why —, ``diverged`` when its build or its
relearned copy diverged, else ``ok``), ``utility``, and one column per measurement, oriented as the metric itself
defines it: each requested field metric by its log key (its aggregate), ``kappa`` and ``w`` on P (k/n), each
audit by its name (its reading's figure), each attack by its name (κ under it). Every value comes from a cell
record the driver appended (``params["pool"]`` names its model, perturbation and suite entry), or for an audit
from its reading (an audit writes no cell record, C-H6); a row some of whose cells are not recorded yet (a sweep
still running, or killed) is left out and counted. The items table holds every per-item value the records carry.
The fixed and item columns are :mod:`remnant.results`' (the contract the studies read). Pure: no torch; Parquet
needs pyarrow (``remnant[ray]``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from remnant.records import AnyRecord, CellRecord, Observation, Reading
from remnant.sweep.pool import Pool

#: Columns whose values are integers or strings; every other measurement column is a float.
STRING_COLUMNS = frozenset(
    {"model", "pool", "method", "strength", "hyperparameters", "parent", "perturbation", "status", "error"}
)


@dataclass(frozen=True)
class Tables:
    """The two tables, the measurement columns in order, and how many rows were left out unfinished."""

    rows: list[dict[str, Any]]
    items: list[dict[str, object]]
    columns: list[str]
    unfinished: int


def _rate(cell: CellRecord) -> float | None:
    return cell.k / cell.n if cell.status == "run" and cell.n else None


def _value(cell: CellRecord) -> float | None:
    """The value a cell read: the typed ``value`` (a utility reading, an audit's score) or a field metric's
    aggregate (``params["agg_value"]``, OpenUnlearning's name; remnant.metrics.measurement)."""
    if cell.status != "run":
        return None
    for value in (cell.value, cell.params.get("agg_value")):
        if value is not None:
            return float(value)
    return None


#: What a cell recorded: cell records, or an audit's readings (it writes no cell record, C-H6).
Recorded = CellRecord | Reading


def _column(entry: str, cell: Recorded) -> tuple[str, float | None] | None:
    """The column and value one cell record contributes (None: it adds none)."""
    if isinstance(cell, Reading):  # an audit's figure (remnant.engine.audit)
        return (entry, cell.value if cell.status == "run" else None)
    if entry.startswith("metrics/"):  # one cell per metric (remnant.metrics.measurement)
        return (cell.metric, _value(cell)) if cell.params.get("requested", True) else None
    if entry == "kappa":
        return (cell.metric, _rate(cell)) if cell.metric in ("kappa", "w") else None
    if entry == "utility":
        return ("utility", _value(cell))
    if cell.surface == "latent":  # an audit
        return (entry, _value(cell))
    return (entry, _rate(cell)) if cell.metric == "kappa" else None


def _status(cells: Sequence[Recorded]) -> tuple[str, str | None]:
    for wanted in ("failed", "diverged"):
        hit = next((c for c in cells if c.status == wanted), None)
        if hit is not None:
            return wanted, hit.reason
    return "ok", None


def _order(spec: dict[str, Any]) -> list[str]:
    suite = spec.get("suite", {})
    cols = list(suite.get("metrics", []))
    if suite.get("kappa", True):
        cols += ["kappa", "w"]
    return cols + list(suite.get("audits", [])) + list(suite.get("attacks", []))


def _current(listed: list[AnyRecord], where: Mapping[str, object]) -> dict[str, list[Recorded]]:
    """Each planned cell's records in force: a cell retried after it failed (``--retry-failed``) keeps its
    failed records in the store, superseded by the retry's."""
    by_key: dict[str, list[Recorded]] = {}
    for r in listed:
        if isinstance(r, CellRecord | Reading) and r.cell_key in where:
            by_key.setdefault(r.cell_key, []).append(r)
    return {k: [r for r in v if r.status != "failed"] or v for k, v in by_key.items()}


def build_tables(plan: dict[str, Any], records: Iterable[AnyRecord]) -> Tables:
    """The results and items tables of a sweep (module docstring)."""
    pool = Pool.from_dict(plan["pool"])
    where = {c["key"]: (c["model"], c["perturbation"], c["entry"]) for c in plan["cells"]}
    listed = list(records)
    cells: dict[tuple[str, str], list[tuple[str, Recorded]]] = {}
    for key, kept in _current(listed, where).items():
        model, perturbation, entry = where[key]
        cells.setdefault((model, perturbation), []).extend((entry, r) for r in kept)
    planned: dict[tuple[str, str], set[str]] = {}
    for key, (model, perturbation, _) in where.items():
        planned.setdefault((model, perturbation), set()).add(key)
    utility_metric = plan["spec"].get("suite", {}).get("utility", "retain_kappa")
    rows, unfinished = [], 0
    for model in pool.models:
        for perturbation in plan["perturbations"]:
            got = cells.get((model.id, perturbation), [])
            if {r.cell_key for _, r in got} != planned.get((model.id, perturbation), set()):
                unfinished += 1
                continue
            rows.append(_row(model.labels(), perturbation, got, utility_metric))
    columns = _order(plan["spec"])
    for row in rows:
        for col in columns:
            row.setdefault(col, None)
    return Tables(rows, _items(listed, where), columns, unfinished)


def _row(
    labels: Mapping[str, object], perturbation: str, got: list[tuple[str, Recorded]], utility_metric: str
) -> dict[str, Any]:
    status, error = _status([r for _, r in got])
    row: dict[str, Any] = {
        **labels,
        "perturbation": perturbation,
        "status": status,
        "error": error,
        "utility": None,
    }
    for entry, cell in got:
        found = _column(entry, cell)
        if found is not None:
            row[found[0]] = found[1]
    if utility_metric != "retain_kappa":
        row["utility"] = row.get(utility_metric)
    return row


def _items(records: list[AnyRecord], where: dict[str, tuple[str, str, str]]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for r in records:
        if not isinstance(r, Observation) or r.cell_key not in where:
            continue
        model, perturbation, entry = where[r.cell_key]
        value = r.score if r.score is not None else (None if r.kappa is None else float(r.kappa))
        if value is None:
            continue
        if entry.startswith("metrics/"):  # METRIC/INDEX (remnant.metrics.measurement)
            metric, _, item = r.item_id.partition("/")
        elif r.item_id.startswith(entry + "/"):  # AUDIT/EXAMPLE, from a sweep recorded before audit readings
            metric, item = entry, r.item_id[len(entry) + 1 :]
        else:  # κ and attacks: the probe's item id
            metric, item = entry, r.item_id
        out.append(
            {"model": model, "perturbation": perturbation, "metric": metric, "item_id": item, "value": value}
        )
    return out


def parquet_bytes(rows: Sequence[Mapping[str, object]], columns: Sequence[str]) -> bytes:
    """``rows`` as a Parquet file (pyarrow): strings, ``seed`` int64, every other column float64."""
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    def kind(col: str) -> Any:
        return (
            pa.string()
            if col in STRING_COLUMNS or col in ("metric", "item_id")
            else pa.int64()
            if col == "seed"
            else pa.float64()
        )

    schema = pa.schema([(c, kind(c)) for c in columns])
    table = pa.Table.from_pylist([{c: row.get(c) for c in columns} for row in rows], schema=schema)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return bytes(sink.getvalue().to_pybytes())


__all__ = ["Tables", "build_tables", "parquet_bytes"]
