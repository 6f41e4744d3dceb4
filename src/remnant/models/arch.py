"""Decoder blocks, final norm, unembedding and embedding per architecture family (docs/latent.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from torch import nn

from remnant.errors import UnsupportedArchitecture

# family -> (path to the decoder stack, blocks attr, final-norm attr, embedding attr)
_KNOWN: dict[str, tuple[str, str, str, str]] = {
    **dict.fromkeys(
        ("llama", "mistral", "qwen2", "phi3", "gemma3_text", "gemma3"),
        ("model", "layers", "norm", "embed_tokens"),
    ),
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


class _CausalLM(Protocol):
    """The two methods of a transformers causal LM read here. torch's stubs type every attribute ``nn.Module``
    does not declare as ``Tensor | Module`` (its ``__getattr__``), so calling them through the module type-checks
    as calling a Tensor; the model is read through this protocol instead."""

    def get_output_embeddings(self) -> nn.Module | None: ...

    def get_input_embeddings(self) -> nn.Module | None: ...


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
    lm = cast(_CausalLM, model)
    unembed = lm.get_output_embeddings()
    embed = lm.get_input_embeddings()
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
        found_blocks, final_norm, found_embed = _get(base, blocks), _get(base, norm), _get(base, embed)
        unembed = cast(_CausalLM, model).get_output_embeddings()
        if (
            isinstance(found_blocks, nn.ModuleList)
            and final_norm is not None
            and unembed is not None
            and found_embed is not None
        ):
            return ArchParts(
                blocks=found_blocks, final_norm=final_norm, unembed=unembed, embed=found_embed, family=family
            )
        raise UnsupportedArchitecture(f"{family}: expected {stack}.{blocks} / {norm} / {embed} not found")
    return _fallback(model, family)


def config_shapes(folder: Path) -> dict[str, tuple[int, ...]]:
    """Parameter name -> shape of the model ``folder/config.json`` describes, built on the meta device (no
    weights read or allocated), for pricing a pool before its base model is downloaded (R23). The config is
    checked as a load checks it: a link out of the folder or an ``auto_map`` (custom code) is refused (R2)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from remnant.models.files import CONFIG_NAME, _containment_roots, _refuse_auto_map, _regular_inside

    real = _regular_inside(folder, CONFIG_NAME, _containment_roots(folder), "a model config")
    _refuse_auto_map(folder, CONFIG_NAME, real)
    config = AutoConfig.from_pretrained(str(folder), trust_remote_code=False, local_files_only=True)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, trust_remote_code=False)  # type: ignore[no-untyped-call]
    return {name: tuple(p.shape) for name, p in model.named_parameters()}
