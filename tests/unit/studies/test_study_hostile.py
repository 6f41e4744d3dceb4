"""Hostile inputs to the studies (tests/integration/hostile/harness.py): every refusal is one line, exit 2, naming
the file and the requirement."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from _study_pools import planted_pool

from remnant.results import FIXED_COLUMNS, write_csv_table

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "integration" / "hostile"))
from harness import Hostile, check, ids  # noqa: E402


def _no_results(tmp: Path) -> tuple[Sequence[str], str]:
    folder = tmp / "sweep"
    folder.mkdir()
    return ["study", "meta-eval", str(folder), "--out", str(tmp / "o")], str(folder)


def _bad_pool_value(tmp: Path) -> tuple[Sequence[str], str]:
    folder = tmp / "sweep"
    folder.mkdir()
    row = dict.fromkeys(FIXED_COLUMNS)
    row.update(model="a", pool="retained", perturbation="none", status="ok")
    write_csv_table(folder / "results.csv", [row], FIXED_COLUMNS)
    return ["study", "meta-eval", str(folder), "--out", str(tmp / "o")], "results.csv"


def _unknown_config_field(tmp: Path) -> tuple[Sequence[str], str]:
    planted_pool(tmp)
    cfg = tmp / "study.toml"
    cfg.write_text("utility_flor = 0.8\n")
    return ["study", "meta-eval", str(tmp), "--config", str(cfg), "--out", str(tmp / "o")], "study.toml"


def _duplicate_key_config(tmp: Path) -> tuple[Sequence[str], str]:
    planted_pool(tmp)
    cfg = tmp / "study.toml"
    cfg.write_text("seed = 1\nseed = 2\n")
    return ["study", "recovery", str(tmp), "--config", str(cfg), "--out", str(tmp / "o")], "study.toml"


def _revival_without_items(tmp: Path) -> tuple[Sequence[str], str]:
    planted_pool(tmp)
    (tmp / "items.csv").unlink()
    return ["study", "recovery", str(tmp), "--out", str(tmp / "o")], "results.csv"


def _cells_duplicate_key(tmp: Path) -> tuple[Sequence[str], str]:
    cells = tmp / "cells.json"
    cells.write_text(
        '{"estimator": "uds", "estimator": "uds", "fitted_hyperparameters": [], "cells": [], "runs": []}'
    )
    return ["study", "readmission", "uds", "--cells", str(cells), "--out", str(tmp / "o")], "cells.json"


def _cells_of_another_estimator(tmp: Path) -> tuple[Sequence[str], str]:
    cells = tmp / "cells.json"
    cells.write_text('{"estimator": "direction", "fitted_hyperparameters": [], "cells": [], "runs": []}')
    return ["study", "readmission", "uds", "--cells", str(cells), "--out", str(tmp / "o")], "cells.json"


def _summary_without_result(tmp: Path) -> tuple[Sequence[str], str]:
    return ["study", "summary", "--meta-eval", str(tmp), "--out", str(tmp / "s")], "meta-eval.json"


def _deviation_without_prereg(tmp: Path) -> tuple[Sequence[str], str]:
    argv = [
        "study",
        "deviation",
        str(tmp),
        "seed",
        "--old",
        "0",
        "--new",
        "1",
        "--reason",
        "r",
        "--stage",
        "s",
    ]
    return argv, "prereg.json"


CASES = [
    Hostile("no-results-table", _no_results, "R23"),
    Hostile("bad-pool-value", _bad_pool_value, "R23"),
    Hostile("unknown-config-field", _unknown_config_field, "R14"),
    Hostile("duplicate-config-key", _duplicate_key_config, "R14"),
    Hostile("revival-without-items", _revival_without_items, "R14"),
    Hostile("cells-duplicate-key", _cells_duplicate_key, "R23"),
    Hostile("cells-other-estimator", _cells_of_another_estimator, "R23"),
    Hostile("summary-without-result", _summary_without_result, "R22"),
    Hostile("deviation-without-prereg", _deviation_without_prereg, "R14"),
]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_hostile_study_inputs(case: Hostile, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = check(case, tmp_path, capsys)
    assert len(text.strip().splitlines()) == 1, text
