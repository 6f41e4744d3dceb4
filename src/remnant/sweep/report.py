"""``remnant sweep report DIR``: the results table (Parquet and CSV), the items table and the HTML page.

Everything is rebuilt from ``DIR/records.jsonl`` and ``DIR/plan.json`` (the contract the studies read:
``results.parquet``/``results.csv``, ``items.parquet``, ``report.html``). Without pyarrow the Parquet files are
skipped with a note and the CSV files (``results.csv``, ``items.csv``) still hold everything.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from remnant.atomic import write_atomic
from remnant.errors import ConfigError
from remnant.records import RECORDS_FILE, RecordStore
from remnant.results import FIXED_COLUMNS, ITEM_COLUMNS, csv_text, pyarrow_available
from remnant.sweep.prepare import PLAN_FILE
from remnant.sweep.table import build_tables, parquet_bytes


@dataclass(frozen=True)
class ReportSummary:
    """What the report wrote: rows × columns, items, unfinished rows, files, notes."""

    rows: int
    columns: int
    items: int
    unfinished: int
    files: tuple[str, ...]
    notes: tuple[str, ...]


def read_plan(out: Path) -> dict[str, Any]:
    from remnant.jsonio import read_json

    path = out / PLAN_FILE
    if not path.is_file():
        raise ConfigError(
            f"{path}: no plan; is {out} a sweep folder (remnant sweep run --out)?", requirement="R23"
        )
    plan = read_json(path, requirement="R23")
    keys = {"pool", "cells", "perturbations", "spec", "store", "run_id"}
    if not isinstance(plan, dict) or not keys <= set(plan):
        raise ConfigError(f"{path}: is not a sweep plan", requirement="R23")
    return plan


def write_report(out: Path) -> ReportSummary:
    """Write the tables and the page into ``out`` (module docstring)."""
    from remnant.sweep.html import render_page

    plan = read_plan(out)
    records = RecordStore(out / RECORDS_FILE).read()
    tables = build_tables(plan, records)
    columns = [*FIXED_COLUMNS, *tables.columns]
    written = [
        write_atomic(out / "results.csv", csv_text(tables.rows, columns)),
        write_atomic(out / "items.csv", csv_text(tables.items, ITEM_COLUMNS)),
    ]
    notes: list[str] = []
    if pyarrow_available():
        written.append(write_atomic(out / "results.parquet", parquet_bytes(tables.rows, columns)))
        written.append(write_atomic(out / "items.parquet", parquet_bytes(tables.items, ITEM_COLUMNS)))
    else:
        notes.append(
            "pyarrow is not installed (pip install 'remnant[ray]'): Parquet skipped, the CSV files hold it all"
        )
    if tables.unfinished:
        notes.append(
            f"{tables.unfinished} model × perturbation rows are unfinished and left out (rerun the sweep)"
        )
    # The counts are always stated; the notes say what is missing beside them.
    note = " ".join(
        [f"{len(tables.rows)} rows (model × perturbation), {len(tables.items)} item values.", *notes]
    )
    page = render_page(plan["pool"]["name"], tables.rows, tables.columns, plan["perturbations"], note)
    written.append(write_atomic(out / "report.html", page))
    return ReportSummary(
        rows=len(tables.rows),
        columns=len(columns),
        items=len(tables.items),
        unfinished=tables.unfinished,
        files=tuple(str(p) for p in written),
        notes=tuple(notes),
    )


__all__ = ["ReportSummary", "read_plan", "write_report"]
