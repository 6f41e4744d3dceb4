"""Checkpoints in and out of the store (:mod:`remnant.states.store`): deltas, LoRA adapters, and loading a chain.

A stored checkpoint names its parent (another checkpoint, or ``None``: the base model). Loading applies each
checkpoint of the chain to the base model in order — a delta by ``load_state_dict``, a LoRA adapter by wrapping
with the same LoRA config, setting A and B and merging: the arithmetic ``apply_removal``'s merge did, so the
loaded weights are the built ones bit for bit (tested) — then checks the loaded weights against the digest pinned
in the records of the sweep that built it (R23; remnant.sweep.pins: the store's own ``meta.json`` is never the
authority). Every tensor file's header is checked against the model before a byte of it is applied.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from remnant.errors import IntegrityError, ModelError, RemnantError
from remnant.models.identity import weights_digest_of
from remnant.states.store import (
    ADAPTER,
    DELTA,
    META,
    STORE_RULE,
    CheckpointMeta,
    CheckpointStore,
    safetensors_header,
)


def changed_tensors(model: torch.nn.Module, parent: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
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


def lora_tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The LoRA adapter tensors of a peft-wrapped model (names as peft gives them), cloned on the CPU."""
    return {n: p.detach().to("cpu").contiguous().clone() for n, p in model.named_parameters() if "lora_" in n}


def save_checkpoint(
    store: CheckpointStore,
    key: str,
    meta: Mapping[str, object],
    tensors: Mapping[str, torch.Tensor],
    fmt: str,
) -> None:
    """Write ``tensors`` (a delta, or a LoRA adapter when ``fmt == "lora"``) and ``meta`` as checkpoint ``key``."""
    from safetensors.torch import save_file

    def build(tmp: Path) -> Mapping[str, object]:
        save_file(dict(tensors), str(tmp / (ADAPTER if fmt == "lora" else DELTA)))
        return {**meta, "format": fmt}

    store.put(key, build)


def _tensors(
    path: Path, expected: Mapping[str, torch.Tensor], device: torch.device
) -> dict[str, torch.Tensor]:
    """The tensors of the stored file ``path``, each checked by its header against ``expected`` (name -> the
    tensor it replaces) before anything is read: ModelError naming the file and the tensor (R23)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        header = safetensors_header(path)
    except OSError as exc:
        raise ModelError(f"{path}: cannot read: {exc.strerror or exc}", requirement=STORE_RULE) from None
    except RemnantError as exc:  # safetensors_header names the file and the problem
        raise ModelError(str(exc.args[0]), requirement=STORE_RULE) from None
    for name, info in header.items():
        target = expected.get(name)
        if target is None:
            raise IntegrityError(
                f"{path}: names tensor {name!r}, which the model lacks", requirement=STORE_RULE
            )
        shape = info.get("shape") if isinstance(info, dict) else None
        if not isinstance(shape, list) or tuple(shape) != tuple(target.shape):
            raise ModelError(
                f"{path}: tensor {name!r} has shape {shape}, the model's is {list(target.shape)}",
                requirement=STORE_RULE,
            )
    try:
        return load_file(str(path), device=str(device))
    except (SafetensorError, OSError) as exc:
        raise ModelError(f"{path}: cannot read its tensors: {exc}", requirement=STORE_RULE) from None


def _apply(model: Any, store: CheckpointStore, key: str, meta: CheckpointMeta) -> Any:
    folder = store.local(key)
    device = next(model.parameters()).device
    if meta.format == "delta":
        tensors = _tensors(folder / DELTA, model.state_dict(), device)
        model.load_state_dict(tensors, strict=False)
        return model
    if meta.format == "full":
        raise ModelError(
            f"{folder / META}: a whole saved state (format 'full'), not a step of a sweep's chain",
            requirement=STORE_RULE,
        )
    if meta.lora is None:  # CheckpointMeta refuses a lora format without its table; kept for the type checker
        raise ModelError(f"{folder / META}: field 'lora' is missing", requirement=STORE_RULE)
    wrapped = wrap_lora(model, meta.lora.model_dump())
    params = dict(wrapped.named_parameters())
    tensors = _tensors(folder / ADAPTER, params, device)
    if set(tensors) != {n for n in params if "lora_" in n}:
        raise IntegrityError(
            f"{folder}: the adapter does not fit the model's LoRA layers", requirement=STORE_RULE
        )
    return merge_adapter(wrapped, tensors)


def wrap_lora(model: Any, lora: Mapping[str, Any]) -> Any:
    """``model`` in the LoRA layers ``lora`` (rank, alpha, targets, seed) describes, as its build wrapped it."""
    from remnant.train.loop import LoraSpec, TrainConfig, prepare_model

    targets = lora["targets"] if isinstance(lora["targets"], str) else tuple(lora["targets"])
    spec = LoraSpec(rank=int(lora["rank"]), alpha=float(lora["alpha"]), targets=targets)
    return prepare_model(model, TrainConfig(lora=spec, seed=int(lora["seed"]), progress=False))


def merge_adapter(wrapped: Any, adapter: Mapping[str, torch.Tensor]) -> Any:
    """``wrapped`` (:func:`wrap_lora`) with its A and B set to ``adapter``, merged: the arithmetic
    ``apply_removal``'s merge does, so a stored adapter loads to the built weights bit for bit."""
    from remnant.train.loop import merge_lora

    params = dict(wrapped.named_parameters())
    with torch.no_grad():
        for name, value in adapter.items():
            params[name].copy_(value)
    return merge_lora(wrapped)


def load_chain(
    store: CheckpointStore, key: str, load_base: Callable[[], Any], *, expected: str | None
) -> Any:
    """The model of checkpoint ``key``: the base model (``load_base()``) with every checkpoint of its chain
    applied in order, checked against ``expected``: the weights digest pinned for ``key`` in sweep records
    (remnant.sweep.pins; R23). The store's ``meta.json`` only says how to apply each checkpoint."""
    chain: list[tuple[str, CheckpointMeta]] = []
    current: str | None = key
    while current is not None:
        meta = store.meta(current)
        if meta.status != "ok":
            raise IntegrityError(
                f"checkpoint {current} is {meta.status}: it has no weights", requirement=STORE_RULE
            )
        chain.append((current, meta))
        current = meta.parent
        if len(chain) > 64:
            raise IntegrityError(f"checkpoint {key}: its parent chain does not end", requirement=STORE_RULE)
    if expected is None:
        raise IntegrityError(
            f"checkpoint {key}: no pinned weights digest to check it against", requirement=STORE_RULE
        )
    model = load_base()
    for ckpt, meta in reversed(chain):
        model = _apply(model, store, ckpt, meta)
    model.eval()
    actual = weights_digest_of(model)
    if actual != expected:
        raise IntegrityError(
            f"{store.where(key)}: loaded weights digest {actual[:12]}… is not the pinned {expected[:12]}…: "
            "the store was changed after the build",
            requirement=STORE_RULE,
        )
    return model


__all__ = [
    "changed_tensors",
    "load_chain",
    "lora_tensors",
    "merge_adapter",
    "save_checkpoint",
    "wrap_lora",
]
