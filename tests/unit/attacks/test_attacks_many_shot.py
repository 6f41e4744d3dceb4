"""Many-shot: the shared prefix's KV cache gives the same outputs as recomputing it; demonstrations never leak
a probe's answer; the shot count shrinks to fit the context (C-Q1, docs/latent.md)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from remnant.attacks.base import AttackContext
from remnant.attacks.many_shot import ManyShot, render_many_shot, shared_prefix_len
from remnant.errors import ConfigError
from remnant.score.capability import generate_greedy_ids


def test_cached_equals_uncached(attack_ctx: AttackContext, probes: list[Any]) -> None:
    ctx = replace(attack_ctx, max_new_tokens=8)
    cached = ManyShot(shots=4, use_prefix_cache=True).run(ctx, probes)
    plain = ManyShot(shots=4, use_prefix_cache=False).run(ctx, probes)
    assert [o.output for o in cached] == [o.output for o in plain]
    assert cached[0].extra["shared_prefix_tokens"] > 20  # the demonstrations really were shared
    assert plain[0].extra["shared_prefix_tokens"] == 0


def test_uncached_equals_hf_generate(attack_ctx: AttackContext, probes: list[Any]) -> None:
    ctx = replace(attack_ctx, max_new_tokens=8)
    attack = ManyShot(shots=3, use_prefix_cache=True)
    demos = attack.fit(ctx, attack.select_demos(ctx, probes), probes)
    model, tok = ctx.model, ctx.tokenizer
    saved = model.generation_config.eos_token_id
    for probe, outcome in zip(probes, attack.run(ctx, probes), strict=True):
        ids = render_many_shot(tok, ctx.fmt, demos, probe.rendered_question())
        ref = generate_greedy_ids(model, tok, ids, max_new_tokens=8)
        assert outcome.output == tok.decode(ref, skip_special_tokens=True)
    assert model.generation_config.eos_token_id == saved


def test_demos_do_not_leak(attack_ctx: AttackContext, probes: list[Any]) -> None:
    demos = ManyShot(shots=16).select_demos(attack_ctx, probes)
    assert demos and all(d.answer != "Paris" for d in demos)  # probe p1's answer is Paris
    assert len(demos) == len(attack_ctx.demonstrations) - 1


def test_fit_shrinks_to_context(attack_ctx: AttackContext, probes: list[Any]) -> None:
    attack = ManyShot(shots=16)
    demos = attack.select_demos(attack_ctx, probes)
    full = len(render_many_shot(attack_ctx.tokenizer, attack_ctx.fmt, demos, probes[0].rendered_question()))
    tight = replace(attack_ctx, context_limit=full - 5 + attack_ctx.max_new_tokens)
    fitted = attack.fit(tight, demos, probes)
    assert 0 < len(fitted) < len(demos)
    with pytest.raises(ConfigError):
        attack.fit(replace(attack_ctx, context_limit=10), demos, probes)


def test_shared_prefix_len() -> None:
    assert shared_prefix_len([[1, 2, 3, 4], [1, 2, 5]]) == 2
    assert shared_prefix_len([[1, 2, 3], [1, 2, 3]]) == 2  # leaves one token of each prompt to run
