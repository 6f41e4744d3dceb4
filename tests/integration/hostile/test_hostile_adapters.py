"""Hostile PEFT adapter folders (R2): each is refused by `remnant models identify` with exit 2, the file named.

Every case starts from a LoRA adapter on the tiny Llama (``tmp/adapter``, its base ``tmp/base``) and tampers
with it the way a claimant who publishes an unlearned checkpoint as an adapter could: pickled adapter weights, a
base that is missing, not a hub id, itself an adapter, an adapter type remnant does not apply, a config that
makes peft import a module, adapter tensors that do not fit the base or are not LoRA parameters of it.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from harness import Hostile, check, ids
from safetensors.torch import load_file, save_file

from fixtures_models import build_lora_adapter

CONFIG = "adapter_config.json"
WEIGHTS = "adapter_model.safetensors"

Tamper = Callable[[Path, Path], object]


@pytest.fixture(scope="module")
def adapter_dir(tiny_llama_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A LoRA adapter whose config names its base as ``../base`` (relative to the adapter folder)."""
    return build_lora_adapter(
        tiny_llama_dir, tmp_path_factory.mktemp("lora") / "adapter", base_name="../base"
    )


def _config(**fields: object) -> Tamper:
    def tamper(a: Path, tmp: Path) -> None:
        data = json.loads((a / CONFIG).read_text(encoding="utf-8"))
        data.update(fields)
        (a / CONFIG).write_text(json.dumps(data), encoding="utf-8")

    return tamper


def _tensors(edit: Callable[[dict[str, torch.Tensor]], object]) -> Tamper:
    def tamper(a: Path, tmp: Path) -> None:
        tensors = load_file(a / WEIGHTS)
        edit(tensors)
        save_file(tensors, a / WEIGHTS, metadata={"format": "pt"})

    return tamper


def _first_lora_a(t: dict[str, torch.Tensor]) -> str:
    return sorted(k for k in t if "lora_A" in k)[0]


def _link_out(a: Path, tmp: Path, name: str) -> None:
    os.replace(a / name, tmp / name)
    (a / name).symlink_to(tmp / name)


def _adapter_as_base(a: Path, tmp: Path) -> None:
    """The base folder is replaced by a second adapter: chains of adapters are refused."""
    shutil.rmtree(tmp / "base")
    shutil.copytree(a, tmp / "base")


def _case(case_id: str, tamper: Tamper, named: Callable[[Path, Path], object]) -> Hostile:
    def build(tmp: Path) -> tuple[list[str], str]:
        a = tmp / "adapter"
        tamper(a, tmp)
        return ["models", "identify", str(a)], str(named(a, tmp))

    return Hostile(case_id, build, requirement="R2")


def _in(name: str) -> Callable[[Path, Path], Path]:
    return lambda a, tmp: a / name


CASES = [
    _case(
        "pickled-adapter-weights",
        lambda a, tmp: os.replace(a / WEIGHTS, a / "adapter_model.bin"),
        _in("adapter_model.bin"),
    ),
    _case("no-adapter-weights", lambda a, tmp: (a / WEIGHTS).unlink(), lambda a, tmp: a),
    _case("no-base-named", _config(base_model_name_or_path=None), _in(CONFIG)),
    _case("base-folder-missing", lambda a, tmp: shutil.rmtree(tmp / "base"), _in(CONFIG)),
    _case("base-neither-folder-nor-hub-id", _config(base_model_name_or_path="no/such/base"), _in(CONFIG)),
    _case("base-is-an-adapter", _adapter_as_base, _in(CONFIG)),
    _case("not-lora", _config(peft_type="PROMPT_TUNING"), _in(CONFIG)),
    _case("megatron-import", _config(megatron_config={}, megatron_core="os"), _in(CONFIG)),
    _case("config-not-json", lambda a, tmp: (a / CONFIG).write_text("{'r': 4}"), _in(CONFIG)),
    _case(
        "adapter-shape-does-not-fit-base",
        _tensors(lambda t: t.__setitem__(_first_lora_a(t), torch.zeros(4, 65))),
        lambda a, tmp: a,
    ),
    _case(
        "adapter-tensor-not-in-base",
        _tensors(lambda t: t.__setitem__("base_model.model.model.payload.lora_A.weight", torch.zeros(4, 64))),
        _in(WEIGHTS),
    ),
    _case("adapter-tensor-missing", _tensors(lambda t: t.pop(_first_lora_a(t))), _in(WEIGHTS)),
    _case("adapter-weights-linked-outside", lambda a, tmp: _link_out(a, tmp, WEIGHTS), _in(WEIGHTS)),
    _case("python-file-in-adapter", lambda a, tmp: (a / "evil.py").write_text("import os"), _in("evil.py")),
]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_hostile_adapter_folder_is_refused(
    case: Hostile,
    tmp_path: Path,
    tiny_llama_dir: Path,
    adapter_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shutil.copytree(tiny_llama_dir, tmp_path / "base")
    shutil.copytree(adapter_dir, tmp_path / "adapter")
    text = check(case, tmp_path, capsys)
    assert [line.startswith("remnant models: error: ") for line in text.splitlines()].count(True) == 1, text


def test_the_untampered_adapter_is_accepted(
    tmp_path: Path, tiny_llama_dir: Path, adapter_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cases fail because of their tampering: the copied adapter, its base beside it, identifies."""
    from remnant.cli import main

    shutil.copytree(tiny_llama_dir, tmp_path / "base")
    shutil.copytree(adapter_dir, tmp_path / "adapter")
    assert main(["models", "identify", str(tmp_path / "adapter")]) == 0
    identity = json.loads(capsys.readouterr().out)
    assert set(identity["weights"]) == {"model.safetensors", f"adapter/{WEIGHTS}"}
    assert f"adapter/{CONFIG}" in identity["config"]
    assert identity["architecture"] == "LlamaForCausalLM"
