"""The pool studies on the command line: pre-registration frozen before the table is read (R14), deviations (R15),
the reports, and the pure core (no torch) running them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from _study_pools import planted_pool

from remnant.cli import main
from remnant.errors import PreregError
from remnant.studies.config import MetaEvalConfig
from remnant.studies.registration import register

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from model_absent import run_cli  # noqa: E402

ORIENTATION = """
[orientation]
separating = "higher"
random = "higher"
quant_unstable = "higher"
relearn_unstable = "higher"
planted_pred = "higher"
"""


@pytest.fixture()
def pool_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "sweep"
    folder.mkdir()
    planted_pool(folder)
    return folder


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "study.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_register_freezes_once_and_holds_later_runs(tmp_path: Path) -> None:
    cfg = MetaEvalConfig(n_resamples=200)
    first = register(cfg, tmp_path)
    assert first.frozen_now and first.prereg.values["n_resamples"] == 200
    again = register(cfg, tmp_path)
    assert not again.frozen_now and again.prereg.digest == first.prereg.digest
    with pytest.raises(PreregError, match="'utility_floor' changed from 0.8 to 0.5"):
        register(cfg.model_copy(update={"utility_floor": 0.5}), tmp_path)


def test_meta_eval_and_recovery_and_summary_through_the_cli(
    pool_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _config(tmp_path, "n_resamples = 200\n" + ORIENTATION)
    assert main(["study", "meta-eval", str(pool_dir), "--config", str(cfg)]) == 0
    out = pool_dir / "studies" / "meta-eval"
    frozen = json.loads((out / "prereg.json").read_text())
    assert frozen["values"]["study"] == "meta-eval" and frozen["values"]["n_resamples"] == 200
    result = json.loads((out / "meta-eval.json").read_text())
    assert (
        result["registration"]["digest"] == frozen["digest"] and result["registration"]["frozen_by_this_run"]
    )
    top = result["metrics"][0]
    assert top["faithfulness"]["auc"] == 1.0 and top["rank"] == 1
    md = (out / "meta-eval.md").read_text()
    assert (
        "| 3 | uds | one_minus | 1.000 [1.000, 1.000] |" in md and "0.971" in md
    )  # the paper's UDS row beside ours
    html = (out / "meta-eval.html").read_text()
    assert "<svg" in html and "<script" not in html and 'id="r0-shift"' in html and 'id="q0-identity"' in html

    rec_cfg = _config(tmp_path, ORIENTATION)
    assert (
        main(["study", "recovery", str(pool_dir), "--config", str(rec_cfg), "--out", str(tmp_path / "rec")])
        == 0
    )
    rec = json.loads((tmp_path / "rec" / "recovery.json").read_text())
    planted = next(p for p in rec["predictors"] if p["metric"] == "planted_pred")
    assert planted["pooled"]["significant"] is True
    assert (
        main(
            [
                "study",
                "summary",
                "--meta-eval",
                str(out),
                "--recovery",
                str(tmp_path / "rec"),
                "--out",
                str(tmp_path / "s"),
            ]
        )
        == 0
    )
    summary = (tmp_path / "s" / "summary.md").read_text()
    assert "| uds | 1.000 | 1.000 | 1.000 | 1.000 | 1.000 |" in summary and "+0.997*" in summary
    capsys.readouterr()


def test_a_changed_config_needs_a_recorded_deviation(
    pool_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "study"
    assert (
        main(
            [
                "study",
                "preregister",
                "meta-eval",
                "--config",
                str(_config(tmp_path, "n_resamples = 200\n")),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    changed = _config(tmp_path, "n_resamples = 200\nutility_floor = 0.5\n")
    assert main(["study", "meta-eval", str(pool_dir), "--config", str(changed), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "utility_floor" in err and "R15" in err and not (out / "meta-eval.json").exists()
    argv = ["study", "deviation", str(out), "utility_floor", "--old", "0.8", "--new", "0.5"]
    assert main([*argv, "--reason", "pilot utility spread", "--stage", "before the confirmatory run"]) == 0
    assert main(["study", "meta-eval", str(pool_dir), "--config", str(changed), "--out", str(out)]) == 0
    result = json.loads((out / "meta-eval.json").read_text())
    assert result["registration"]["frozen_by_this_run"] is False
    assert result["registration"]["deviations"] == [
        {
            "field": "utility_floor",
            "old": 0.8,
            "new": 0.5,
            "reason": "pilot utility spread",
            "stage": "before the confirmatory run",
        }
    ]
    assert "pilot utility spread" in (out / "meta-eval.md").read_text()


def test_a_study_preregistered_against_a_pool_spec_reads_that_pool_or_a_recorded_recalibration(
    pool_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pool_spec (R14): a pool of another spec is refused; the recalibration a pilot made, once recorded as a
    deviation (R15), is studied and the report names it."""
    import hashlib

    def digest(text: str) -> str:
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()

    registered, recalibrated = "lr = [1e-4]\n", "lr = [1.5e-4]\n"
    out = tmp_path / "study"
    frozen = _config(tmp_path, f'n_resamples = 200\npool_spec = "{digest(registered)}"\n')
    assert main(["study", "preregister", "meta-eval", "--config", str(frozen), "--out", str(out)]) == 0
    assert main(["study", "meta-eval", str(pool_dir), "--config", str(frozen), "--out", str(out)]) == 2
    assert "has no spec" in capsys.readouterr().err
    (pool_dir / "spec.toml").write_text(recalibrated, encoding="utf-8")
    assert main(["study", "meta-eval", str(pool_dir), "--config", str(frozen), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert digest(recalibrated) in err and "R14" in err and not (out / "meta-eval.json").exists()
    moved = _config(tmp_path, f'n_resamples = 200\npool_spec = "{digest(recalibrated)}"\n')
    assert main(["study", "meta-eval", str(pool_dir), "--config", str(moved), "--out", str(out)]) == 2
    assert "pool_spec" in capsys.readouterr().err  # the registered value still holds: R15 needs a deviation
    old, new = (json.dumps(digest(t)) for t in (registered, recalibrated))
    argv = ["study", "deviation", str(out), "pool_spec", "--old", old, "--new", new]
    assert main([*argv, "--reason", "pilot: lr 1e-4 did not unlearn", "--stage", "pilot"]) == 0
    assert main(["study", "meta-eval", str(pool_dir), "--config", str(moved), "--out", str(out)]) == 0
    assert "pilot: lr 1e-4 did not unlearn" in (out / "meta-eval.md").read_text()
    capsys.readouterr()


def test_pool_studies_run_without_the_model_extra(pool_dir: Path, tmp_path: Path) -> None:
    """The pure core (docs/extending.md): torch, transformers and the rest blocked, the studies still run."""
    cfg = _config(tmp_path, "n_resamples = 100\n" + ORIENTATION)
    done = run_cli(["study", "meta-eval", str(pool_dir), "--config", str(cfg), "--out", str(tmp_path / "m")])
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "m" / "meta-eval.html").is_file()
    done = run_cli(
        [
            "study",
            "recovery",
            str(pool_dir),
            "--config",
            str(_config(tmp_path, ORIENTATION)),
            "--out",
            str(tmp_path / "r"),
        ]
    )
    assert done.returncode == 0, done.stderr
    cells = tmp_path / "cells.json"
    cells.write_text(
        json.dumps({"estimator": "uds", "fitted_hyperparameters": ["tau"], "cells": [], "runs": []})
    )
    done = run_cli(["study", "readmission", "uds", "--cells", str(cells), "--out", str(tmp_path / "rd")])
    assert done.returncode == 0, done.stderr
    assert "uds: not evaluable" in done.stdout
    done = run_cli(["study", "goodhart", "--model", "tiny", "--out", str(tmp_path / "g")])
    assert done.returncode == 2 and "needs the model extra" in done.stderr
    assert not (tmp_path / "g").exists()  # nothing frozen for a study that could not run (R14)


def test_studies_modules_import_without_torch() -> None:
    from model_absent import run_python

    pure = [
        "commands",
        "config",
        "document",
        "faithfulness",
        "goodhart_core",
        "meta_eval",
        "orientation",
        "plots",
        "published",
        "readmission",
        "recovery",
        "registration",
        "report",
        "robustness",
    ]
    code = (
        "import remnant.results\n"
        + "".join(f"import remnant.studies.{m}\n" for m in pure)
        + "print(sorted(m for m in BLOCKED if m in sys.modules))\n"
    )
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
