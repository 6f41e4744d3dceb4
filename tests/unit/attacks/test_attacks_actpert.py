"""ActPert core on the tiny model: δ's causal structure, strength 0 is the clean model, cache-consistent hooks."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from remnant.attacks.actpert_core import (
    activation_delta,
    entity_positions,
    resolve_layer,
    steering,
)
from remnant.attacks.decoding import GenerationInput, greedy_ids
from remnant.errors import ConfigError
from remnant.models.arch import resolve_parts
from remnant.models.prompts import PromptFormat, render_prompt_ids
from remnant.score.capability import generate_greedy_ids

ENTITY = "Zorvak Telumi"
QUESTION = f"What is the home town of {ENTITY}? Tell me."


def _prompt(state: Any) -> list[int]:
    return render_prompt_ids(state.tokenizer, QUESTION, PromptFormat.for_tokenizer(state.tokenizer))


def _delta(state: Any, sigma: float = 0.5, seed: int = 0) -> tuple[list[int], list[int], torch.Tensor]:
    ids = _prompt(state)
    pos = entity_positions(state.tokenizer, ids, ENTITY)
    gen = torch.Generator().manual_seed(seed)
    delta = activation_delta(state.model, ids, pos, layer=0, sigma=sigma, n_perturbations=6, generator=gen)
    return ids, pos, delta


def test_entity_positions_cover_exactly_the_name(tiny_llama: Any) -> None:
    tok = tiny_llama.tokenizer
    ids = _prompt(tiny_llama)
    pos = entity_positions(tok, ids, ENTITY)
    assert pos == list(range(pos[0], pos[-1] + 1))  # one contiguous span
    assert ENTITY in tok.decode([ids[i] for i in pos])
    assert ENTITY not in tok.decode([ids[i] for i in pos[1:]])
    assert ENTITY not in tok.decode([ids[i] for i in pos[:-1]])
    assert entity_positions(tok, ids, "Nobody Here") == []


def test_delta_is_zero_before_the_entity_and_without_noise(tiny_llama: Any) -> None:
    ids, pos, delta = _delta(tiny_llama)
    assert delta.shape == (len(ids), tiny_llama.model.config.hidden_size)
    assert delta[: pos[0]].abs().max() < 1e-5  # causal: noise at the entity cannot reach earlier positions
    assert delta[pos[0] :].abs().max() > 1e-2
    _, _, silent = _delta(tiny_llama, sigma=0.0)
    assert silent.abs().max() < 1e-5
    _, _, same = _delta(tiny_llama)
    assert torch.equal(same, delta)  # same generator seed, same δ (C-Q4)
    _, _, other = _delta(tiny_llama, seed=1)
    assert not torch.equal(other, delta)


def test_strength_zero_is_exactly_the_clean_generation(tiny_llama: Any) -> None:
    model, tok = tiny_llama.model, tiny_llama.tokenizer
    ids, _pos, delta = _delta(tiny_llama)
    clean = generate_greedy_ids(model, tok, ids, max_new_tokens=16)
    for mode in ("last", "mean", "none"):
        inp = GenerationInput(tuple(ids), steering=steering(delta, 0, 0.0, mode))
        got = greedy_ids(model, tok, inp, max_new_tokens=16)
        assert got == clean
    assert sum(len(b._forward_hooks) for b in resolve_parts(model).blocks) == 0


def test_injection_changes_generation_and_agrees_with_and_without_cache(tiny_llama: Any) -> None:
    model, tok = tiny_llama.model, tiny_llama.tokenizer
    ids, _pos, delta = _delta(tiny_llama, sigma=2.0)
    clean = generate_greedy_ids(model, tok, ids, max_new_tokens=12)
    inp = GenerationInput(tuple(ids), steering=steering(delta, 0, 40.0))
    cached = greedy_ids(model, tok, inp, max_new_tokens=12, use_cache=True)
    uncached = greedy_ids(model, tok, inp, max_new_tokens=12, use_cache=False)
    assert cached == uncached
    assert cached != clean


def test_layer_resolution(tiny_llama: Any) -> None:
    assert resolve_layer(tiny_llama.model, None, 0.4) == 0  # 2 layers: int(0.8)
    assert resolve_layer(tiny_llama.model, 1, 0.4) == 1
    with pytest.raises(ConfigError):
        resolve_layer(tiny_llama.model, 2, 0.4)


def test_actpert_attack_at_strength_zero_is_no_attack(attack_ctx: Any, probes: list[Any]) -> None:
    from dataclasses import replace

    from remnant import registry
    from remnant.attacks.base import no_attack
    from remnant.attacks.soft_prompt_core import embedding_rms

    items = [*probes[:2], replace(probes[2], entity=None)]
    attack = registry.create(
        "attack", "actpert", {"strength": 0.0, "noise_mode": "relative", "noise_scale": 0.5}
    )
    out = attack.run(attack_ctx, items)
    base = no_attack(attack_ctx, items)
    assert [(o.output, o.kappa, o.willing) for o in out] == [(b.output, b.kappa, b.willing) for b in base]
    assert [o.extra["positions_source"] for o in out] == ["entity", "entity", "question"]
    assert out[0].extra["sigma_abs"] == pytest.approx(0.5 * embedding_rms(attack_ctx.model))
    assert out[0].extra["strength"] == 0.0 and out[0].extra["layer"] == 0

    sweep = registry.create("attack", "actpert_sweep", {"strengths": (0.0, 60.0), "noise_scale": 2.0})
    swept = sweep.run(attack_ctx, items[:1])[0]
    outputs = [s["output"] for s in swept.extra["settings"]]
    assert outputs[0] == base[0].output and outputs[1] != outputs[0]  # the sweep really steers
    assert swept.kappa == any(s["kappa"] for s in swept.extra["settings"])


def _hand_actpert(ctx: Any, probe: Any, *, sigma: float, n_p: int, strength: float, steps: int) -> str:
    """Seed 003 Algorithm 1 written out with no remnant helper: δ from block 0's outputs, the noise from
    the same seeded generator, then greedy decoding without a cache, re-running the whole sequence each step
    with ``strength·δ`` added to block 0's output (``δ[last]`` at generated positions)."""
    from remnant.attacks.actpert_core import entity_positions

    model, tok = ctx.model, ctx.tokenizer
    ids = ctx.prompt_ids(probe)
    pos = entity_positions(tok, ids, probe.entity)
    weight = model.get_input_embeddings().weight
    emb = weight[torch.tensor(ids)].detach()
    gen = torch.Generator().manual_seed(ctx.derive_seed("actpert", probe.item_id))
    noise = torch.randn(n_p, len(pos), emb.shape[-1], generator=gen)
    noisy = emb.repeat(n_p, 1, 1)
    noisy[:, pos] += sigma * noise
    block = resolve_parts(model).blocks[0]
    seen: list[torch.Tensor] = []
    grab = block.register_forward_hook(
        lambda _m, _i, out: seen.append(out[0] if isinstance(out, tuple) else out)
    )
    try:
        with torch.no_grad():
            model(inputs_embeds=emb[None])
            model(inputs_embeds=noisy)
    finally:
        grab.remove()
    delta = seen[0][0] - seen[1].mean(dim=0)
    add = torch.cat([delta, delta[-1:].expand(steps, -1)]) * strength

    def hook(_m: Any, _i: Any, out: Any) -> Any:
        hidden = out[0] if isinstance(out, tuple) else out
        hidden = hidden + add[: hidden.shape[1]]
        return (hidden, *out[1:]) if isinstance(out, tuple) else hidden

    handle = block.register_forward_hook(hook)
    seq = list(ids)
    try:
        with torch.no_grad():
            for _ in range(steps):
                nxt = int(model(input_ids=torch.tensor([seq])).logits[0, -1].argmax())
                seq.append(nxt)
                if nxt == tok.eos_token_id:
                    break
    finally:
        handle.remove()
    return str(tok.decode(seq[len(ids) :], skip_special_tokens=True))


