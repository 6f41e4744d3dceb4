"""The sweep/study contract's tables: results and items, read from Parquet (pyarrow) or CSV, refused when malformed
(R23: the per-cell results table a study reads)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from remnant.errors import ConfigError
from remnant.results import FIXED_COLUMNS, PoolTable, load_pool, require_finished, write_csv_table


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
        _row(model="a", perturbation="nf4", kappa=None),
        _row(model="b", pool="unlearned", status="failed", error="OOM", kappa=0.1, parent="a", method="npo"),
    ]
    table = load_pool(_write(tmp_path / "p", rows))
    assert table.metric_columns == ("kappa",)
    assert table.value("a", "kappa") == 0.5 and table.row("a").seed == 3  # type: ignore[union-attr]
    assert table.value("a", "utility") == 0.9
    assert table.value("a", "kappa", "nf4") is None  # an empty cell reads as missing
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


def _both(tmp: Path, rows: list[dict[str, Any]], parquet_rows: list[dict[str, Any]]) -> Path:
    """A sweep folder with results.csv from ``rows`` and results.parquet from ``parquet_rows``."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    folder = _write(tmp / "both", rows)
    pq.write_table(pa.Table.from_pylist(parquet_rows), folder / "results.parquet")
    return folder


def test_parquet_and_csv_that_agree_are_read_as_one_table(tmp_path: Path) -> None:
    rows = [
        _row(model="a", utility=0.9, kappa=0.1 + 0.2, seed=3),
        _row(model="b", pool="never_saw", kappa=None),
    ]
    table = load_pool(_both(tmp_path, rows, rows))
    assert table.source.endswith("results.parquet") and table.value("a", "kappa") == 0.1 + 0.2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kappa": 0.5000001}, r"row 1 differs \(model a, perturbation none\)"),
        ({"status": "failed"}, r"row 1 differs"),
        ({"kappa": None}, r"row 1 differs"),
    ],
    ids=["value", "status", "value-dropped"],
)
def test_a_parquet_that_disagrees_with_its_csv_is_refused(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    rows = [_row(model="a", kappa=0.5), _row(model="b", pool="never_saw", kappa=0.2)]
    folder = _both(tmp_path, rows, [{**rows[0], **change}, rows[1]])
    with pytest.raises(ConfigError, match=message) as err:
        load_pool(folder)
    text = str(err.value)
    assert "results.csv disagrees with" in text and "results.parquet" in text and "R23" in text


def test_a_parquet_with_a_row_or_column_more_than_its_csv_is_refused(tmp_path: Path) -> None:
    rows = [_row(model="a", kappa=0.5)]
    with pytest.raises(ConfigError, match=r"results.parquet has 1 row\(s\), results.csv 2"):
        load_pool(_both(tmp_path / "1", [*rows, _row(model="b", pool="never_saw", kappa=0.1)], rows))
    with pytest.raises(ConfigError, match=r"metric columns \['kappa'\] against \['kappa', 'rouge'\]"):
        load_pool(_both(tmp_path / "2", rows, [{**rows[0], "rouge": 0.3}]))


def test_items_tables_that_disagree_are_refused(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    folder = _write(tmp_path / "p", [_row(model="a", kappa=0.5)])
    item = {"model": "a", "perturbation": "none", "metric": "kappa", "item_id": "q1", "value": 1.0}
    write_csv_table(folder / "items.csv", [item], list(item))
    pq.write_table(pa.Table.from_pylist([{**item, "value": 0.0}]), folder / "items.parquet")
    with pytest.raises(ConfigError, match=r"items.csv disagrees with .*items.parquet \(item 1 differs"):
        load_pool(folder)


def test_nan_in_a_parquet_table_is_refused_not_read_as_missing(tmp_path: Path) -> None:
    rows = [_row(model="a", kappa=0.5), _row(model="b", pool="never_saw", kappa=0.2)]
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    folder = tmp_path / "pq"
    folder.mkdir()
    pq.write_table(
        pa.Table.from_pylist([rows[0], {**rows[1], "kappa": float("nan")}]), folder / "results.parquet"
    )
    with pytest.raises(ConfigError, match=r"results.parquet: row 2: column 'kappa': nan is not a finite"):
        load_pool(folder)
    (folder / "results.parquet").write_bytes(b"PAR1 not a table")
    with pytest.raises(ConfigError, match=r"results.parquet: not a readable Parquet table"):
        load_pool(folder)


@pytest.mark.parametrize(
    ("statuses", "pools", "refused"),
    [
        (("failed", "diverged"), ("target",), "its 2 model(s) all failed or diverged"),
        (("ok", "failed"), ("target",), None),
        (("failed", "failed"), ("never_saw",), None),
        (("ok", "ok"), ("unlearned",), "it has no model"),
    ],
    ids=["all-failed", "one-finished", "other-pool", "empty-pool"],
)
def test_require_finished(
    tmp_path: Path, statuses: tuple[str, str], pools: tuple[str, ...], refused: str | None
) -> None:
    rows = [
        _row(model="t0", status=statuses[0], kappa=0.9),
        _row(model="t1", status=statuses[1], kappa=0.8),
        _row(model="t0", perturbation="nf4", kappa=0.9),  # a finished perturbed row does not count
        _row(model="n0", pool="never_saw", kappa=0.1),
    ]
    table = load_pool(_write(tmp_path / "p", rows))
    if refused is None:
        require_finished(table, pools, "meta-evaluation")
        return
    with pytest.raises(ConfigError) as err:
        require_finished(table, pools, "meta-evaluation")
    text = str(err.value)
    assert refused in text and "results.csv" in text and f"pool {pools[0]!r}" in text and "R23" in text


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
        ([_row(), _row(perturbation="nf4", kappa="nan")], r"row 3: column 'kappa': 'nan' is not a finite"),
        ([_row(kappa="inf")], r"column 'kappa': 'inf' is not a finite"),
        ([_row(utility="-inf")], r"column 'utility': '-inf' is not a finite"),
        ([_row(kappa="1e309")], r"column 'kappa': '1e309' is not a finite"),
        ([_row(kappa=None), _row(perturbation="nf4", kappa="")], "column 'kappa' is empty in every row"),
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
        "nan",
        "inf",
        "utility-minus-inf",
        "overflow",
        "all-blank-column",
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
        load_pool(_write(tmp_path / "p", [_row(kappa=0.5)]), need_items=True)


def test_planted_pool_layout(pool: tuple[PoolTable, dict[str, Any], Path]) -> None:
    table, planted, _ = pool
    assert [len(table.models(p)) for p in ("target", "never_saw", "unlearned")] == [8, 8, 20]
    assert len(table.item_values("kappa", "relearn")) == 28
    assert planted["n_items"] == 21
