"""Soft-prompt core on the tiny model: the cap holds, the loss falls, the generation path is the model's (§4.8)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from remnant.attacks.decoding import greedy_ids
from remnant.attacks.gcg_core import excluded_tokens, initial_suffix
from remnant.attacks.soft_prompt_core import (
    SoftPromptConfig,
    embedding_rms,
    project,
    soft_prompt_input,
    soft_prompt_optimise,
)
from remnant.attacks.suffix_layout import suffix_layout
from remnant.errors import ConfigError
from remnant.models.prompts import PromptFormat
from remnant.score.capability import generate_greedy_ids

QUESTION = "Where is Zorvak Telumi from?"
TARGET = "Zorvak Telumi is from"


def _setup(state: Any, n: int) -> tuple[Any, Any, list[int], list[int]]:
    tok = state.tokenizer
    layout = suffix_layout(tok, QUESTION, PromptFormat.for_tokenizer(tok))
    excluded = excluded_tokens(tok, state.model.get_input_embeddings().weight.shape[0])
    return layout, tok, tok(TARGET, add_special_tokens=False)["input_ids"], initial_suffix(tok, n, excluded)


@pytest.mark.parametrize("norm", ["linf", "l2"])
def test_soft_prompt_respects_the_cap_and_lowers_the_loss(tiny_llama: Any, norm: str) -> None:
    layout, _tok, target, init = _setup(tiny_llama, 4)
    cfg = SoftPromptConfig(n_tokens=4, steps=8, step_size=0.2, radius=0.3, norm=norm)  # type: ignore[arg-type]
    res = soft_prompt_optimise(tiny_llama.model, layout, target, init, cfg)
    rms = embedding_rms(tiny_llama.model)
    d = tiny_llama.model.config.hidden_size
    assert res.rms == pytest.approx(rms)
    assert res.radius_abs == pytest.approx(0.3 * rms * (d**0.5 if norm == "l2" else 1.0))
    assert res.step_abs == pytest.approx(0.2 * rms)
    # 8 steps of 0.2·rms could travel 1.6·rms: the cap must have bitten, and held
    assert res.max_deviation <= res.radius_abs * (1 + 1e-5)
    assert res.max_deviation >= 0.9 * res.radius_abs
    assert res.best_loss < res.init_loss - 0.01
    loose = soft_prompt_optimise(
        tiny_llama.model,
        layout,
        target,
        init,
        SoftPromptConfig(4, 8, 0.2, 30.0, norm),  # type: ignore[arg-type]
    )
    assert loose.max_deviation > 2 * res.radius_abs  # without the cap the vectors travel much further …
    assert loose.best_loss < res.best_loss - 0.03  # … and force the target harder: the cap binds
    assert min(res.losses) == pytest.approx(res.best_loss)
    again = soft_prompt_optimise(tiny_llama.model, layout, target, init, cfg)
    assert torch.equal(again.best_embeds, res.best_embeds) and again.losses == res.losses


def test_projection_is_onto_the_ball() -> None:
    delta = torch.tensor([[3.0, -4.0], [0.1, 0.1]])
    assert torch.equal(project(delta, "linf", 1.0), torch.tensor([[1.0, -1.0], [0.1, 0.1]]))
    l2 = project(delta, "l2", 1.0)
    assert l2[0].norm() == pytest.approx(1.0) and torch.allclose(l2[0], torch.tensor([0.6, -0.8]))
    assert torch.equal(l2[1], delta[1])  # inside the ball: untouched


def test_generation_from_token_embeddings_equals_generation_from_ids(tiny_llama: Any) -> None:
    model, tok = tiny_llama.model, tiny_llama.tokenizer
    layout = suffix_layout(tok, QUESTION, PromptFormat.for_tokenizer(tok))
    suffix = [300, 301, 302]
    vectors = model.get_input_embeddings()(torch.tensor(suffix)).detach()
    from_embeds = greedy_ids(model, tok, soft_prompt_input(model, layout, vectors, suffix), max_new_tokens=12)
    from_ids = generate_greedy_ids(model, tok, layout.prompt_ids(suffix), max_new_tokens=12)
    assert from_embeds == from_ids and len(from_ids) > 0


def test_budget_limits_are_enforced() -> None:
    with pytest.raises(ConfigError):
        SoftPromptConfig(n_tokens=21)
    with pytest.raises(ConfigError):
        SoftPromptConfig(steps=101)
    with pytest.raises(ConfigError):
        SoftPromptConfig(radius=0.0)
    with pytest.raises(ConfigError):
        SoftPromptConfig(norm="l1")  # type: ignore[arg-type]


def test_soft_prompt_attack_output_is_the_capped_vectors_continuation(
    attack_ctx: Any, probes: list[Any]
) -> None:
    from remnant import registry
    from remnant.attacks.dialogue import target_ids

    attack = registry.create("attack", "soft_prompt", {"n_tokens": 4, "steps": 3, "radius": 0.2})
    out = attack.run(attack_ctx, probes[:1])
    o, probe = out[0], probes[0]
    assert o.extra["max_deviation"] <= o.extra["radius_abs"] * (1 + 1e-5)
    assert o.extra["radius_abs"] == pytest.approx(0.2 * embedding_rms(attack_ctx.model))
    tok, model = attack_ctx.tokenizer, attack_ctx.model
    layout = suffix_layout(tok, probe.question, attack_ctx.fmt)
    res = soft_prompt_optimise(
        model,
        layout,
        target_ids(tok, attack_ctx.fmt, o.extra["target"]),
        o.extra["init_ids"],
        SoftPromptConfig(n_tokens=4, steps=3, radius=0.2),
    )
    inp = soft_prompt_input(model, layout, res.best_embeds, o.extra["init_ids"])
    ids = greedy_ids(model, tok, inp, max_new_tokens=attack_ctx.max_new_tokens)
    assert o.output == tok.decode(ids, skip_special_tokens=True)
    assert o.extra["losses"] == list(res.losses)
