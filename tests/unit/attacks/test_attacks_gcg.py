"""GCG core on the tiny model: exclusions, token gradient vs finite differences, loss, determinism (§4.7, C-Q4)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from remnant.attacks.gcg_core import (
    GCGConfig,
    SuffixObjective,
    excluded_tokens,
    gcg_optimise,
    initial_suffix,
    round_trips,
    sample_candidates,
)
from remnant.attacks.suffix_layout import suffix_layout
from remnant.models import load_model
from remnant.models.prompts import PromptFormat, render_prompt_ids

QUESTION = "Where is Zorvak Telumi from?"
TARGET = "Zorvak Telumi is from"


def _setup(state: Any, fmt: PromptFormat | None = None) -> tuple[Any, Any, Any, list[int], torch.Tensor]:
    model, tok = state.model, state.tokenizer
    layout = suffix_layout(tok, QUESTION, fmt or PromptFormat.for_tokenizer(tok))
    target = tok(TARGET, add_special_tokens=False)["input_ids"]
    excluded = excluded_tokens(tok, model.get_input_embeddings().weight.shape[0])
    return model, tok, layout, target, excluded


@pytest.mark.parametrize("style", ["chat", "raw"])
def test_layout_with_empty_suffix_is_the_plain_prompt(tiny_llama: Any, style: str) -> None:
    tok = tiny_llama.tokenizer
    fmt = PromptFormat(style=style)  # type: ignore[arg-type]
    layout = suffix_layout(tok, QUESTION, fmt)
    assert layout.prompt_ids([]) == render_prompt_ids(tok, QUESTION, fmt)
    assert layout.prompt_ids([7, 8]) == [*layout.before, 7, 8, *layout.after]


def test_exclusions_cover_specials_and_non_printable(tiny_llama: Any) -> None:
    tok = tiny_llama.tokenizer
    rows = tiny_llama.model.get_input_embeddings().weight.shape[0]
    excluded = excluded_tokens(tok, rows + 5)  # padded rows past the tokenizer are excluded too
    assert excluded[rows:].all()
    assert all(bool(excluded[i]) for i in tok.all_special_ids)
    for i in (~excluded).nonzero().flatten().tolist():
        text = tok.decode([i])
        assert text and text.isascii() and text.isprintable() and round_trips(tok, [i])
    # byte-level tokens of multi-byte characters decode to U+FFFD and must be excluded
    assert any(tok.decode([i]) == "\ufffd" and bool(excluded[i]) for i in range(len(tok)))
    assert 50 < int((~excluded).sum()) < len(tok)


def test_target_loss_is_the_models_own_cross_entropy(tiny_llama: Any) -> None:
    model, _tok, layout, target, _ex = _setup(tiny_llama)
    suffix = [300, 301, 302]
    ids = torch.tensor([layout.prompt_ids(suffix) + target])
    labels = torch.full_like(ids, -100)
    labels[0, -len(target) :] = torch.tensor(target)
    with torch.no_grad():
        reference = float(model(input_ids=ids, labels=labels).loss)
    for cache in (True, False):
        objective = SuffixObjective(model, layout, target, use_prefix_cache=cache)
        got = float(objective.losses(torch.tensor([suffix]), 1)[0])
        assert got == pytest.approx(reference, abs=1e-5)
        _, grad_loss = objective.token_gradient(suffix)
        assert grad_loss == pytest.approx(reference, abs=1e-5)


def test_prefix_cache_gives_the_same_batched_losses(tiny_llama: Any) -> None:
    model, _tok, layout, target, excluded = _setup(tiny_llama)
    allowed = (~excluded).nonzero().flatten()
    cands = allowed[torch.randint(0, len(allowed), (7, 5), generator=torch.Generator().manual_seed(3))]
    with_cache = SuffixObjective(model, layout, target, use_prefix_cache=True).losses(cands, 3)
    without = SuffixObjective(model, layout, target, use_prefix_cache=False).losses(cands, 7)
    assert torch.allclose(with_cache, without, atol=1e-5)
    assert with_cache.std() > 1e-4  # the candidates really differ


def test_token_gradient_matches_finite_differences(tiny_gpt2_dir: Any) -> None:
    """∂L/∂onehot[i,v] − ∂L/∂onehot[i,cur] is the directional derivative towards swapping position i to v.

    GPT-2 in float64 (Llama's RMSNorm and rotary run in float32 whatever the dtype, which drowns a finite
    difference in rounding noise)."""
    state = load_model(tiny_gpt2_dir)
    model = copy.deepcopy(state.model).double()
    tok = state.tokenizer
    layout = suffix_layout(tok, QUESTION, PromptFormat.for_tokenizer(tok))
    target = tok(TARGET, add_special_tokens=False)["input_ids"]
    objective = SuffixObjective(model, layout, target, use_prefix_cache=False)
    suffix = [300, 301, 302, 303]
    grad, _ = objective.token_gradient(suffix)
    weight = model.get_input_embeddings().weight
    base = torch.zeros(len(suffix), weight.shape[0], dtype=torch.float64)
    base[torch.arange(len(suffix)), torch.tensor(suffix)] = 1.0
    eps = 1e-6
    for pos, new in [(0, 120), (2, 250), (3, 77)]:
        direction = torch.zeros_like(base)
        direction[pos, new], direction[pos, suffix[pos]] = 1.0, -1.0
        with torch.no_grad():
            up = objective.loss_of_embeds(((base + eps * direction) @ weight).unsqueeze(0))[0]
            down = objective.loss_of_embeds(((base - eps * direction) @ weight).unsqueeze(0))[0]
        numeric = float((up - down) / (2 * eps))
        analytic = float(grad[pos, new] - grad[pos, suffix[pos]])
        assert analytic == pytest.approx(numeric, rel=1e-5, abs=1e-8)
    assert all(p.grad is None for p in model.parameters())  # autograd.grad leaves the model untouched


def test_candidates_swap_one_position_for_an_allowed_top_k_token(tiny_llama: Any) -> None:
    rows = tiny_llama.model.get_input_embeddings().weight.shape[0]
    excluded = excluded_tokens(tiny_llama.tokenizer, rows)
    cfg = GCGConfig(search_width=200, topk=8)
    suffix = torch.tensor([300, 301, 302, 303, 304])
    grad = torch.randn(5, rows, generator=torch.Generator().manual_seed(0))
    grad[
        :, excluded
    ] = -100.0  # the most attractive tokens are the excluded ones: they must still never appear
    cands = sample_candidates(suffix, grad, excluded, cfg, torch.Generator().manual_seed(1))
    masked = grad.clone()
    masked[:, excluded] = float("inf")
    top = (-masked).topk(8, dim=1).indices
    assert cands.shape == (200, 5)
    changed_positions = set()
    for cand in cands:
        diff = (cand != suffix).nonzero().flatten().tolist()
        assert len(diff) <= 1
        for pos in diff:
            changed_positions.add(pos)
            assert int(cand[pos]) in top[pos].tolist()
            assert not bool(excluded[cand[pos]])
    assert changed_positions == set(range(5))


def test_gcg_lowers_the_loss_is_deterministic_and_never_emits_excluded(tiny_llama: Any) -> None:
    model, tok, layout, target, excluded = _setup(tiny_llama)
    cfg = GCGConfig(suffix_len=6, steps=8, search_width=32, topk=32)
    run = gcg_optimise(model, tok, layout, target, cfg, torch.Generator().manual_seed(11), excluded)
    assert run.init_ids == tuple(initial_suffix(tok, 6, excluded))
    assert run.best_loss < run.init_loss - 0.02
    assert min(run.losses) == pytest.approx(run.best_loss)
    assert run.losses[run.best_step] == pytest.approx(run.best_loss)
    assert not any(bool(excluded[i]) for i in run.best_ids)
    assert round_trips(tok, run.best_ids)
    again = gcg_optimise(model, tok, layout, target, cfg, torch.Generator().manual_seed(11), excluded)
    assert again == run
    other = gcg_optimise(model, tok, layout, target, cfg, torch.Generator().manual_seed(12), excluded)
    assert other.losses != run.losses
    # the recorded loss is the real loss of the recorded suffix
    objective = SuffixObjective(model, layout, target, use_prefix_cache=False)
    assert float(objective.losses(torch.tensor([run.best_ids]), 1)[0]) == pytest.approx(
        run.best_loss, abs=1e-5
    )


def test_gcg_attack_generates_from_its_recorded_suffix(
    attack_ctx: Any, probes: list[Any], generate: Any
) -> None:
    from remnant import registry

    params = {"suffix_len": 4, "steps": 3, "search_width": 16, "topk": 16, "batch_size": 16}
    attack = registry.create("attack", "gcg", params)
    items = probes[:2]
    out = attack.run(attack_ctx, items)
    tok = attack_ctx.tokenizer
    prompts = []
    for probe, o in zip(items, out, strict=True):
        assert o.extra["target"] == f"{probe.entity} is from" and o.extra["target_source"] == "stem"
        assert o.extra["best_loss"] <= o.extra["init_loss"]
        assert o.extra["seed"] == attack_ctx.derive_seed("gcg", probe.item_id)
        assert tok.decode(o.extra["suffix_ids"]) == o.extra["suffix"] and round_trips(
            tok, o.extra["suffix_ids"]
        )
        layout = suffix_layout(tok, probe.question, attack_ctx.fmt)
        prompts.append(layout.prompt_ids(o.extra["suffix_ids"]))
    assert [o.output for o in out] == generate(prompts)  # the model is not shown the target
    assert out[0].extra["suffix_ids"] != out[1].extra["suffix_ids"]  # per-item seeds and targets
