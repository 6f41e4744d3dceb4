"""The sweep/study contract's tables: results and items, read from Parquet (pyarrow) or CSV, refused when malformed
(R23: the per-cell results table a study reads)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from remnant.errors import ConfigError
from remnant.studies.tables import FIXED_COLUMNS, PoolTable, load_pool, write_csv_table


def _row(**kw: Any) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(FIXED_COLUMNS)
    row.update(model="m", pool="target", perturbation="none", status="ok", hyperparameters="{}")
    row.update(kw)
    return row


def _write(folder: Path, rows: list[dict[str, Any]], extra: tuple[str, ...] = ("kappa",)) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    write_csv_table(folder / "results.csv", rows, [*FIXED_COLUMNS, *extra])
    return folder


def test_csv_rows_values_and_missing(tmp_path: Path) -> None:
    rows = [
        _row(model="a", utility=0.9, kappa=0.5, seed=3),
        _row(model="a", perturbation="nf4", kappa="nan"),
        _row(model="b", pool="unlearned", status="failed", error="OOM", kappa=0.1, parent="a", method="npo"),
    ]
    table = load_pool(_write(tmp_path / "p", rows))
    assert table.metric_columns == ("kappa",)
    assert table.value("a", "kappa") == 0.5 and table.row("a").seed == 3  # type: ignore[union-attr]
    assert table.value("a", "utility") == 0.9
    assert table.value("a", "kappa", "nf4") is None  # NaN reads as missing
    assert table.value("b", "kappa") is None  # a failed row has no values
    assert table.models("unlearned") == ["b"] and table.row("b").parent == "a"  # type: ignore[union-attr]
    assert table.digest.startswith("sha256:") and table.items is None


def test_parquet_reads_like_csv(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [_row(model="a", utility=0.9, kappa=0.5, seed=3), _row(model="b", pool="never_saw", kappa=None)]
    csv_table = load_pool(_write(tmp_path / "csv", rows))
    folder = tmp_path / "pq"
    folder.mkdir()
    pq.write_table(pa.Table.from_pylist(rows), folder / "results.parquet")
    items = [{"model": "a", "perturbation": "none", "metric": "kappa", "item_id": "q1", "value": 1.0}]
    pq.write_table(pa.Table.from_pylist(items), folder / "items.parquet")
    table = load_pool(folder)
    assert table.source.endswith("results.parquet")
    assert [(r.model, r.pool, r.seed, r.utility, dict(r.metrics)) for r in table.rows] == [
        (r.model, r.pool, r.seed, r.utility, dict(r.metrics)) for r in csv_table.rows
    ]
    assert table.item_values("kappa") == {"a": {"q1": 1.0}}


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{"model": "a", "pool": "target", "status": "ok"}], "missing column"),
        ([_row(pool="retain")], "column 'pool'"),
        ([_row(perturbation="int8")], "column 'perturbation'"),
        ([_row(status="done")], "column 'status'"),
        ([_row(), _row()], "repeats row 2"),
        ([_row(), _row(pool="never_saw", perturbation="nf4")], "is in pool"),
        ([_row(kappa="high")], "expected a number"),
        ([_row(seed=1.5)], "integer"),
        ([_row(model="")], "empty model"),
    ],
    ids=[
        "no-perturbation",
        "pool",
        "perturbation",
        "status",
        "duplicate",
        "pool-changes",
        "text",
        "seed",
        "model",
    ],
)
def test_malformed_tables_are_refused(tmp_path: Path, rows: list[dict[str, Any]], message: str) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    columns = list(dict.fromkeys(k for r in rows for k in r))
    write_csv_table(folder / "results.csv", rows, columns)
    with pytest.raises(ConfigError, match=message) as err:
        load_pool(folder)
    assert "results.csv" in str(err.value) and "R23" in str(err.value)


def test_no_results_names_the_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no results table") as err:
        load_pool(tmp_path)
    assert str(tmp_path) in str(err.value)
    with pytest.raises(ConfigError, match="no items table"):
        load_pool(_write(tmp_path / "p", [_row()]), need_items=True)


def test_planted_pool_layout(pool: tuple[PoolTable, dict[str, Any], Path]) -> None:
    table, planted, _ = pool
    assert [len(table.models(p)) for p in ("target", "never_saw", "unlearned")] == [8, 8, 20]
    assert len(table.item_values("kappa", "relearn")) == 28
    assert planted["n_items"] == 21
