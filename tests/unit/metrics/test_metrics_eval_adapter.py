"""``remnant eval`` on a PEFT LoRA adapter folder (R2): the adapter is applied and merged before scoring, so its
metrics are those of the merged model saved as a plain folder, while its identity is its own (base files +
adapter files), different from the base's and the merged folder's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from metrics_data import write_tofu_folder

from fixtures_models import build_lora_adapter
from remnant.cli import main

METRICS = "forget_Q_A_Prob,forget_truth_ratio,forget_Q_A_ROUGE,mia_min_k"


def _scores(log: dict[str, Any]) -> dict[str, float]:
    """Every number in an evaluation log, by its key path (generations are compared separately)."""
    out: dict[str, float] = {}

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{path}/{key}")
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            out[path] = float(node)

    walk(log, "")
    return out


def _eval(model: Path, data: Path, out: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    argv = ["eval", str(model), "--data", str(data), "--out", str(out), "--metrics", METRICS]
    assert main([*argv, "--max-new-tokens", "4", "--no-progress"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    return json.loads((out / "TOFU_EVAL.json").read_text()), manifest["model"]["identity"]


def test_adapter_scores_as_its_merged_model(
    tiny_llama_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from remnant.models import save_model

    data = write_tofu_folder(tmp_path / "tofu")
    adapter = build_lora_adapter(tiny_llama_dir, tmp_path / "adapter", seed=3)
    # merged by peft itself, apart from remnant's loader, and saved as a plain safetensors folder
    base_model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, use_safetensors=True)
    merged = PeftModel.from_pretrained(base_model, adapter).merge_and_unload()
    save_model(merged, AutoTokenizer.from_pretrained(tiny_llama_dir), tmp_path / "merged")
    got, adapter_id = _eval(adapter, data, tmp_path / "a")
    want, merged_id = _eval(tmp_path / "merged", data, tmp_path / "m")
    base, base_id = _eval(tiny_llama_dir, data, tmp_path / "b")
    capsys.readouterr()
    scores, merged_scores = _scores(got), _scores(want)
    assert set(scores) == set(merged_scores) and len(scores) > 10
    for key, value in merged_scores.items():
        assert scores[key] == pytest.approx(value, abs=1e-5, rel=1e-5), key
    # the adapter changes the model: the base scores otherwise (so the comparison above could fail)
    base_scores = _scores(base)
    assert max(abs(base_scores[k] - scores[k]) for k in scores) > 1e-2
    assert len({adapter_id["digest"], merged_id["digest"], base_id["digest"]}) == 3
    assert adapter_id["weights"]["model.safetensors"] == base_id["weights"]["model.safetensors"]
    assert "adapter/adapter_model.safetensors" in adapter_id["weights"]
