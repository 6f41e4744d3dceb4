"""Loading (R2 identity; untrusted files refused)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from remnant.errors import ModelError
from remnant.models import load_model, save_model
from remnant.models.identity import identify, weights_digest_of


def test_folder_loads_in_eval_mode_with_identity(tiny_llama_dir: Path) -> None:
    state = load_model(tiny_llama_dir)
    assert not state.model.training
    ident = state.identity
    assert ident.architecture == "LlamaForCausalLM"
    assert ident.parameter_count == sum(p.numel() for p in state.model.parameters())
    assert set(ident.weights) == {"model.safetensors"}
    assert ident.chat_template is not None and ident.dtype == "fp32" and ident.device == "cpu"


def test_bf16_policy_and_fp16_refused_on_cpu(tiny_llama_dir: Path) -> None:
    assert next(load_model(tiny_llama_dir, dtype="bf16").model.parameters()).dtype == torch.bfloat16
    with pytest.raises(ModelError, match="fp16"):
        load_model(tiny_llama_dir, dtype="fp16")


def test_pickle_only_folder_refused_naming_file(tmp_path: Path, tiny_llama_dir: Path) -> None:
    folder = tmp_path / "pickled"
    shutil.copytree(tiny_llama_dir, folder)
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(b"not loaded")
    with pytest.raises(ModelError, match="pytorch_model.bin"):
        load_model(folder)


def test_trust_remote_code_cannot_be_turned_on() -> None:
    import inspect

    assert "trust_remote_code" not in inspect.signature(load_model).parameters


def test_hub_id_fails_fast_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(
        ModelError, match="not-a-model: hub model not in the local Hugging Face cache"
    ) as info:
        load_model("nobody-here/not-a-model")
    assert info.value.requirement == "R2"


def test_identity_changes_when_one_weight_changes(tmp_path: Path, tiny_llama_dir: Path) -> None:
    state = load_model(tiny_llama_dir)
    before_mem = weights_digest_of(state.model)
    with torch.no_grad():
        state.model.lm_head.weight[0, 0] += 1.0
    assert weights_digest_of(state.model) != before_mem
    out = save_model(state.model, state.tokenizer, tmp_path / "changed")
    changed = identify(out, state.model, state.tokenizer)
    assert changed.weights != state.identity.weights and changed.digest != state.identity.digest
    # tokenizer_config.json is rewritten by save_pretrained; the vocabulary itself must be unchanged
    assert changed.tokenizer["tokenizer.json"] == state.identity.tokenizer["tokenizer.json"]
