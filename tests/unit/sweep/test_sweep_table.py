"""The results table from records alone (pure): values, statuses, unfinished rows, CSV and Parquet."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest

from remnant.engine.cell import CellTarget, cell_record, observation_record, status_record
from remnant.results import FIXED_COLUMNS, ITEM_COLUMNS, csv_text
from remnant.sweep.pool import Pool, PoolModel
from remnant.sweep.table import build_tables

#: One cell per field metric (``metrics/METRIC``, remnant.metrics.measurement): a requested one and a dependency.
ENTRIES = ("metrics/forget_Q_A_Prob", "metrics/forget_Q_A_PARA_Prob", "kappa", "uds")
#: Each metric cell's aggregate and whether it was requested.
METRIC_CELLS = {"forget_Q_A_Prob": (0.25, True), "forget_Q_A_PARA_Prob": (0.5, False)}


def _plan() -> dict[str, Any]:
    models = tuple(
        PoolModel(
            id=i,
            pool=p,
            method=m,
            strength=s,
            seed=0,
            hyperparameters={"lr": 1e-4},
            parent=None,
            job="j" + i,
            checkpoint="final",
            state="s" + i,
        )
        for i, p, m, s in (("full", "target", None, "full"), ("npo-a", "unlearned", "npo", "lr=1e-4"))
    )
    cells = [
        {"key": f"{m.id}|{p}|{e}", "model": m.id, "perturbation": p, "entry": e}
        for m in models
        for p in ("none", "nf4")
        for e in ENTRIES
    ]
    spec = {
        "suite": {"metrics": ["forget_Q_A_Prob"], "audits": ["uds"], "kappa": True, "utility": "retain_kappa"}
    }
    return {
        "pool": Pool("p", models, {}).to_dict(),
        "cells": cells,
        "perturbations": ["none", "nf4"],
        "spec": spec,
    }


def _records(plan: dict[str, Any], *, fail: str | None = None, skip: str | None = None) -> list[Any]:
    out: list[Any] = []
    for cell in plan["cells"]:
        key, entry = cell["key"], cell["entry"]
        if key == skip:
            continue
        target = CellTarget(
            "run", key, cell["perturbation"], "none", "latent" if entry == "uds" else "metric"
        )
        if key == fail:
            out.append(status_record(target, status="failed", reason="MemoryError: out of memory"))
        elif entry.startswith("metrics/"):
            metric = entry.removeprefix("metrics/")
            value, requested = METRIC_CELLS[metric]
            params = {"agg_value": value, "requested": requested}
            out.append(
                cell_record(target, checkpoint="final", metric=metric, n=4, elapsed=0.1, params=params)
            )
        elif entry == "kappa":
            out.append(
                observation_record(
                    target, checkpoint="final", seed=0, item_id="e1", value=True, willing=True, output="x"
                )
            )
            out.append(cell_record(target, checkpoint="final", k=3, n=4, elapsed=0.1))
            out.append(cell_record(target, checkpoint="final", metric="w", k=4, n=4, elapsed=0.1))
        else:
            out.append(
                cell_record(
                    target, checkpoint="final", metric="uds", n=2, elapsed=0.1, fields={"value": 0.75}
                )
            )
    return out


def test_values_come_from_their_cells_and_only_requested_metrics_are_columns() -> None:
    plan = _plan()
    tables = build_tables(plan, _records(plan))
    assert tables.unfinished == 0 and len(tables.rows) == 4
    assert tables.columns == ["forget_Q_A_Prob", "kappa", "w", "uds"]
    row = tables.rows[0]
    assert (row["model"], row["perturbation"], row["status"], row["error"]) == ("full", "none", "ok", None)
    assert (row["forget_Q_A_Prob"], row["kappa"], row["w"], row["uds"]) == (0.25, 0.75, 1.0, 0.75)
    assert "forget_Q_A_PARA_Prob" not in row and row["hyperparameters"] == '{"lr":0.0001}'
    assert [i["metric"] for i in tables.items] == ["kappa"] * 4 and tables.items[0]["value"] == 1.0


def test_a_failed_cell_fails_its_row_with_the_error_and_a_missing_cell_leaves_it_out() -> None:
    plan = _plan()
    tables = build_tables(plan, _records(plan, fail="npo-a|nf4|kappa", skip="full|nf4|uds"))
    assert tables.unfinished == 1
    rows = {(r["model"], r["perturbation"]): r for r in tables.rows}
    assert ("full", "nf4") not in rows
    failed = rows[("npo-a", "nf4")]
    assert (failed["status"], failed["error"], failed["kappa"]) == (
        "failed",
        "MemoryError: out of memory",
        None,
    )
    assert failed["forget_Q_A_Prob"] == 0.25  # the row's other cells still report


def test_csv_keeps_the_column_order_and_writes_null_as_empty() -> None:
    plan = _plan()
    tables = build_tables(plan, _records(plan, fail="npo-a|nf4|kappa"))
    text = csv_text(tables.rows, [*FIXED_COLUMNS, *tables.columns])
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert list(parsed[0]) == [*FIXED_COLUMNS, *tables.columns]
    assert parsed[3]["kappa"] == "" and parsed[3]["status"] == "failed" and parsed[0]["method"] == ""
    assert csv_text(tables.items, ITEM_COLUMNS).splitlines()[0] == "model,perturbation,metric,item_id,value"


def test_parquet_types_follow_the_contract() -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    from remnant.sweep.table import parquet_bytes

    plan = _plan()
    tables = build_tables(plan, _records(plan))
    table = pq.read_table(pa.BufferReader(parquet_bytes(tables.rows, [*FIXED_COLUMNS, *tables.columns])))
    assert table.schema.field("seed").type == pa.int64() and table.schema.field("kappa").type == pa.float64()
    assert table.schema.field("error").type == pa.string() and table.column("uds").to_pylist() == [0.75] * 4


def _reading(cell: dict[str, Any], value: float | None, status: str = "run") -> Any:
    from remnant.records import Reading

    return Reading(
        run_id="run",
        cell_key=cell["key"],
        measurement="uds",
        audit="uds",
        component={"kind": "audit", "name": "uds", "version": "1.0", "params": {}},
        model_state=cell["perturbation"],
        role="removed",
        states=[cell["perturbation"], "full", "retain"],
        reference="retain",
        layer="blocks 0-1",
        position="entity span",
        value=value,
        status=status,
        reason=None
        if value is not None
        else ("no example scored" if status == "run" else "RuntimeError: boom"),
    )


def test_an_audit_column_is_its_reading_and_a_failed_reading_fails_the_row() -> None:
    """An audit writes readings and no cell record (C-H6): the table takes the reading's figure, and a failed
    reading fails its row with the reason; a cell with no reading yet leaves its row out."""
    plan = _plan()
    audits = {c["key"]: c for c in plan["cells"] if c["entry"] == "uds"}
    records = [r for r in _records(plan) if r.cell_key not in audits]
    values = {"full|none": 0.0, "npo-a|none": 0.6, "full|nf4": None}
    for key, cell in audits.items():
        where = key.removesuffix("|uds")
        if where in values:
            records.append(_reading(cell, values[where]))
        else:
            records.append(_reading(cell, None, status="failed"))
    tables = build_tables(plan, records)
    rows = {(r["model"], r["perturbation"]): r for r in tables.rows}
    assert tables.unfinished == 0
    assert [rows[k]["uds"] for k in (("full", "none"), ("npo-a", "none"), ("full", "nf4"))] == [
        0.0,
        0.6,
        None,
    ]
    assert rows[("full", "nf4")]["status"] == "ok"  # a figure the statistic could not define is no failure
    failed = rows[("npo-a", "nf4")]
    assert (failed["status"], failed["error"], failed["uds"]) == ("failed", "RuntimeError: boom", None)
    unfinished = build_tables(plan, [r for r in records if r.cell_key != "npo-a|none|uds"])
    assert unfinished.unfinished == 1
