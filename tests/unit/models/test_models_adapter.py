"""A PEFT LoRA adapter folder is a model argument everywhere a folder is (R2, R23): the file choice that loads,
hashes, preflights and fingerprints it is one (:func:`remnant.models.files.model_files`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures_models import build_lora_adapter
from remnant.models.files import model_files


@pytest.fixture(scope="module")
def adapter(tiny_llama_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_lora_adapter(tiny_llama_dir, tmp_path_factory.mktemp("lora") / "adapter", seed=1)


def test_the_files_of_an_adapter_are_its_bases_and_its_own(tiny_llama_dir: Path, adapter: Path) -> None:
    base, files = model_files(tiny_llama_dir), model_files(adapter)
    assert files.weights == base.weights and files.tokenizer == base.tokenizer
    assert files.adapter == ("adapter/adapter_config.json", "adapter/adapter_model.safetensors")
    assert files.names == base.names + files.adapter
    assert (
        files.resolved["adapter/adapter_model.safetensors"]
        == (adapter / "adapter_model.safetensors").resolve()
    )
    assert files.resolved["model.safetensors"] == base.resolved["model.safetensors"]


def test_sweep_pools_and_preflight_take_an_adapter_folder(tiny_llama_dir: Path, adapter: Path) -> None:
    from remnant.assess.states import check_model_folder
    from remnant.states.store import parameter_shapes
    from remnant.sweep.prepare import folder_digest

    check_model_folder(adapter, "models.post_removal.folder")
    assert parameter_shapes(adapter) == parameter_shapes(tiny_llama_dir)  # merged: the base's shapes
    cache: dict[str, str] = {}
    assert folder_digest(adapter, cache) != folder_digest(tiny_llama_dir, cache)
    assert len(cache) == len(model_files(adapter).names)  # the base's files hashed once, shared


def test_a_relative_base_resolves_beside_the_adapter(tiny_llama_dir: Path, tmp_path: Path) -> None:
    import shutil

    from remnant.models import load_model

    shutil.copytree(tiny_llama_dir, tmp_path / "base")
    moved = build_lora_adapter(tmp_path / "base", tmp_path / "nested" / "adapter", base_name="../../base")
    state = load_model(moved)  # a Path, as a config's folder is given
    assert set(state.identity.weights) == {"model.safetensors", "adapter/adapter_model.safetensors"}
    assert state.identity.architecture == "LlamaForCausalLM"