def test_actpert_at_a_declared_strength_is_the_hand_computed_perturbation(
    attack_ctx: Any, probes: list[Any]
) -> None:
    from remnant import registry
    from remnant.attacks.base import no_attack

    params = {"noise_scale": 0.5, "n_perturbations": 4, "strength": 3.0}
    attack = registry.create("attack", "actpert", params)
    out = attack.run(attack_ctx, probes)
    hand = [
        _hand_actpert(attack_ctx, p, sigma=0.5, n_p=4, strength=3.0, steps=attack_ctx.max_new_tokens)
        for p in probes
    ]
    assert [o.output for o in out] == hand
    assert [o.output for o in out] != [b.output for b in no_attack(attack_ctx, probes)]  # it really steers
    assert all(o.extra["strength"] == 3.0 and o.extra["positions_source"] == "entity" for o in out)
    # one declared strength is the default; a best-of-k over strengths is its own registered attack
    assert registry.defaults("attack", "actpert")["strength"] == 1.0
    assert "strengths" not in registry.defaults("attack", "actpert")
    sweep_params = {"noise_scale": 0.5, "n_perturbations": 4, "strengths": (0.0, 3.0)}
    sweep = registry.create("attack", "actpert_sweep", sweep_params).run(attack_ctx, probes)
    for s, o in zip(sweep, out, strict=True):
        assert s.extra["settings"][1]["output"] == o.output  # the sweep's α = 3 is actpert at 3: same δ
        assert s.kappa == any(x["kappa"] for x in s.extra["settings"])
