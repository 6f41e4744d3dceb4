"""``remnant eval`` on the tiny model and a tiny TOFU-format folder written here: OpenUnlearning's output folder
(TOFU_EVAL.json, TOFU_SUMMARY.json) with the engine's records and manifest (R23), and one-line refusals."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from metrics_data import SPLITS, write_tofu_folder
from scipy.stats import ks_2samp  # type: ignore[import-untyped]

from remnant.cli import main
from remnant.metrics.catalogue import DEFAULT_TOFU

RETAIN_TR = [0.42, 0.9, 1.7, 0.33, 0.61, 0.05, 0.77]


def _retain_log(path: Path) -> Path:
    """A retain model's TOFU_EVAL.json in OpenUnlearning's layout, written by hand."""
    log = {
        "forget_truth_ratio": {
            "agg_value": 0.6,
            "value_by_index": {str(i): {"score": s} for i, s in enumerate(RETAIN_TR)},
        },
        "mia_min_k": {
            "forget": {"agg_value": 3.0, "value_by_index": {"0": {"score": 3.0}}},
            "holdout": {"agg_value": 3.1, "value_by_index": {"0": {"score": 3.1}}},
            "auc": 0.47,
            "agg_value": 0.47,
        },
        "forget_Q_A_Prob": {"agg_value": 0.1, "value_by_index": {"0": {"prob": 0.1, "avg_loss": 2.3}}},
    }
    path.write_text(json.dumps(log, indent=4))
    return path


def test_default_suite_with_retain_logs(
    tiny_llama_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_tofu_folder(tmp_path / "tofu")
    out = tmp_path / "eval"
    argv = ["eval", str(tiny_llama_dir), "--data", str(data), "--out", str(out), "--no-progress"]
    code = main([*argv, "--retain-logs", str(_retain_log(tmp_path / "retain.json")), "--max-new-tokens", "3"])
    stdout = capsys.readouterr().out
    assert code == 0
    # their TOFU_SUMMARY.json, printed too: every requested metric (each has a value here), keys sorted
    summary = json.loads((out / "TOFU_SUMMARY.json").read_text())
    assert json.loads(stdout) == summary and list(summary) == sorted(DEFAULT_TOFU)
    log = json.loads((out / "TOFU_EVAL.json").read_text())
    assert summary == {n: log[n]["agg_value"] for n in DEFAULT_TOFU}
    # their layout: every metric and every dependency under its log key, keys sorted
    assert list(log) == sorted(log)
    assert {
        "forget_truth_ratio",
        "forget_Q_A_PARA_Prob",
        "retain_Truth_Ratio",
        "ra_Q_A_Prob_normalised",
    } <= set(log)
    assert set(log["mia_min_k"]) == {"forget", "holdout", "auc", "agg_value"}
    assert log["forget_quality"] == {"agg_value": pytest.approx(log["forget_quality"]["agg_value"])}
    ours = [v["score"] for v in log["forget_truth_ratio"]["value_by_index"].values()]
    assert log["forget_quality"]["agg_value"] == pytest.approx(ks_2samp(ours, RETAIN_TR).pvalue)
    auc = log["mia_min_k"]["agg_value"]
    assert log["privleak"]["agg_value"] == pytest.approx(((1 - auc) - 0.53) / (0.53 + 1e-10) * 100)
    rouge = log["forget_Q_A_ROUGE"]["value_by_index"]["0"]
    assert rouge["ground_truth"] == SPLITS["forget10_perturbed"][0].answer
    assert set(rouge) == {
        "rouge1_recall",
        "rougeL_f1",
        "rougeL_recall",
        "input",
        "ground_truth",
        "generation",
    }
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["metrics"]["forget_truth_ratio"]["component"]["name"] == "truth_ratio"
    assert manifest["metrics"]["forget_truth_ratio"]["requested"] is True
    assert manifest["metrics"]["forget_Q_A_PARA_Prob"]["requested"] is False
    assert manifest["prompt"]["system_prompt"] == "You are a helpful assistant."
    assert manifest["data"]["splits"]["holdout10"]["rows"] == len(SPLITS["holdout10"])
    assert manifest["settings"]["dtype"] == "fp32" and manifest["notes"] == []
    # one cell per computed metric (dependencies too), each its own key, all computed on a fresh folder
    assert manifest["cells"] == {"computed": len(log), "reused": 0}
    assert len({m["cell_key"] for m in manifest["metrics"].values()}) == len(log) == len(manifest["metrics"])
    assert manifest["records"]["lines"] == len((out / "records.jsonl").read_text().splitlines())


def test_bf16_run_records_the_precision_reduction(
    tiny_llama_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_tofu_folder(tmp_path / "tofu")
    out = tmp_path / "out"
    argv = [
        "eval",
        str(tiny_llama_dir),
        "--data",
        str(data),
        "--out",
        str(out),
        "--metrics",
        "mia_min_k_plus_plus",
    ]
    assert main([*argv, "--dtype", "bf16", "--no-progress"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert any("R25" in n for n in manifest["notes"])
    assert 0.0 <= json.loads((out / "TOFU_EVAL.json").read_text())["mia_min_k_plus_plus"]["auc"] <= 1.0
    assert "R25" in capsys.readouterr().err


def _no_holdout(tmp: Path) -> Path:
    splits = {k: v for k, v in SPLITS.items() if k != "holdout10"}
    return write_tofu_folder(tmp / "tofu", splits)


def _nan_log(tmp: Path) -> Path:
    path = tmp / "retain_nan.json"
    path.write_text('{"forget_truth_ratio": {"agg_value": NaN, "value_by_index": {}}}')
    return path


def _file(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("not remnant's\n")
    return path


# (extra argv, data folder builder, what the one-line error must name, requirement id it must cite)
BAD: dict[str, tuple[Callable[[Path], list[str]], str, str]] = {
    "unknown metric": (lambda t: ["--metrics", "forget_Q_A_Prob,forget_prob"], "forget_prob", "R23"),
    "missing split": (lambda t: ["--metrics", "privleak", "--data", str(_no_holdout(t))], "holdout10", "R2"),
    "reference missing": (lambda t: ["--metrics", "mia_reference"], "--reference", "R23"),
    "nan retain log": (
        lambda t: ["--metrics", "forget_quality", "--retain-logs", str(_nan_log(t))],
        "retain_nan.json",
        "R23",
    ),
    "no data folder": (lambda t: ["--data", str(t / "nowhere")], "nowhere", "R2"),
    "out is a file": (lambda t: ["--out", str(_file(t / "taken.json"))], "is not a folder", "R23"),
    "out is someone's folder": (
        lambda t: ["--out", str(_file(t / "mine" / "notes.txt").parent)],
        "mine",
        "R23",
    ),
    "empty metric list": (lambda t: ["--metrics", " , "], "names no metric", "R23"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_and_exit_2(
    case: str, tiny_llama_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra, named, requirement = BAD[case]
    data = write_tofu_folder(tmp_path / "base")
    argv = [
        "eval",
        str(tiny_llama_dir),
        "--data",
        str(data),
        "--out",
        str(tmp_path / "o"),
        "--no-progress",
    ]
    code = main([*argv, *extra(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert named in err
    assert re.search(rf"\b{requirement}\b", err), err
    assert not (tmp_path / "o").exists()


def test_missing_split_names_the_metrics_that_read_it(
    tiny_llama_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "eval",
        str(tiny_llama_dir),
        "--data",
        str(_no_holdout(tmp_path)),
        "--out",
        str(tmp_path / "o"),
    ]
    assert main([*argv, "--metrics", "privleak,mia_loss"]) == 2
    assert "mia_min_k, mia_loss read" in capsys.readouterr().err


def test_out_is_openunlearnings_folder_with_records_and_manifest(
    tiny_llama_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--out DIR`` holds exactly OpenUnlearning's two files, the engine's records and manifest, and remnant's
    marker (R23); a null aggregate is left out of the summary, as their ``summarize`` does."""
    data = write_tofu_folder(tmp_path / "tofu")
    folder = tmp_path / "eval"
    argv = ["eval", str(tiny_llama_dir), "--data", str(data), "--no-progress", "--out", str(folder)]
    assert main([*argv, "--metrics", "forget_Q_A_Prob,forget_quality"]) == 0
    stdout = json.loads(capsys.readouterr().out)
    names = {p.name for p in folder.iterdir()} - {".remnant.lock"}
    assert names == {
        ".remnant-output.json",
        "TOFU_EVAL.json",
        "TOFU_SUMMARY.json",
        "manifest.json",
        "records.jsonl",
    }
    log = json.loads((folder / "TOFU_EVAL.json").read_text())
    assert log["forget_quality"] == {"agg_value": None}  # no retain model's log
    assert json.loads((folder / "TOFU_SUMMARY.json").read_text()) == stdout
    assert stdout == {"forget_Q_A_Prob": log["forget_Q_A_Prob"]["agg_value"]}
