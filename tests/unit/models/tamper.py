"""Tampering with a copy of the tiny model folder: the hostile folders the loading tests are run on (R2)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"


def copy_model(source: Path, dest: Path) -> Path:
    """A private copy of ``source`` to tamper with."""
    shutil.copytree(source, dest)
    return dest


def edit_tensors(
    folder: Path, edit: Callable[[dict[str, torch.Tensor]], object], name: str = WEIGHTS
) -> None:
    """Rewrite the safetensors file ``name`` after ``edit`` changed its tensors in place."""
    tensors = load_file(folder / name)
    edit(tensors)
    save_file(tensors, folder / name, metadata={"format": "pt"})


def shard(
    folder: Path,
    names: tuple[str, str] = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"),
) -> dict[str, str]:
    """Split ``model.safetensors`` into two shards with an index naming both; returns the weight map."""
    tensors = load_file(folder / WEIGHTS)
    keys = sorted(tensors)
    half = len(keys) // 2
    weight_map = {}
    for part, chunk in zip(names, (keys[:half], keys[half:]), strict=True):
        save_file({k: tensors[k] for k in chunk}, folder / part, metadata={"format": "pt"})
        weight_map.update({k: part for k in chunk})
    (folder / WEIGHTS).unlink()
    write_index(folder, weight_map)
    return weight_map


def write_index(folder: Path, weight_map: dict[str, str]) -> None:
    """Write ``model.safetensors.index.json`` with ``weight_map``."""
    body = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    (folder / INDEX).write_text(json.dumps(body, indent=2), encoding="utf-8")


def index_to(folder: Path, shard_name: str) -> None:
    """Map every tensor of ``model.safetensors`` to ``shard_name`` in a new index (the file stays as a decoy)."""
    keys = load_file(folder / WEIGHTS).keys()
    write_index(folder, {k: shard_name for k in keys})


def set_json(folder: Path, name: str, **fields: object) -> None:
    """Set ``fields`` in the JSON object file ``name``."""
    data = json.loads((folder / name).read_text(encoding="utf-8"))
    data.update(fields)
    (folder / name).write_text(json.dumps(data, indent=2), encoding="utf-8")


def flip_byte(path: Path, offset: int) -> None:
    """Change one byte of ``path`` (at ``offset``, negative from the end)."""
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def move_outside(folder: Path, name: str, outside: Path) -> Path:
    """Move ``folder/name`` to ``outside/name`` and leave a symlink to it in the folder."""
    outside.mkdir(parents=True, exist_ok=True)
    target = outside / name
    shutil.move(folder / name, target)
    (folder / name).symlink_to(target)
    return target


def write_tiny_gguf(folder: Path, out: Path) -> Path:
    """The tiny Llama ``folder`` as a llama.cpp-style F32 GGUF (q/k permuted the way llama.cpp stores them)."""
    import gguf
    from safetensors.numpy import load_file

    cfg = json.loads((folder / "config.json").read_text())
    tok = json.loads((folder / "tokenizer.json").read_text())
    layers, heads, kv = cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    w = gguf.GGUFWriter(str(out), "llama")
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_block_count(layers)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_rope_dimension_count(cfg["head_dim"])
    w.add_rope_freq_base(10000.0)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_vocab_size(cfg["vocab_size"])
    added = {t["content"]: t["id"] for t in tok["added_tokens"]}
    vocab = {**tok["model"]["vocab"], **added}
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv_: kv_[1])]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types([3 if t in added else 1 for t in tokens])
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]])
    w.add_bos_token_id(cfg["bos_token_id"])
    w.add_eos_token_id(cfg["eos_token_id"])
    w.add_pad_token_id(cfg["pad_token_id"])
    w.add_chat_template((folder / "chat_template.jinja").read_text())
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, layers)

    def permute(x: np.ndarray, n: int) -> np.ndarray:
        return x.reshape(n, 2, x.shape[0] // n // 2, *x.shape[1:]).swapaxes(1, 2).reshape(x.shape)

    for key, value in load_file(folder / WEIGHTS).items():
        base, suffix = key.rsplit(".", 1)
        name = f"{names.get_name(base)}.{suffix}"
        if name.endswith("attn_q.weight"):
            value = permute(value, heads)
        elif name.endswith("attn_k.weight"):
            value = permute(value, kv)
        w.add_tensor(name, np.ascontiguousarray(value.astype(np.float32)))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out
