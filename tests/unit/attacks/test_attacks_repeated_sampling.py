"""Repeated sampling: unbiased pass@k, seeded per-sample generators, and the analytic single-sample
probability agreeing with real samples under the same temperature and top-k (docs/latent.md)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch
from hypothesis import given
from hypothesis import strategies as st

from remnant.attacks.base import AttackContext
from remnant.attacks.decoding import filtered_logprobs
from remnant.attacks.repeated_sampling import (
    RepeatedSampling,
    RepeatedSamplingAnalytic,
    answer_sequences,
    pass_at_k,
    starts_with_any,
)
from remnant.score.probe import Probe
from remnant.stats import wilson_interval


@given(st.integers(1, 60).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_pass_at_k_matches_combinatorics(nck: tuple[int, int, int]) -> None:
    n, c, k = nck
    expected = 1.0 - math.comb(n - c, k) / math.comb(n, k)
    assert math.isclose(pass_at_k(n, c, k), expected, rel_tol=1e-9, abs_tol=1e-12)


def test_pass_at_k_edges() -> None:
    assert pass_at_k(50, 0, 50) == 0.0
    assert pass_at_k(50, 1, 50) == 1.0
    assert math.isclose(pass_at_k(50, 5, 1), 0.1)


def test_filtered_logprobs_top_k_and_temperature() -> None:
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0]])
    lp = filtered_logprobs(logits, 2.0, 2)
    assert torch.isinf(lp[0, 2:]).all()
    expected = torch.softmax(torch.tensor([1.0, 0.5]), dim=0).log()
    assert torch.allclose(lp[0, :2], expected)
    assert torch.allclose(filtered_logprobs(logits, 1.0, None).exp().sum(), torch.tensor(1.0))


def test_samples_are_seeded_per_sample(attack_ctx: AttackContext, probes: list[Any]) -> None:
    prompt = attack_ctx.prompt_ids(probes[0])
    four = RepeatedSampling(n_samples=4, ks=(1,), max_new_tokens=5).sample(attack_ctx, probes[0], prompt)
    eight = RepeatedSampling(n_samples=8, ks=(1,), max_new_tokens=5).sample(attack_ctx, probes[0], prompt)
    assert eight[:4] == four  # sample i does not depend on how many others were drawn
    assert len({tuple(r) for r in eight}) > 1  # and the samples do differ
    other = replace(attack_ctx, seed=8)
    assert RepeatedSampling(n_samples=4, ks=(1,), max_new_tokens=5).sample(other, probes[0], prompt) != four


def test_analytic_agrees_with_sampling_on_tiny_model(attack_ctx: AttackContext) -> None:
    # A probe whose "answer" is the model's own likeliest two-token start, so p is far from 0 and 1.
    ctx = replace(attack_ctx, max_new_tokens=2)
    probe = Probe("a", "Name the town Zorvak Telumi comes from.", "x", ("x",))
    prompt = ctx.prompt_ids(probe)
    with torch.no_grad():
        first = int(ctx.model(input_ids=torch.tensor([prompt])).logits[0, -1].argmax())
        second = int(ctx.model(input_ids=torch.tensor([[*prompt, first]])).logits[0, -1].argmax())
    answer = ctx.tokenizer.decode([first, second])
    probe = replace(probe, answer=answer, accepted=(answer,))
    seqs = answer_sequences(ctx, probe)
    assert seqs and seqs[0] == [first, second]
    n = 400
    analytic = RepeatedSamplingAnalytic(n_samples=n, temperature=0.05, top_k=20, ks=(1, n))
    p = analytic.single_sample_probability(ctx, probe)
    sampler = RepeatedSampling(n_samples=n, temperature=0.05, top_k=20, ks=(1,), max_new_tokens=2)
    rows = sampler.sample(ctx, probe, prompt)
    hits = sum(starts_with_any(r, seqs) for r in rows)
    lo, hi = wilson_interval(hits, n)
    assert 0.01 < p < 0.99
    assert lo <= p <= hi, (p, hits, lo, hi)
    out = analytic.run(ctx, [probe])[0]
    assert out.output is None and out.willing is None
    assert math.isclose(float(out.kappa), 1 - (1 - p) ** n)


def test_sampled_outcome_counts(attack_ctx: AttackContext, probes: list[Any]) -> None:
    out = RepeatedSampling(n_samples=4, ks=(1, 4), max_new_tokens=4).run(attack_ctx, probes[:1])[0]
    assert out.extra["n_samples"] == 4 and len(out.extra["sample_seeds"]) == 4
    assert out.kappa == (out.extra["hits"] > 0)
    assert set(out.extra["pass_at"]) == {"1", "4"}
