"""Contract over every registered attack (garak's idea): metadata, applicability (C-Q2), determinism for a
seed, and identical treatment of states (C-Q4). A new attack module gets these tests without further work."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from remnant import registry
from remnant.attacks.base import Attack, AttackContext
from remnant.engine.attack import AttackMeasurement
from remnant.engine.measurement import StateView, run_on_states
from remnant.engine.runner import CellRunner, MemoryStore
from remnant.records import Observation
from remnant.score.probe import RESPONSE_FORMATS, target_format
from remnant.standard.vocabulary import ADMITTED_SURFACES, CONTROL, POST, SURFACES

NAMES = registry.names("attack")


def _make(name: str) -> Attack:
    cls = registry.get("attack", name)
    return registry.create("attack", name, dict(cls.smoke_params))


def _comparable(outcomes: list[Any]) -> list[tuple[Any, ...]]:
    return [(o.item_id, o.output, o.kappa, o.willing, repr(sorted(o.extra.items()))) for o in outcomes]


def test_core_attacks_registered() -> None:
    # C-Q1: prefill, many-shot and repeated sampling must exist; quantization is the W-track extra.
    assert {"prefill", "many_shot", "repeated_sampling", "repeated_sampling_analytic", "quantize"} <= set(
        NAMES
    )


@pytest.mark.parametrize("name", NAMES)
def test_metadata(name: str) -> None:
    cls = registry.get("attack", name)
    assert issubclass(cls, Attack)
    assert cls.name == name == cls.registry_name
    assert cls.version == cls.registry_version and cls.version
    assert cls.surface in SURFACES
    assert cls.paper.strip()
    assert cls.formats and set(cls.formats) <= set(RESPONSE_FORMATS)
    assert cls.tracks and all(cls.surface in ADMITTED_SURFACES[t] for t in cls.tracks)
    assert cls.provenance in ("V", "N", "R")
    spec = _make(name).spec
    assert spec.name == name and spec.version == cls.version
    # every constructor parameter is recorded, defaults included (K4, R23)
    assert set(registry.defaults("attack", name)) <= set(spec.params)


@pytest.mark.parametrize("name", NAMES)
def test_applicability(name: str) -> None:
    attack = _make(name)
    for fmt in RESPONSE_FORMATS:
        reason = attack.applicable(fmt)
        assert (reason is None) == (fmt in attack.formats)
        if reason is not None:
            assert "C-Q2" in reason
    assert attack.applicable("essay") is not None
    for track in ("W", "Q"):
        assert (attack.applicable(attack.formats[0], track) is None) == (track in attack.tracks)


@pytest.mark.parametrize("name", NAMES)
def test_runs_deterministic_and_state_blind(
    name: str, attack_ctx: AttackContext, probes: list[Any], mc_probes: list[Any]
) -> None:
    attack = _make(name)
    items = probes if "free_text" in attack.formats else mc_probes
    first = attack.run(attack_ctx, items)
    assert [o.item_id for o in first] == [p.item_id for p in items]
    for o in first:
        assert isinstance(o.kappa, bool) or 0.0 <= float(o.kappa) <= 1.0
        assert o.willing is None or isinstance(o.willing, bool)
    # another state in between (perturbed weights) must not change what the attack does on the first (C-Q4)
    other = copy.deepcopy(attack_ctx.model)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(0.05 * torch.sign(p))
    attack.run(attack_ctx.with_model(other), items)
    again = attack.run(attack_ctx, items)
    assert _comparable(first) == _comparable(again)
    # the caller's model is left exactly as it was (weight-transform attacks work on a copy or restore)
    before = {k: v.clone() for k, v in attack_ctx.model.state_dict().items()}
    attack.run(attack_ctx, items)
    after = attack_ctx.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


@pytest.mark.parametrize("name", NAMES)
def test_identical_states_get_identical_cells(
    name: str, attack_ctx: AttackContext, probes: list[Any]
) -> None:
    attack = _make(name)
    reason = attack.applicable(target_format(probes))
    if reason is not None:  # recorded as not applicable by the schedule, never run (C-Q2)
        assert "C-Q2" in reason
        return
    twin = copy.deepcopy(attack_ctx.model)
    tok = attack_ctx.tokenizer
    states = {
        POST: StateView(POST, "a" * 64, attack_ctx.model, tok),
        CONTROL: StateView(CONTROL, "b" * 64, twin, tok),
    }
    store = MemoryStore()
    measurement = AttackMeasurement(name, attack, attack_ctx, probes, {}, roles=(POST, CONTROL))
    cells = run_on_states(CellRunner(store, "run-test"), measurement, states)
    a, b = (next(r for r in cells[role] if r.metric == "kappa") for role in (POST, CONTROL))
    assert a.status == b.status == "run", (a.reason, b.reason)
    assert (a.k, a.n) == (b.k, b.n) and a.n == len(probes)
    items = {
        role: [
            (o.item_id, o.output_excerpt, o.kappa, o.score, o.willing)
            for o in store.read()
            if isinstance(o, Observation) and o.model_state == role
        ]
        for role in (POST, CONTROL)
    }
    assert items[POST] == items[CONTROL] and len(items[POST]) == len(probes)


@pytest.mark.parametrize("name", NAMES)
def test_generation_inputs_reproduce_the_scored_output(
    name: str, attack_ctx: AttackContext, probes: list[Any], mc_probes: list[Any]
) -> None:
    # ROUGE scoring (seed 003) decodes from these inputs: the greedy decoding of an attack's inputs must be the
    # generation its κ was scored on, or ROUGE and κ would describe different outputs.
    attack = _make(name)
    items = probes if "free_text" in attack.formats else mc_probes
    with attack.generation_scope(attack_ctx):
        inputs = attack.generation_inputs(attack_ctx, items)
        texts = attack.greedy_texts(attack_ctx, inputs)
    assert len(inputs) == len(items) and all(len(tries) >= 1 for tries in inputs)
    assert [len(t) for t in texts] == [len(tries) for tries in inputs]
    if not attack.greedy_output:
        return
    outcomes = attack.run(attack_ctx, items)
    for o, tries, outs in zip(outcomes, inputs, texts, strict=True):
        assert o.output in outs
        if len(tries) == 1:
            assert o.output == outs[0] and dict(o.extra) == dict(tries[0].extra)


@pytest.mark.parametrize("name", NAMES)
def test_every_attack_can_be_scored_by_rouge(
    name: str, attack_ctx: AttackContext, probes: list[Any], mc_probes: list[Any]
) -> None:
    from remnant.attacks.rouge_scoring import SamplingSpec, score_rouge

    attack = _make(name)
    items = probes if "free_text" in attack.formats else mc_probes
    sampling = SamplingSpec(n_samples=2, max_new_tokens=3)
    first = score_rouge(attack, attack_ctx, items, sampling=sampling)
    assert [i.item_id for i in first] == [p.item_id for p in items]
    for item in first:
        assert 0.0 <= item.rouge_greedy <= 1.0
        assert item.rouge_sampled_mean is not None and item.rouge_sampled_max is not None
        assert 0.0 <= item.rouge_sampled_mean <= item.rouge_sampled_max <= 1.0
    again = score_rouge(attack, attack_ctx, items, sampling=sampling)
    assert [(i.greedy, i.samples) for i in again] == [(i.greedy, i.samples) for i in first]
