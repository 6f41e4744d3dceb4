"""Decoder blocks, final norm, unembedding and embedding per architecture family (algorithms.md §7)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import nn

from remnant.errors import UnsupportedArchitecture

# family -> (path to the decoder stack, blocks attr, final-norm attr, embedding attr)
_KNOWN: dict[str, tuple[str, str, str, str]] = {
    "llama": ("model", "layers", "norm", "embed_tokens"),
    "mistral": ("model", "layers", "norm", "embed_tokens"),
    "qwen2": ("model", "layers", "norm", "embed_tokens"),
    "phi3": ("model", "layers", "norm", "embed_tokens"),
    "gemma3_text": ("model", "layers", "norm", "embed_tokens"),
    "gemma3": ("model", "layers", "norm", "embed_tokens"),
    "gpt2": ("transformer", "h", "ln_f", "wte"),
}


@dataclass(frozen=True)
class ArchParts:
    """The parts of a causal LM that latent methods and hooks need."""

    blocks: nn.ModuleList
    final_norm: nn.Module
    unembed: nn.Module
    embed: nn.Module
    family: str


def _get(root: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        root = getattr(root, part, None)
        if root is None:
            return None
    return root


def _fallback(model: nn.Module, family: str) -> ArchParts:
    """Structural fallback: exactly one ModuleList of identical blocks and a final norm beside it."""
    lists = [
        (n, m)
        for n, m in model.named_modules()
        if isinstance(m, nn.ModuleList)
        and len(m) > 0
        and len({type(b) for b in m}) == 1
        and n.count(".") <= 2
    ]
    if len(lists) != 1:
        raise UnsupportedArchitecture(f"{family}: cannot find a unique stack of decoder blocks")
    name, blocks = lists[0]
    parent = model.get_submodule(name.rsplit(".", 1)[0]) if "." in name else model
    norms = [
        m for n, m in parent.named_children() if "norm" in type(m).__name__.lower() or n.startswith("ln")
    ]
    unembed = model.get_output_embeddings()
    embed = model.get_input_embeddings()
    if len(norms) != 1 or unembed is None or embed is None:
        raise UnsupportedArchitecture(f"{family}: cannot identify the final norm and unembedding")
    return ArchParts(blocks=blocks, final_norm=norms[0], unembed=unembed, embed=embed, family=family)


def resolve_parts(model: nn.Module) -> ArchParts:
    """Resolve the parts of ``model`` for a known family, or by a structural fallback; never a guess."""
    family = str(getattr(getattr(model, "config", None), "model_type", "unknown"))
    if family in _KNOWN:
        stack, blocks, norm, embed = _KNOWN[family]
        base = _get(model, stack)
        if family == "gemma3" and base is not None and _get(base, "language_model") is not None:
            base = base.language_model
        parts = [_get(base, blocks), _get(base, norm), model.get_output_embeddings(), _get(base, embed)]
        if all(p is not None for p in parts) and isinstance(parts[0], nn.ModuleList):
            return ArchParts(*parts, family=family)
        raise UnsupportedArchitecture(f"{family}: expected {stack}.{blocks} / {norm} / {embed} not found")
    return _fallback(model, family)
