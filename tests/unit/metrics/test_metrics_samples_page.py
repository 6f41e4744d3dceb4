"""``remnant eval --samples``: the log's per-item generations (prompt, answer, generation, scores) as an HTML page,
one collapsed table per generation metric, every value the log's own (R23)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from metrics_data import write_tofu_folder

from remnant.cli import main
from remnant.metrics.samples_page import samples_page

LOG = {
    "forget_Q_A_ROUGE": {
        "agg_value": 0.5,
        "value_by_index": {
            str(i): {
                "input": f"Question {i}?",
                "ground_truth": f"Answer {i}",
                "generation": "<script>alert(1)</script>" if i == 0 else f"gen {i}",
                "rougeL_recall": i / 4,
            }
            for i in range(3)
        },
    },
    "forget_Q_A_PERT_ROUGE": {
        "agg_value": 0.1,
        "value_by_index": {
            "0": {"input": ["Q?", "Q?"], "ground_truth": ["wrong a", "wrong b"], "generation": ["g", "g"]}
        },
    },
    "forget_Q_A_Prob": {"agg_value": 0.1, "value_by_index": {"0": {"prob": 0.1, "avg_loss": 2.3}}},
    "forget_quality": {"agg_value": 0.3},
}


def test_each_generation_metric_gets_a_collapsed_table_and_the_others_a_sentence() -> None:
    page = samples_page(LOG, title="t", limit=2)
    blocks = re.findall(r"<details[^>]*>", page)
    assert blocks == [
        '<details class="samples" id="samples-forget_Q_A_PERT_ROUGE">',
        '<details class="samples" id="samples-forget_Q_A_ROUGE">',
    ]
    assert "forget_Q_A_ROUGE: 2 of 3 items, 1 left out" in page
    assert "<td>1</td><td>Question 1?</td><td>Answer 1</td><td>gen 1</td><td>0.250</td>" in page
    assert "gen 2" not in page  # capped
    assert "<td>wrong a<br>wrong b</td>" in page  # several ground truths, one line each
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # a generation is text
    assert (
        "No per-item generations (probability or aggregate metrics): forget_Q_A_Prob, forget_quality." in page
    )


def test_eval_writes_the_samples_page_from_its_log(
    tiny_llama_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_tofu_folder(tmp_path / "tofu")
    out, page = tmp_path / "eval", tmp_path / "samples.html"
    argv = ["eval", str(tiny_llama_dir), "--data", str(data), "--out", str(out), "--no-progress"]
    code = main([*argv, "--metrics", "forget_Q_A_ROUGE", "--max-new-tokens", "3", "--samples", str(page)])
    assert code == 0, capsys.readouterr().err
    first = json.loads((out / "TOFU_EVAL.json").read_text())["forget_Q_A_ROUGE"]["value_by_index"]["0"]
    html = page.read_text()
    assert '<details class="samples" id="samples-forget_Q_A_ROUGE">' in html
    assert f"<td>{first['ground_truth']}</td>" in html and f"{first['rougeL_recall']:.3f}" in html


def test_samples_onto_the_log_is_refused_before_anything_runs(
    tiny_llama_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_tofu_folder(tmp_path / "tofu")
    out = tmp_path / "eval"
    samples = out / "TOFU_EVAL.json"
    argv = ["eval", str(tiny_llama_dir), "--data", str(data), "--out", str(out), "--samples", str(samples)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--samples" in err and "R23" in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()
