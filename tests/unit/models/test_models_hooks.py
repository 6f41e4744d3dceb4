"""Capture/patch hooks on three families; the hidden_states[-1] pitfall (docs/latent.md, §7)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from remnant.errors import UnsupportedArchitecture
from remnant.models import load_model
from remnant.models.arch import _fallback, resolve_parts
from remnant.models.hooks import capture_blocks, patch_block

FAMILIES = ["tiny_llama_dir", "tiny_qwen2_dir", "tiny_gpt2_dir"]


def _ids(tok: object) -> torch.Tensor:
    return torch.tensor([tok("Zorvak Telumi lives in Vessiburg 1984")["input_ids"]])  # type: ignore[operator]


def _hooks(model: torch.nn.Module) -> int:
    return sum(len(b._forward_hooks) for b in resolve_parts(model).blocks)


@pytest.mark.parametrize("fixture", FAMILIES)
def test_patch_own_output_is_identity_and_other_changes(fixture: str, request: pytest.FixtureRequest) -> None:
    folder: Path = request.getfixturevalue(fixture)
    state = load_model(folder)
    model, ids = state.model, _ids(state.tokenizer)
    with torch.no_grad():
        with capture_blocks(model, [0, 1]) as acts:
            base = model(ids).logits
        with patch_block(model, 0, acts[0]):
            same = model(ids).logits
        assert (same - base).abs().max().item() < 1e-6
        other = acts[0] + torch.randn(acts[0].shape, generator=torch.Generator().manual_seed(1))
        with patch_block(model, 0, other, positions=[2]):
            changed = model(ids).logits
        assert (changed[:, :2] - base[:, :2]).abs().max().item() < 1e-6  # causal: earlier positions untouched
        assert (changed[:, 2:] - base[:, 2:]).abs().max().item() > 1e-3
        with patch_block(model, 1, lambda h: h * 0.5):
            halved = model(ids).logits
        assert (halved - base).abs().max().item() > 1e-3
    assert _hooks(model) == 0


@pytest.mark.parametrize("fixture", FAMILIES)
def test_hooks_removed_after_exception(fixture: str, request: pytest.FixtureRequest) -> None:
    model = load_model(request.getfixturevalue(fixture)).model
    with pytest.raises(RuntimeError), capture_blocks(model, [0, 1]), patch_block(model, 1, lambda h: h):
        raise RuntimeError("boom")
    assert _hooks(model) == 0


def test_fallback_matches_known_family(tiny_llama_dir: Path, tiny_gpt2_dir: Path) -> None:
    for folder in (tiny_llama_dir, tiny_gpt2_dir):
        model = load_model(folder).model
        known, fb = resolve_parts(model), _fallback(model, "x")
        assert known.blocks is fb.blocks and known.final_norm is fb.final_norm and known.unembed is fb.unembed


def test_unsupported_architecture_raises() -> None:
    class Odd(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.ModuleList([torch.nn.Linear(2, 2)])
            self.b = torch.nn.ModuleList([torch.nn.Linear(2, 2)])

    with pytest.raises(UnsupportedArchitecture):
        resolve_parts(Odd())


def test_hidden_states_last_is_after_final_norm(tiny_llama_dir: Path) -> None:
    state = load_model(tiny_llama_dir)
    model, ids = state.model, _ids(state.tokenizer)
    parts = resolve_parts(model)
    with torch.no_grad(), capture_blocks(model, [len(parts.blocks) - 1]) as acts:
        out = model(ids, output_hidden_states=True)
    last_block = acts[len(parts.blocks) - 1]
    assert (out.hidden_states[-1] - last_block).abs().max().item() > 1e-2
    with torch.no_grad():
        assert torch.allclose(out.hidden_states[-1], parts.final_norm(last_block), atol=1e-5)
