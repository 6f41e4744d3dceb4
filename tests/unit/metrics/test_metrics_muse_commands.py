"""``remnant eval`` on a MUSE-format folder written here: the suite follows the folder, their default MUSE list,
their log layout, and one-line refusals (exit 2) naming the folder, the split and the metric."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from metrics_data import write_tofu_folder
from muse_data import MUSE, write_muse_folder

from remnant.cli import main
from remnant.metrics.catalogue import DEFAULT_MUSE


def _argv(model: Path, data: Path, out: Path, *extra: str) -> list[str]:
    return ["eval", str(model), "--data", str(data), "--out", str(out), "--no-progress", *extra]


def test_default_muse_suite_from_the_folder(
    tiny_llama_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_muse_folder(tmp_path / "muse")
    retain = tmp_path / "retain.json"
    retain.write_text(json.dumps({"mia_min_k": {"agg_value": 0.47, "auc": 0.47}}))
    out = tmp_path / "eval"
    assert main(_argv(tiny_llama_dir, data, out, "--retain-logs", str(retain))) == 0
    summary = json.loads((out / "MUSE_SUMMARY.json").read_text())  # their MUSE_SUMMARY.json, printed too
    assert json.loads(capsys.readouterr().out) == summary and list(summary) == sorted(DEFAULT_MUSE)
    log = json.loads((out / "MUSE_EVAL.json").read_text())
    assert list(log) == sorted(DEFAULT_MUSE + ("mia_min_k",))  # the dependency is logged too, keys sorted
    auc = log["mia_min_k"]["agg_value"]
    assert log["privleak"]["agg_value"] == pytest.approx(((1 - auc) - 0.53) / (0.53 + 1e-10) * 100)
    knowmem = log["forget_knowmem_ROUGE"]
    assert len(knowmem["value_by_index"]) == len(MUSE["knowmem/forget_qa"])
    f1 = [v["rougeL_f1"] for v in knowmem["value_by_index"].values()]
    assert knowmem["agg_value"] == pytest.approx(sum(f1) / len(f1))
    assert (
        log["forget_verbmem_ROUGE"]["value_by_index"]["1"]["ground_truth"] == MUSE["verbmem/forget"][1]["gt"]
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["settings"]["suite"] == "muse" and "forget_split" not in manifest["settings"]
    assert manifest["metrics"]["forget_knowmem_ROUGE"]["component"]["params"] == {
        "rouge_type": "rougeL_f1",
        "max_new_tokens": 32,
        "stopwords": ["\n\n", "\nQuestion", "Question:"],
    }
    assert (
        manifest["metrics"]["forget_knowmem_ROUGE"]["sources"]["items"]["few_shot"] == "knowmem/forget_qa_icl"
    )
    assert manifest["metrics"]["forget_verbmem_ROUGE"]["component"]["params"]["max_new_tokens"] == 128
    assert manifest["metrics"]["mia_min_k"]["requested"] is False
    splits = manifest["data"]["splits"]
    assert manifest["data"]["format"] == "muse" and splits["privleak/holdout"]["rows"] == 3


def test_explicit_suite_and_metrics(
    tiny_llama_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_muse_folder(tmp_path / "muse", {k: v for k, v in MUSE.items() if k.startswith("privleak/")})
    out = tmp_path / "o"
    assert main(_argv(tiny_llama_dir, data, out, "--suite", "muse", "--metrics", "mia_loss,mia_zlib")) == 0
    log = json.loads((out / "MUSE_EVAL.json").read_text())
    assert set(log) == {"mia_loss", "mia_zlib"}
    assert len(log["mia_loss"]["forget"]["value_by_index"]) == len(MUSE["privleak/forget"])
    assert 0.0 <= log["mia_zlib"]["auc"] <= 1.0


def _without(tmp: Path, *names: str) -> Path:
    return write_muse_folder(tmp / "muse", {k: v for k, v in MUSE.items() if k not in names})


# (extra argv, data folder builder, what the one-line error must name, requirement id it must cite)
Case = tuple[Callable[[Path], list[str]], Callable[[Path], Path], tuple[str, ...], str]
BAD: dict[str, Case] = {
    "no icl split": (
        lambda t: [],
        lambda t: _without(t, "knowmem/forget_qa_icl"),
        ("muse", "'knowmem/forget_qa_icl'", "forget_knowmem_ROUGE"),
        "R2",
    ),
    "no holdout, privleak asked": (
        lambda t: ["--metrics", "privleak"],
        lambda t: _without(t, "privleak/holdout"),
        ("muse", "'privleak/holdout'", "mia_min_k read (computed for privleak)"),
        "R2",
    ),
    "no verbmem": (
        lambda t: ["--metrics", "exact_memorization,forget_verbmem_ROUGE"],
        lambda t: _without(t, "verbmem/forget"),
        ("muse", "'verbmem/forget'", "exact_memorization, forget_verbmem_ROUGE"),
        "R2",
    ),
    "MUSE asked of a TOFU folder": (
        lambda t: ["--suite", "muse", "--metrics", "retain_knowmem_ROUGE"],
        lambda t: write_tofu_folder(t / "tofu"),
        ("tofu", "'knowmem/retain_qa'", "retain_knowmem_ROUGE"),
        "R2",
    ),
    "TOFU metric on a MUSE folder": (
        lambda t: ["--metrics", "forget_Q_A_Prob"],
        lambda t: write_muse_folder(t / "muse"),
        ("'forget_Q_A_Prob'", "MUSE suite", "--suite tofu"),
        "R23",
    ),
    "TOFU option on a MUSE folder": (
        lambda t: ["--forget-split", "forget05"],
        lambda t: write_muse_folder(t / "muse"),
        ("--forget-split", "MUSE"),
        "R23",
    ),
    "remnant prompt with in-context examples": (
        lambda t: ["--prompt", "remnant", "--metrics", "privleak,retain_knowmem_ROUGE"],
        lambda t: write_muse_folder(t / "muse"),
        ("retain_knowmem_ROUGE", "knowmem/retain_qa_icl", "--prompt remnant"),
        "R23",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_muse_input_is_one_line_and_exit_2(
    case: str, tiny_llama_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra, folder, named, requirement = BAD[case]
    data = folder(tmp_path)
    code = main(_argv(tiny_llama_dir, data, tmp_path / "o", *extra(tmp_path)))
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for text in named:
        assert text in err, (text, err)
    if "no " in case or "asked of" in case:
        assert str(data) in err  # the folder is named
    assert re.search(rf"\b{requirement}\b", err), err
    assert not (tmp_path / "o").exists()
