"""Jacobian lens (docs/latent.md): the estimator equals brute-force autograd Jacobians to 1e-5."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from remnant.errors import ConfigError
from remnant.latent.jacobian_lens import LensConfig, fit_lens, readout
from remnant.models.arch import resolve_parts


@pytest.fixture(scope="module")
def toy() -> Any:
    """A 3-block Llama with d = 32 (random weights from a scoped generator)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=50,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    with torch.random.fork_rng(devices=[]):
        torch.random.manual_seed(7)
        model = LlamaForCausalLM(config).double()
    model.eval()
    return model


PROMPTS = [
    [3, 17, 5, 9, 22, 41, 8, 1, 30],
    [12, 4, 4, 45, 7, 19, 2],
    [6, 6],
]  # the last has no valid position
CFG = LensConfig(target_layer=2, skip_first=2, dim_batch=5)


def _brute(model: Any, ids: list[int], source: int, target: int, skip: int) -> torch.Tensor:
    """mean_{p valid} Σ_{p' valid} ∂h_T[p'] / ∂h_l[p] from torch.autograd.functional.jacobian."""
    blocks = resolve_parts(model).blocks
    x = torch.tensor([ids])
    with torch.no_grad():
        store: dict[str, torch.Tensor] = {}
        handle = blocks[source].register_forward_hook(
            lambda _m, _i, o: store.update(h=o[0] if isinstance(o, tuple) else o)
        )
        model(input_ids=x)
        handle.remove()
    h0 = store["h"][0].clone()

    def f(h: torch.Tensor) -> torch.Tensor:
        out: dict[str, torch.Tensor] = {}

        def put(_m: Any, _i: Any, o: Any) -> Any:
            return (h[None], *o[1:]) if isinstance(o, tuple) else h[None]

        def get(_m: Any, _i: Any, o: Any) -> None:
            out["h"] = o[0] if isinstance(o, tuple) else o

        h1 = blocks[source].register_forward_hook(put)
        h2 = blocks[target].register_forward_hook(get)
        try:
            model(input_ids=x)
        finally:
            h1.remove()
            h2.remove()
        return out["h"][0]

    full = torch.autograd.functional.jacobian(f, h0)  # [T, d, T, d] = ∂h_T[p', i] / ∂h_l[p, j]
    valid = list(range(skip, len(ids) - 1))
    summed = full[valid][:, :, valid].sum(dim=0)  # Σ_{p'} → [d, |valid|, d]
    return summed.mean(dim=1)


def test_estimator_equals_brute_force(toy: Any) -> None:
    lens = fit_lens(toy, PROMPTS, CFG)
    assert lens.target_layer == 2 and lens.n_prompts == 2  # the 2-token prompt is skipped
    for source in (0, 1):
        brute = (_brute(toy, PROMPTS[0], source, 2, 2) + _brute(toy, PROMPTS[1], source, 2, 2)) / 2
        assert brute.abs().max() > 0.1  # not a trivially zero matrix
        assert torch.allclose(lens.matrices[source].double(), brute, atol=1e-5, rtol=0)
        assert not torch.allclose(brute, torch.eye(32, dtype=brute.dtype), atol=1e-2)


def test_dim_batch_does_not_change_the_lens(toy: Any) -> None:
    a = fit_lens(toy, PROMPTS[:1], LensConfig(target_layer=2, skip_first=2, dim_batch=3))
    b = fit_lens(toy, PROMPTS[:1], LensConfig(target_layer=2, skip_first=2, dim_batch=32))
    for s in (0, 1):
        assert torch.allclose(a.matrices[s], b.matrices[s], atol=1e-6)


def test_readout_identity_is_the_logit_lens(toy: Any) -> None:
    h = torch.randn(4, 32, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    parts = resolve_parts(toy)
    expect = parts.unembed(parts.final_norm(h)).float()
    assert torch.allclose(readout(toy, h), expect, atol=1e-6)
    assert torch.allclose(readout(toy, h, torch.eye(32, dtype=torch.float64)), expect, atol=1e-6)


def test_default_target_is_penultimate_and_cache(toy: Any, tmp_path: Path) -> None:
    lens = fit_lens(toy, PROMPTS[:1], LensConfig(skip_first=2), cache_dir=tmp_path)
    assert lens.target_layer == 1 and sorted(lens.matrices) == [0]  # L − 2 with L = 3
    again = fit_lens(toy, PROMPTS[:1], LensConfig(skip_first=2), cache_dir=tmp_path)
    assert again.key == lens.key and torch.equal(again.matrices[0], lens.matrices[0].float())
    other = fit_lens(toy, PROMPTS[1:2], LensConfig(skip_first=2), cache_dir=tmp_path)
    assert other.key != lens.key and not torch.allclose(other.matrices[0], lens.matrices[0].float())
    assert len(list((tmp_path / "jacobian-lens").glob("*.safetensors"))) == 2


def test_prompt_shards_are_reused_and_the_mean_is_exact(
    toy: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import remnant.latent.jacobian_lens as jl

    fresh = fit_lens(toy, PROMPTS, CFG)  # no cache: the plain running mean
    fit_lens(toy, PROMPTS[:1], CFG, cache_dir=tmp_path)
    calls: list[int] = []
    real = jl.vjp_rows
    monkeypatch.setattr(jl, "vjp_rows", lambda *a, **k: calls.append(1) or real(*a, **k))
    grown = fit_lens(toy, PROMPTS, CFG, cache_dir=tmp_path)
    assert len(calls) == 2  # prompt 0 came from its shard; prompts 1 and 2 (no valid position) were run
    assert grown.n_prompts == fresh.n_prompts == 2 and grown.deltas == pytest.approx(fresh.deltas)
    for layer in fresh.matrices:
        assert torch.allclose(grown.matrices[layer], fresh.matrices[layer], atol=1e-7)
    assert len(list((tmp_path / "jacobian-lens-prompt").glob("*.safetensors"))) == 2


def test_bad_layers_are_refused(toy: Any) -> None:
    with pytest.raises(ConfigError, match="below target"):
        fit_lens(toy, PROMPTS, LensConfig(target_layer=1, source_layers=(1,), skip_first=2))
    with pytest.raises(ConfigError, match="no prompt"):
        fit_lens(toy, [[1, 2]], LensConfig(target_layer=2, skip_first=2))


def test_a_lens_on_fewer_sources_has_the_same_matrices_and_j_access_fits_its_band_region_only(
    toy: Any,
) -> None:
    """Each J_l is the backward from the target block down to block l: fitting fewer source blocks (the backward
    then stops at the lowest of them) leaves the others' matrices as they were. J-Access reads only the blocks of
    its band's region (C-H7), so it fits those: on 3 blocks with target 2 and the region 25-90 % of depth, block 1.
    (The toy runs in float64 and the lowest source's output passes through float32, hence the tolerance.)"""
    from remnant import registry

    every = fit_lens(toy, PROMPTS[:2], CFG)
    upper = fit_lens(
        toy, PROMPTS[:2], LensConfig(source_layers=(1,), target_layer=2, skip_first=2, dim_batch=5)
    )
    assert set(every.matrices) == {0, 1} and set(upper.matrices) == {1}
    assert torch.allclose(upper.matrices[1].double(), every.matrices[1].double(), atol=1e-5, rtol=0)
    audit = registry.create("audit", "j_access", {"target_layer": 2, "skip_first": 2})
    assert audit.lens_config(toy).source_layers == (1,)
    given = registry.create("audit", "j_access", {"target_layer": 2, "band": (0.0, 0.9)})
    assert given.lens_config(toy).source_layers == (0, 1)
