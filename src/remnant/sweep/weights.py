"""Checkpoints in and out of the store (:mod:`remnant.sweep.store`): deltas, LoRA adapters, and loading a chain.

A stored checkpoint names its parent (another checkpoint, or ``None``: the base model). Loading walks the chain
from the base model: load the base, then apply each checkpoint's delta (``load_state_dict`` of the tensors it
changed) or LoRA adapter (wrap with the same LoRA config, set A and B, merge) in order, then check the weights
digest the build recorded (R23). Merging an adapter here does the arithmetic ``apply_removal`` did when it merged
the same adapter, so the loaded weights are the built ones bit for bit (tested).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from remnant.errors import IntegrityError
from remnant.sweep.store import ADAPTER, DELTA, META, CheckpointStore, dump_meta


def changed_tensors(model: Any, parent: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The state-dict entries of ``model`` that differ from ``parent``'s (cloned, contiguous, on the CPU)."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in model.state_dict().items():
        before = parent.get(name)
        if (
            before is None
            or before.shape != tensor.shape
            or not torch.equal(before, tensor.to(before.device))
        ):
            out[name] = tensor.detach().to("cpu").contiguous().clone()
    return out


def lora_tensors(model: Any) -> dict[str, torch.Tensor]:
    """The LoRA adapter tensors of a peft-wrapped model (names as peft gives them), cloned on the CPU."""
    return {n: p.detach().to("cpu").contiguous().clone() for n, p in model.named_parameters() if "lora_" in n}


def weights_digest(model: Any) -> str:
    from remnant.models.identity import weights_digest_of

    return weights_digest_of(model)


def save_checkpoint(
    store: CheckpointStore, key: str, meta: dict[str, Any], tensors: Mapping[str, torch.Tensor], fmt: str
) -> None:
    """Write ``tensors`` (a delta, or a LoRA adapter when ``fmt == "lora"``) and ``meta`` as checkpoint ``key``."""
    from pathlib import Path

    from safetensors.torch import save_file

    from remnant.atomic import replace_dir, write_atomic

    def build(tmp: Path) -> None:
        save_file(dict(tensors), str(tmp / (ADAPTER if fmt == "lora" else DELTA)))
        write_atomic(tmp / META, dump_meta({**meta, "format": fmt}))

    replace_dir(store.folder(key), build)


def _apply(model: Any, store: CheckpointStore, key: str, meta: dict[str, Any]) -> Any:
    from safetensors.torch import load_file

    folder = store.folder(key)
    device = next(model.parameters()).device
    if meta["format"] == "delta":
        tensors = load_file(str(folder / DELTA), device=str(device))
        missing = set(tensors) - set(model.state_dict())
        if missing:
            raise IntegrityError(
                f"{folder}: delta names tensors the model lacks: {sorted(missing)[:3]}", requirement="R23"
            )
        model.load_state_dict(tensors, strict=False)
        return model
    from remnant.train.loop import LoraSpec, TrainConfig, merge_lora, prepare_model

    lora = meta["lora"]
    spec = LoraSpec(rank=int(lora["rank"]), alpha=float(lora["alpha"]), targets=lora["targets"])
    wrapped = prepare_model(model, TrainConfig(lora=spec, seed=int(lora["seed"]), progress=False))
    tensors = load_file(str(folder / ADAPTER), device=str(device))
    params = dict(wrapped.named_parameters())
    if set(tensors) != {n for n in params if "lora_" in n}:
        raise IntegrityError(f"{folder}: the adapter does not fit the model's LoRA layers", requirement="R23")
    with torch.no_grad():
        for name, value in tensors.items():
            params[name].copy_(value)
    return merge_lora(wrapped)


def load_chain(store: CheckpointStore, key: str, load_base: Callable[[], Any], *, verify: bool = True) -> Any:
    """The model of checkpoint ``key``: the base model (``load_base()``) with every checkpoint of its chain
    applied in order, checked against the recorded weights digest (R23)."""
    chain: list[tuple[str, dict[str, Any]]] = []
    current: str | None = key
    while current is not None:
        meta = store.meta(current)
        if meta.get("status") != "ok":
            raise IntegrityError(
                f"checkpoint {current} is {meta.get('status')}: it has no weights", requirement="R23"
            )
        chain.append((current, meta))
        current = meta.get("parent")
        if len(chain) > 64:
            raise IntegrityError(f"checkpoint {key}: its parent chain does not end", requirement="R23")
    model = load_base()
    for ckpt, meta in reversed(chain):
        model = _apply(model, store, ckpt, meta)
    model.eval()
    if verify:
        actual = weights_digest(model)
        if actual != chain[0][1]["weights_digest"]:
            raise IntegrityError(
                f"{store.folder(key)}: loaded weights digest {actual[:12]}… is not the recorded "
                f"{chain[0][1]['weights_digest'][:12]}…: the store was changed after the build",
                requirement="R23",
            )
    return model


__all__ = ["changed_tensors", "load_chain", "lora_tensors", "save_checkpoint", "weights_digest"]
