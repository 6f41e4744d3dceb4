"""Quantization recovery: weight-only fake quantization of the decoder's linear layers (W-track only).

Zhang et al. (ICLR 2025, arXiv 2410.16454) find that unlearning updates are often smaller than half a
quantization step, so Q(w_unlearned) = Q(w_original) and 4-bit quantization brings forgotten knowledge back
(docs/latent.md). This attack quantizes and dequantizes ("fake quant") every linear weight inside the decoder
blocks — q, k, v, o, gate, up, down; embeddings, norms, biases and the LM head untouched, as bitsandbytes via
transformers does — and scores the model as usual. Schemes (§5.2, exact formulas):

- ``nf4`` / ``fp4``: row-major blocks of 64, absmax per block in fp32, nearest level of bitsandbytes' code table
  (ties go to the lower level, as bnb's threshold tree does), ŵ = level·absmax. No double quantization;
- ``int8``: per output row absmax, s = absmax/127, ŵ = round(w/s)·s (weights only: LLM.int8's activation
  outliers are not emulated, so this is an upper bound on fidelity);
- ``int4``: asymmetric round-to-nearest per group of ``group_size`` input elements (GPTQ/AWQ baseline).

The caller's model is never left changed: the weights are swapped for their fake-quantized copies for the run
and the original tensors put back in a ``finally`` block.

Note for SmolLM2 from the zoo: its weights came from a Q4_1 GGUF, so they already sit on a 4-bit grid; say so
where quantization results are shown.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from remnant.attacks.base import Attack, AttackContext, GenerationInput
from remnant.errors import ConfigError
from remnant.models.arch import resolve_parts
from remnant.registry import register
from remnant.score.probe import Probe

Scheme = Literal["nf4", "fp4", "int8", "int4"]
SCHEMES: tuple[Scheme, ...] = ("nf4", "fp4", "int8", "int4")

#: bitsandbytes' NF4 code (QLoRA, float32 values as bnb stores them).
NF4_CODE: tuple[float, ...] = (
    -1.0,
    -0.6961928009986877,
    -0.5250730514526367,
    -0.39491748809814453,
    -0.28444138169288635,
    -0.18477343022823334,
    -0.09105003625154495,
    0.0,
    0.07958029955625534,
    0.16093020141124725,
    0.24611230194568634,
    0.33791524171829224,
    0.44070982933044434,
    0.5626170039176941,
    0.7229568362236023,
    1.0,
)
#: bitsandbytes' FP4 (e2m1) levels {0, 0.0625, 2, 3, 4, 6, 8, 12}/12, both signs, sorted.
_FP4_MAG = (0.0, 0.0625, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0)
FP4_CODE: tuple[float, ...] = tuple(sorted({s * m / 12.0 for m in _FP4_MAG for s in (-1.0, 1.0)}))


@dataclass(frozen=True)
class Quantized:
    """Quantization codes of one weight and its dequantized value."""

    codes: torch.Tensor
    dequantized: torch.Tensor


def _nearest_level(x: torch.Tensor, code: Sequence[float]) -> torch.Tensor:
    levels = torch.tensor(code, dtype=torch.float32, device=x.device)  # the weight's device (GPU models)
    mids = (levels[1:] + levels[:-1]) / 2
    # bucketize(right=False): x equal to a midpoint falls to the lower level, like bnb's `x > threshold` tree.
    return torch.bucketize(x, mids)


def _blockwise(w: torch.Tensor, code: Sequence[float], blocksize: int) -> Quantized:
    flat = w.detach().float().reshape(-1)
    pad = (-flat.numel()) % blocksize
    blocks = torch.cat([flat, flat.new_zeros(pad)]).reshape(-1, blocksize)
    absmax = blocks.abs().amax(dim=1, keepdim=True)
    # Multiply by the reciprocal and clamp, exactly as bitsandbytes does: dividing instead moves values that
    # sit on a level midpoint (common in bf16) into the other bucket.
    scaled = torch.clamp(blocks * (1.0 / absmax.clamp(min=1e-38)), -1, 1)
    idx = _nearest_level(scaled, code)
    levels = torch.tensor(code, dtype=torch.float32, device=idx.device)
    deq = (levels[idx] * absmax).reshape(-1)[: flat.numel()].reshape(w.shape)
    return Quantized(idx.reshape(-1)[: flat.numel()].reshape(w.shape), deq.to(w.dtype))


def _int8_rows(w: torch.Tensor) -> Quantized:
    wf = w.detach().float()
    s = wf.abs().amax(dim=1, keepdim=True) / 127.0
    s = torch.where(s > 0, s, torch.ones_like(s))
    q = torch.clamp(torch.round(wf / s), -127, 127)
    return Quantized(q.to(torch.int16), (q * s).to(w.dtype))


def _int4_groups(w: torch.Tensor, group_size: int) -> Quantized:
    wf = w.detach().float()
    rows, cols = wf.shape
    g = cols if group_size <= 0 or cols % group_size else group_size
    grouped = wf.reshape(rows, cols // g, g)
    lo = grouped.amin(dim=2, keepdim=True)
    hi = grouped.amax(dim=2, keepdim=True)
    s = torch.clamp((hi - lo) / 15.0, min=1e-12)
    z = torch.round(-lo / s)
    q = torch.clamp(torch.round(grouped / s) + z, 0, 15)
    deq = ((q - z) * s).reshape(rows, cols)
    return Quantized(q.reshape(rows, cols).to(torch.int16), deq.to(w.dtype))


def quantize_weight(w: torch.Tensor, scheme: str, *, blocksize: int = 64, group_size: int = 128) -> Quantized:
    """Codes and dequantized weight of ``w`` ([out, in]) under ``scheme`` (docs/latent.md)."""
    if scheme == "nf4":
        return _blockwise(w, NF4_CODE, blocksize)
    if scheme == "fp4":
        return _blockwise(w, FP4_CODE, blocksize)
    if scheme == "int8":
        return _int8_rows(w)
    if scheme == "int4":
        return _int4_groups(w, group_size)
    raise ConfigError(f"unknown quantization scheme {scheme!r}; known: {', '.join(SCHEMES)}")


def decoder_linear_weights(model: nn.Module) -> dict[str, nn.Parameter]:
    """Every linear weight inside the decoder blocks, as [out, in] (transformers' Conv1D is transposed)."""
    out: dict[str, nn.Parameter] = {}
    for i, block in enumerate(resolve_parts(model).blocks):
        for name, mod in block.named_modules():
            if isinstance(mod, nn.Linear) or type(mod).__name__ == "Conv1D":
                out[f"blocks.{i}.{name}"] = mod.weight
    return out


def _as_rows(name_mod: nn.Parameter, conv1d: bool) -> torch.Tensor:
    return name_mod.data.t() if conv1d else name_mod.data


def _is_conv1d(model: nn.Module) -> bool:
    return getattr(model.config, "model_type", "") == "gpt2"


@contextmanager
def fake_quantized(
    model: nn.Module, scheme: str, *, blocksize: int = 64, group_size: int = 128
) -> Iterator[nn.Module]:
    """Within the block, ``model``'s decoder linear weights are fake-quantized; the original tensors are put
    back afterwards, exactly (the same storage objects), even on error."""
    conv1d = _is_conv1d(model)
    originals: dict[str, torch.Tensor] = {}
    weights = decoder_linear_weights(model)
    try:
        for name, param in weights.items():
            originals[name] = param.data
            rows = _as_rows(param, conv1d)
            deq = quantize_weight(rows, scheme, blocksize=blocksize, group_size=group_size).dequantized
            param.data = deq.t().contiguous() if conv1d else deq
        yield model
    finally:
        for name, data in originals.items():
            weights[name].data = data


@register("attack", "quantize", "1")
class Quantize(Attack):
    """Weight-only fake quantization of the decoder's linear layers, then the usual greedy scoring (W-track)."""

    name = "quantize"
    surface = "weight_transform"
    version = "1"
    paper = "Zhang et al. 2025, Catastrophic Failure of LLM Unlearning via Quantization (arXiv 2410.16454)"
    formats = ("free_text", "multiple_choice")
    tracks = ("W",)
    provenance = "R"

    def __init__(self, scheme: Scheme = "nf4", blocksize: int = 64, group_size: int = 128) -> None:
        if scheme not in SCHEMES:
            raise ConfigError(f"quantize: unknown scheme {scheme!r}; known: {', '.join(SCHEMES)}")
        self.scheme = scheme
        self.blocksize = blocksize
        self.group_size = group_size

    def generation_scope(self, ctx: AttackContext) -> AbstractContextManager[Any]:
        """The caller's model with fake-quantized decoder weights, restored exactly on exit."""
        return fake_quantized(ctx.model, self.scheme, blocksize=self.blocksize, group_size=self.group_size)

    def generation_inputs(
        self, ctx: AttackContext, probes: Sequence[Probe]
    ) -> list[tuple[GenerationInput, ...]]:
        """The plain question (the attack is in the weights, not the prompt)."""
        return [(GenerationInput(tuple(ctx.prompt_ids(p)), extra={"scheme": self.scheme}),) for p in probes]
