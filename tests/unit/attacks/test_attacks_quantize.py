"""Quantization: exact fake-quant formulas (idempotence, error bounds, code tables), bitsandbytes parity for
NF4/FP4 where installed, exact restoration of the caller's model, and the bucket-flip diagnostic (§5.2)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from remnant.attacks.base import AttackContext, no_attack
from remnant.attacks.quantize import (
    FP4_CODE,
    NF4_CODE,
    Quantize,
    decoder_linear_weights,
    fake_quantized,
    quantize_weight,
)


def _w(rows: int = 32, cols: int = 256, seed: int = 0) -> torch.Tensor:
    return torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed)) * 0.02


@pytest.mark.parametrize("scheme", ["nf4", "fp4", "int8", "int4"])
def test_idempotent(scheme: str) -> None:
    once = quantize_weight(_w(), scheme).dequantized
    twice = quantize_weight(once, scheme).dequantized
    assert torch.allclose(once, twice, atol=1e-7, rtol=0)


def test_nf4_error_bound_and_levels() -> None:
    w = _w()
    q = quantize_weight(w, "nf4")
    absmax = w.reshape(-1, 64).abs().amax(dim=1, keepdim=True)
    ratio = (q.dequantized.reshape(-1, 64) / absmax).reshape(-1)
    code = torch.tensor(NF4_CODE)
    assert torch.isclose(ratio[:, None], code[None, :], atol=1e-6).any(dim=1).all()
    max_gap = float((code[1:] - code[:-1]).max())
    err = (w - q.dequantized).reshape(-1, 64).abs()
    assert (err <= absmax * max_gap / 2 + 1e-7).all()
    # every block keeps its absmax exactly (level ±1)
    assert torch.allclose(q.dequantized.reshape(-1, 64).abs().amax(dim=1), absmax[:, 0])


def test_fp4_table_is_e2m1_over_12() -> None:
    mags = sorted({abs(v) * 12 for v in FP4_CODE})
    assert [round(m, 6) for m in mags] == [0.0, 0.0625, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0]


def test_int8_and_int4_bounds() -> None:
    w = _w()
    q8 = quantize_weight(w, "int8").dequantized
    s = w.abs().amax(dim=1, keepdim=True) / 127
    assert ((w - q8).abs() <= s / 2 + 1e-8).all()
    q4 = quantize_weight(w, "int4", group_size=128).dequantized
    g = w.reshape(32, 2, 128)
    step = (g.amax(dim=2, keepdim=True) - g.amin(dim=2, keepdim=True)) / 15
    assert ((g - q4.reshape(32, 2, 128)).abs() <= step / 2 + 1e-7).all()
    assert len(torch.unique(q4.reshape(32, 2, 128)[0, 0])) <= 16


@pytest.mark.parametrize("quant_type", ["nf4", "fp4"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_bitsandbytes_parity(quant_type: str, dtype: torch.dtype) -> None:
    bnb = pytest.importorskip("bitsandbytes.functional")
    for shape in ((64, 256), (5, 100)):  # the second ends in a partial block
        w = torch.randn(*shape, generator=torch.Generator().manual_seed(3)).to(dtype) * 0.05
        packed, state = bnb.quantize_4bit(w, blocksize=64, quant_type=quant_type)
        ref = bnb.dequantize_4bit(packed, state)
        assert torch.equal(quantize_weight(w, quant_type).dequantized, ref)


def test_fake_quant_restores_exactly(tiny_llama: Any) -> None:
    model = tiny_llama.model
    weights = decoder_linear_weights(model)
    assert len(weights) == 2 * 7  # q k v o gate up down in each of 2 blocks
    before = {k: (p.data.data_ptr(), p.data.clone()) for k, p in weights.items()}
    embed_before = model.get_input_embeddings().weight.clone()
    with fake_quantized(model, "nf4"):
        changed = [not torch.equal(p.data, before[k][1]) for k, p in weights.items()]
        assert all(changed)
        assert torch.equal(model.get_input_embeddings().weight, embed_before)  # embeddings untouched
    for k, p in weights.items():
        assert p.data.data_ptr() == before[k][0] and torch.equal(p.data, before[k][1])


def test_quantize_attack_scores_quantized_model(attack_ctx: AttackContext, probes: list[Any]) -> None:
    out = Quantize(scheme="nf4").run(attack_ctx, probes)
    with fake_quantized(attack_ctx.model, "nf4"):
        ref = no_attack(attack_ctx, probes)
    assert [o.output for o in out] == [o.output for o in ref]
    assert all(o.extra["scheme"] == "nf4" for o in out)
    assert Quantize().applicable("free_text", "Q") is not None  # W-track only
