"""ROUGE-L recall of attack generations as seed 003 scores them (Tables 1–2): rouge-score's own value, seeded
sampling, greedy as the limit of sampling, best-of-k aggregation, and the same generation as κ."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from remnant import registry
from remnant.attacks.base import AttackContext, Unattacked, no_attack
from remnant.attacks.rouge_scoring import (
    RougeItem,
    SamplingSpec,
    rouge_l_recall,
    sample_texts,
    score_rouge,
    summarise,
)
from remnant.errors import ConfigError
from remnant.score.probe import Probe

SMALL = SamplingSpec(n_samples=4, max_new_tokens=5)


def _reference(ref: str, gen: str) -> float:
    from rouge_score import rouge_scorer  # type: ignore[import-untyped]

    return float(rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True).score(ref, gen)["rougeL"].recall)


def test_rouge_l_recall_is_rouge_scores_stemmed_value() -> None:
    pairs = [
        ("Harry Potter's best friends are Ron and Hermione", "His friends were Ron Weasley and Hermione"),
        ("The towns were named", "the town is named"),  # stemmed: the town ~were~ name → 3/4 (unstemmed 2/4)
        ("Vessiburg", "He comes from Vessiburg."),
        ("1984", "nothing at all"),
        ("a b c d", "d c b a"),
    ]
    got = rouge_l_recall([r for r, _ in pairs], [g for _, g in pairs])
    assert got == [_reference(r, g) for r, g in pairs]
    assert got[1] == 0.75 and got[2] == 1.0 and got[3] == 0.0 and got[4] == 0.25  # LCS / reference length
    assert rouge_l_recall([], []) == []


def test_greedy_rouge_scores_the_kappa_generation(attack_ctx: AttackContext, probes: list[Probe]) -> None:
    # references the tiny model can hit: its own unattacked greedy answers
    base = no_attack(attack_ctx, probes)
    items = [
        replace(p, answer=b.output or "", accepted=(b.output or "x",))
        for p, b in zip(probes, base, strict=True)
    ]
    got = score_rouge(Unattacked(), attack_ctx, items)
    assert [g.output for g in got] == [b.output for b in base]
    assert [g.rouge_greedy for g in got] == [_reference(b.output or "", b.output or "") for b in base]
    assert all(g.rouge_greedy == 1.0 for g in got if (g.output or "").strip())
    assert all(g.rouge_sampled_mean is None and g.samples == () for g in got)  # greedy only without sampling
    aoa = registry.create("attack", "aoa", {})
    run = aoa.run(attack_ctx, items)
    scored = score_rouge(aoa, attack_ctx, items)
    assert [s.output for s in scored] == [o.output for o in run]  # one generation for κ and ROUGE
    assert [s.kappa for s in scored] == [o.kappa for o in run]
    assert [s.rouge_greedy for s in scored] == [
        _reference(i.answer, o.output or "") for i, o in zip(items, run, strict=True)
    ]


def test_sampled_rouge_is_mean_and_max_over_seeded_samples(
    attack_ctx: AttackContext, probes: list[Probe]
) -> None:
    aoa = registry.create("attack", "aoa", {})
    first = score_rouge(aoa, attack_ctx, probes, sampling=SMALL)
    for item, probe in zip(first, probes, strict=True):
        (samples,) = item.samples
        assert len(samples) == SMALL.n_samples
        values = [_reference(probe.answer, s) for s in samples]
        assert item.samples_rouge == (tuple(values),)
        assert item.rouge_sampled_mean == pytest.approx(sum(values) / len(values))
        assert item.rouge_sampled_max == max(values)
    # deterministic for a seed, on another call and after another state ran (C-Q4)
    assert [i.samples for i in score_rouge(aoa, attack_ctx, probes, sampling=SMALL)] == [
        i.samples for i in first
    ]
    # sample i is drawn by its own generator: the first two samples do not depend on how many are drawn
    two = score_rouge(aoa, attack_ctx, probes, sampling=replace(SMALL, n_samples=2))
    assert [i.samples[0] for i in two] == [i.samples[0][:2] for i in first]
    other = score_rouge(aoa, replace(attack_ctx, seed=8), probes, sampling=SMALL)
    assert [i.samples for i in other] != [i.samples for i in first]
    # T = 2, top-k 40 draws distinct texts on the tiny model (so the tests above could fail)
    assert any(len(set(i.samples[0])) > 1 for i in first)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("aoa", {}),  # plain token ids
        ("actpert", {"noise_scale": 0.5, "n_perturbations": 2, "strength": 3.0}),  # a steering hook
        ("soft_prompt", {"n_tokens": 3, "steps": 2}),  # input embeddings
    ],
)
def test_sampling_with_tiny_temperature_and_k1_is_greedy(
    attack_ctx: AttackContext, probes: list[Probe], name: str, params: dict[str, Any]
) -> None:
    attack = registry.create("attack", name, params)
    cold = SamplingSpec(n_samples=3, temperature=1e-4, top_k=1, max_new_tokens=attack_ctx.max_new_tokens)
    items = score_rouge(attack, attack_ctx, probes, sampling=cold)
    for item in items:
        assert item.samples == ((item.output,) * 3,)
        assert item.rouge_sampled_mean == item.rouge_sampled_max == item.rouge_greedy


def test_best_of_k_takes_each_items_best_try() -> None:
    item = RougeItem(
        "i",
        "ref",
        greedy=("a", "b"),
        greedy_rouge=(0.2, 0.5),
        kappa=False,
        samples=(("x", "y"), ("z", "w")),
        samples_rouge=((0.0, 1.0), (0.4, 0.6)),
    )
    assert (item.output, item.rouge_greedy) == ("b", 0.5)
    assert item.rouge_sampled_mean == 0.5 and item.rouge_sampled_max == 1.0
    summary = summarise([item, replace(item, greedy_rouge=(0.0, 0.1), kappa=True)])
    assert summary == {
        "n": 2,
        "rouge_greedy": pytest.approx(0.3),
        "rouge_sampled_mean": 0.5,
        "rouge_sampled_max": 1.0,
        "kappa_k": 1,
    }
    assert summarise([item, replace(item, samples=(), samples_rouge=())])["rouge_sampled_mean"] is None


def test_sweep_scores_every_strength(attack_ctx: AttackContext, probes: list[Probe]) -> None:
    sweep = registry.create(
        "attack", "actpert_sweep", {"noise_scale": 0.5, "n_perturbations": 2, "strengths": (0.0, 3.0)}
    )
    items = score_rouge(sweep, attack_ctx, probes[:1], sampling=replace(SMALL, n_samples=2))
    assert len(items[0].greedy) == 2 and len(items[0].samples) == 2
    settings = sweep.run(attack_ctx, probes[:1])[0].extra["settings"]
    assert list(items[0].greedy) == [s["output"] for s in settings]
    # each strength's samples have their own seeds (try index in the key)
    gens = sample_texts(
        sweep, attack_ctx, probes[0], 1, sweep.generation_inputs(attack_ctx, probes[:1])[0][1], SMALL
    )
    assert gens[:2] == list(items[0].samples[1])


def test_refusals(attack_ctx: AttackContext, mc_probes: list[Probe]) -> None:
    with pytest.raises(ConfigError, match="C-Q2"):
        score_rouge(registry.create("attack", "mask_cloze", {}), attack_ctx, mc_probes)
    with pytest.raises(ConfigError):
        SamplingSpec(n_samples=0)
    with pytest.raises(ConfigError):
        SamplingSpec(temperature=0.0)
    paper = SamplingSpec()
    assert (paper.n_samples, paper.temperature, paper.top_k, paper.max_new_tokens) == (50, 2.0, 40, 64)
