"""Hub ids (``org/name``) resolve through huggingface_hub as transformers does (R2): offline, from the local
cache's layout (``models--org--name/snapshots/<rev>/`` linking into ``blobs/``, ``refs/main`` naming the
revision), with ``HF_HUB_OFFLINE=1`` and huggingface_hub's cache folder pointed at a temporary one. There is no
network here, so a fetch that tried it would fail."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from fixtures_models import build_lora_adapter, cache_as_hub


@dataclass(frozen=True)
class Identified:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def identify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[[str], Identified]:
    """``remnant models identify NAME`` in-process, offline, on the hub cache ``tmp_path/hf/hub``."""
    from huggingface_hub import constants

    from remnant.cli import main

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def run(name: str) -> Identified:
        code = main(["models", "identify", name])
        out, err = capsys.readouterr()
        return Identified(code, out, err)

    return run


def test_hub_ids_and_adapters_on_hub_bases_load_offline_from_the_cache(
    tiny_llama_dir: Path, tmp_path: Path, identify: Callable[[str], Identified]
) -> None:
    cache = tmp_path / "hf" / "hub"
    cache_as_hub(cache, "tiny-org/tiny-llama", tiny_llama_dir)
    adapter = build_lora_adapter(tiny_llama_dir, tmp_path / "adapter", base_name="tiny-org/tiny-llama")
    cache_as_hub(cache, "tiny-org/tiny-lora", adapter)
    base = identify("tiny-org/tiny-llama")
    assert base.returncode == 0, base.stderr
    local = identify(str(tiny_llama_dir))
    assert json.loads(base.stdout) == json.loads(local.stdout), (
        "a cached hub id is the same files, one identity"
    )
    on_hub_base = identify(str(adapter))  # a local adapter whose base is a hub id
    from_hub = identify("tiny-org/tiny-lora")  # an adapter published on the hub
    assert on_hub_base.returncode == 0 and from_hub.returncode == 0, on_hub_base.stderr + from_hub.stderr
    assert json.loads(on_hub_base.stdout) == json.loads(from_hub.stdout)
    assert json.loads(from_hub.stdout)["digest"] != json.loads(base.stdout)["digest"]
    missing = identify("tiny-org/not-cached")
    assert missing.returncode == 2 and "tiny-org/not-cached" in missing.stderr, missing.stderr
    assert "not in the local Hugging Face cache" in missing.stderr and "(R2)" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_a_cached_snapshot_of_pickles_only_is_refused(
    tiny_llama_dir: Path, tmp_path: Path, identify: Callable[[str], Identified]
) -> None:
    """safetensors only (R2): a hub repo publishing pytorch_model.bin loads nothing."""
    cache = tmp_path / "hf" / "hub"
    pickled = tmp_path / "pickled"
    shutil.copytree(tiny_llama_dir, pickled)
    os.replace(pickled / "model.safetensors", pickled / "pytorch_model.bin")
    cache_as_hub(cache, "tiny-org/pickled", pickled)
    result = identify("tiny-org/pickled")
    assert result.returncode == 2, result.stderr
    assert "R2" in result.stderr and "Traceback" not in result.stderr
