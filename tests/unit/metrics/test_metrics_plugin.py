"""The example plugin (examples/plugin, entry point ``remnant.metrics``) through ``remnant eval`` and the Python API
on the tiny model: its value equals a naive mean over forget rows of the answer tokens' NLL, and ``remnant.evaluate``
returns the summary ``remnant eval`` prints, for a folder and for an in-memory (model, tokenizer) pair (K4, R23)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from metrics_data import SPLITS, write_tofu_folder
from ou_naive import ou_instance, ou_probability

import remnant
from plugin_fixtures import example_plugin, isolated_registry
from remnant.cli import main

__all__ = ["example_plugin", "isolated_registry"]  # fixtures, imported for use here

#: OpenUnlearning's prompt as ``remnant eval`` uses it by default (the tiny tokenizer has a chat template).
CHAT = {"apply_chat_template": True, "system_prompt": "You are a helpful assistant."}


def _cli_summary(model: Path, data: Path, out: Path, metrics: str, capsys: pytest.CaptureFixture[str]) -> Any:
    argv = ["eval", str(model), "--data", str(data), "--out", str(out), "--metrics", metrics, "--no-progress"]
    assert main([*argv, "--batch-size", "3"]) == 0
    return json.loads(capsys.readouterr().out)


def test_example_metric_equals_the_naive_mean_answer_nll(
    example_plugin: Path,
    tiny_llama_dir: Path,
    tiny_llama: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = write_tofu_folder(tmp_path / "tofu")
    summary = _cli_summary(tiny_llama_dir, data, tmp_path / "out", "example_mean_answer_nll", capsys)
    model, tok = tiny_llama.model, tiny_llama.tokenizer
    naive = [
        ou_probability(model, *ou_instance(tok, CHAT, r.question, r.answer))[1]
        for r in SPLITS["forget10_perturbed"]
    ]
    assert list(summary) == ["example_mean_answer_nll"]
    assert summary["example_mean_answer_nll"] == pytest.approx(float(np.mean(naive)), abs=1e-5)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    component = manifest["metrics"]["example_mean_answer_nll"]["component"]
    assert (component["name"], component["version"]) == ("example_mean_answer_nll", "1")


def test_api_summary_equals_the_command_line_for_a_folder_and_an_in_memory_pair(
    tiny_llama_dir: Path, tiny_llama: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_tofu_folder(tmp_path / "tofu")
    names = "forget_Q_A_Prob,forget_truth_ratio,mia_min_k"
    cli = _cli_summary(tiny_llama_dir, data, tmp_path / "out", names, capsys)
    assert cli == json.loads((tmp_path / "out" / "TOFU_SUMMARY.json").read_text())
    by_folder = remnant.evaluate(tiny_llama_dir, data, metrics=names, batch_size=3)
    assert by_folder.summary == cli
    assert json.loads(by_folder.log_json()) == json.loads((tmp_path / "out" / "TOFU_EVAL.json").read_text())
    pair = remnant.evaluate(
        (tiny_llama.model, tiny_llama.tokenizer), data, metrics=names.split(","), batch_size=5
    )
    assert list(pair.summary) == list(cli)
    np.testing.assert_allclose(list(pair.summary.values()), list(cli.values()), atol=1e-5)
    assert pair.manifest["model"]["source"] == "in-memory"
    assert pair.manifest["settings"]["batch_size"] == 5


def test_api_refuses_an_option_the_command_lacks(tiny_llama_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="no option 'forget_splits'"):
        remnant.evaluate(tiny_llama_dir, tmp_path, forget_splits="forget05")
    with pytest.raises(remnant.ModelError, match=r"\(str, NoneType\).*R23"):
        remnant.evaluate(("a model", None), write_tofu_folder(tmp_path / "pair"))
    with pytest.raises(remnant.ConfigError, match="R23"):
        remnant.evaluate(tiny_llama_dir, write_tofu_folder(tmp_path / "tofu"), metrics="no_such_metric")
