"""A model's identity is what was loaded (R2, R23): every file read is hashed, nothing else is.

Two loads of one folder give one digest; changing one byte of any file the load reads (a shard, the index,
config.json, generation_config.json, a tokenizer file, the chat template) changes it; a file the load does not
read (a stray ``*.safetensors`` beside an index, a README) does not. Single-file GGUF loads are identified by the
GGUF file alone, and load to the same logits as the safetensors folder they were written from.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from tamper import WEIGHTS, copy_model, flip_byte, shard, write_tiny_gguf

from remnant.models import load_model
from remnant.models.identity import ModelIdentity, identify


def _whitespace_byte(path: Path) -> None:
    """One byte changed, the JSON still valid: the newline after the opening brace becomes a carriage return."""
    data = bytearray(path.read_bytes())
    assert data[:2] == b"{\n", path
    data[1] = ord("\r")
    path.write_bytes(bytes(data))


def _template_byte(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("assistant", "assistanT", 1), encoding="utf-8")


@pytest.fixture
def sharded(tmp_path: Path, tiny_llama_dir: Path) -> Path:
    folder = copy_model(tiny_llama_dir, tmp_path / "sharded")
    shard(folder)
    return folder


def test_two_loads_of_one_folder_give_one_digest(tiny_llama_dir: Path) -> None:
    first, second = load_model(tiny_llama_dir).identity, load_model(tiny_llama_dir).identity
    assert first == second
    assert set(first.config) == {"config.json", "generation_config.json"}
    assert set(first.tokenizer) == {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"}


@pytest.mark.parametrize(
    ("name", "change", "field"),
    [
        ("model-00001-of-00002.safetensors", lambda p: flip_byte(p, -1), "weights"),
        ("model-00002-of-00002.safetensors", lambda p: flip_byte(p, -3), "weights"),
        ("model.safetensors.index.json", _whitespace_byte, "weights"),
        ("config.json", _whitespace_byte, "config"),
        ("generation_config.json", _whitespace_byte, "config"),
        ("tokenizer.json", _whitespace_byte, "tokenizer"),
        ("tokenizer_config.json", _whitespace_byte, "tokenizer"),
        ("chat_template.jinja", _template_byte, "tokenizer"),
    ],
)
def test_one_byte_of_any_file_read_changes_the_digest(
    sharded: Path, name: str, change: Callable[[Path], object], field: str
) -> None:
    before = load_model(sharded).identity
    change(sharded / name)
    after = load_model(sharded).identity
    assert after.digest != before.digest
    assert getattr(after, field)[name] != getattr(before, field)[name]
    if name == "chat_template.jinja":
        assert after.chat_template != before.chat_template


def test_files_not_read_do_not_change_the_digest(sharded: Path, tiny_llama_dir: Path) -> None:
    before = load_model(sharded).identity
    shutil.copy(
        tiny_llama_dir / WEIGHTS, sharded / WEIGHTS
    )  # a stray beside the index: neither read nor hashed
    (sharded / "README.md").write_text("a model card")
    (sharded / "pytorch_model.bin").write_bytes(b"\x80\x04never read")
    after = load_model(sharded).identity
    assert after == before
    assert WEIGHTS not in after.weights


def test_identify_of_a_saved_folder_equals_its_load(tiny_llama_dir: Path) -> None:
    state = load_model(tiny_llama_dir)
    assert identify(tiny_llama_dir, state.model, state.tokenizer) == state.identity


def test_digest_covers_every_field(tiny_llama_dir: Path) -> None:
    ident = load_model(tiny_llama_dir).identity
    from remnant.statement.canonical import canonical_sha256

    fields = ident.model_dump(exclude={"digest"})
    assert canonical_sha256(fields) == ident.digest
    fields["config"] = {**fields["config"], "config.json": "0" * 64}
    assert canonical_sha256(fields) != ident.digest


def test_identities_recorded_before_config_was_hashed_still_read() -> None:
    old = {
        "weights": {WEIGHTS: "a" * 64},
        "tokenizer": {},
        "chat_template": None,
        "architecture": "LlamaForCausalLM",
        "parameter_count": 1,
        "dtype": "fp32",
        "device": "cpu",
        "digest": "b" * 64,
    }
    assert ModelIdentity.model_validate(old).config == {}


# ---- GGUF -------------------------------------------------------------------------------------------------


def test_gguf_file_loads_like_its_folder_and_is_identified_by_itself(
    tmp_path: Path, tiny_llama_dir: Path
) -> None:
    (tmp_path / "g").mkdir()
    gguf_file = write_tiny_gguf(tiny_llama_dir, tmp_path / "g" / "tiny.gguf")
    (tmp_path / "g" / "tokenizer_config.json").write_text(
        '{"auto_map": {"AutoTokenizer": "x.X"}}'
    )  # not read
    state, folder = load_model(gguf_file), load_model(tiny_llama_dir)
    assert set(state.identity.weights) == {"tiny.gguf"}
    assert state.identity.tokenizer == {} and state.identity.config == {}
    assert state.identity.chat_template == folder.identity.chat_template
    ids = torch.tensor([folder.tokenizer("Zorvak works at Quarn")["input_ids"]])
    assert state.tokenizer("Zorvak works at Quarn")["input_ids"] == ids[0].tolist()
    with torch.no_grad():
        assert torch.allclose(state.model(ids).logits, folder.model(ids).logits, atol=1e-5)
    flip_byte(gguf_file, -1)
    assert load_model(gguf_file).identity.digest != state.identity.digest
