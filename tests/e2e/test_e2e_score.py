"""Scoring on the real SmolLM2-135M-Instruct (slow): the teacher-forced κ fast path agrees with real greedy
generation on ≥ 200 decisions, and analytic pass@N agrees with N = 50 real samples on ≥ 20 items (R6, §4.6).

Timings and figures are printed (run with ``-s``) for benchmarks/RESULTS.md.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import torch

from fixtures_models import smollm2_dir  # noqa: F401
from remnant.attacks.base import AttackContext
from remnant.attacks.repeated_sampling import (
    RepeatedSampling,
    RepeatedSamplingAnalytic,
    answer_sequences,
    starts_with_any,
)
from remnant.models.prompts import EncodedPair, PromptFormat, encode_pair
from remnant.score.capability import greedy_match
from remnant.score.probe import Probe
from remnant.stats import wilson_interval

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("smollm2")]


@pytest.fixture(scope="module")
def smol(smollm2_dir: Path) -> Any:  # noqa: F811
    from remnant.models import load_model

    return load_model(smollm2_dir, dtype="fp32")


def _general_probes() -> list[Probe]:
    from remnant.packs.general import general_items

    return [Probe.from_item(it) for it in general_items()]


@torch.no_grad()
def _greedy_batch(model: Any, prompts: list[list[int]], n: int) -> list[tuple[list[int], list[int]]]:
    """Exactly n greedy tokens per prompt from ``generate`` on one left-padded batch (EOS not special, so prefix
    decisions of any length can be read), and the runner-up token at each step."""
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    out = model.generate(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=n,
        min_new_tokens=n,
        do_sample=False,
        pad_token_id=0,
        eos_token_id=None,
        output_scores=True,
        return_dict_in_generate=True,
    )
    rows = []
    for i in range(len(prompts)):
        runner_up = [int(step[i].topk(2).indices[1]) for step in out.scores]
        rows.append(([int(t) for t in out.sequences[i, width:]], runner_up))
    return rows


def _greedy(model: Any, prompt: list[int], n: int) -> tuple[list[int], list[int]]:
    return _greedy_batch(model, [prompt], n)[0]


def test_teacher_forced_agrees_with_generation(smol: Any) -> None:
    model, tok = smol.model, smol.tokenizer
    fmt = PromptFormat.for_tokenizer(tok)
    probes = _general_probes()[:70]
    pairs: list[EncodedPair] = []
    truths: list[bool] = []
    start = time.perf_counter()
    bases = [encode_pair(tok, p.question, p.accepted[0], fmt) for p in probes]
    prompts = [b.input_ids[: b.prompt_len] for b in bases]
    # generate's greedy decisions in batches (left-padded, masked): the same decisions as one prompt at a time
    generated = [
        row for i in range(0, len(prompts), 14) for row in _greedy_batch(model, prompts[i : i + 14], 8)
    ]
    for i, (base, prompt, (gen, runner_up)) in enumerate(zip(bases, prompts, generated, strict=True)):
        # 1. the real accepted answer, end-of-turn included (the decision κ's fast path makes);
        # 2. the model's own greedy start (a true case); 3. the same with its last token swapped for the
        #    runner-up (a near miss: the hardest false case)
        length = 2 + i % 5
        own = gen[:length]
        for ans in (base.answer_ids, own, own[:-1] + [runner_up[length - 1]]):
            pairs.append(EncodedPair(prompt + ans, [-100] * len(prompt) + ans, len(prompt), ans))
            truths.append(gen[: len(ans)] == ans if len(ans) <= 8 else False)
    gen_secs = time.perf_counter() - start
    start = time.perf_counter()
    fast = greedy_match(model, pairs, batch_size=16)
    tf_secs = time.perf_counter() - start
    agree = sum(f == t for f, t in zip(fast, truths, strict=True))
    print(
        f"\nteacher-forced vs generated: {agree}/{len(pairs)} agree; true cases {sum(truths)}; "
        f"generation {gen_secs:.1f}s, teacher-forced {tf_secs:.1f}s"
    )
    assert len(pairs) >= 200
    assert 0 < sum(truths) < len(truths)
    assert fast == truths


def test_analytic_pass_at_50_matches_samples(smol: Any) -> None:
    model, tok = smol.model, smol.tokenizer
    fmt = PromptFormat.for_tokenizer(tok)
    ctx = AttackContext(model=model, tokenizer=tok, fmt=fmt, seed=11, max_new_tokens=8)
    n, temperature, top_k = 50, 1.0, 40
    analytic = RepeatedSamplingAnalytic(n_samples=n, temperature=temperature, top_k=top_k, ks=(1, n))
    items: list[tuple[Probe, list[list[int]]]] = []
    for p in _general_probes()[:60]:
        # The answer forms: the real answer and the model's own 2-token greedy start, so p spans (0, 1).
        prompt = ctx.prompt_ids(p)
        own = tok.decode(_greedy(model, prompt, 2)[0])
        probe = Probe(p.item_id, p.question, own, (own, *p.accepted))
        seqs = answer_sequences(ctx, probe)
        items.append((probe, seqs))
        if len(items) == 25:
            break
    level = 1 - 0.05 / len(items)  # Bonferroni: 95% for the whole family of items
    rows = []
    start = time.perf_counter()
    ps = [analytic.single_sample_probability(ctx, probe) for probe, _ in items]
    an_secs = time.perf_counter() - start
    start = time.perf_counter()
    for (probe, seqs), p in zip(items, ps, strict=True):
        steps = max(len(s) for s in seqs)
        sampler = RepeatedSampling(
            n_samples=n, temperature=temperature, top_k=top_k, ks=(1,), max_new_tokens=steps
        )
        samples = sampler.sample(ctx, probe, ctx.prompt_ids(probe))
        hits = sum(starts_with_any(s, seqs) for s in samples)
        lo, hi = wilson_interval(hits, n, level=level)
        pass_lo, pass_hi = 1 - (1 - lo) ** n, 1 - (1 - hi) ** n
        rows.append((probe.item_id, p, hits, lo, hi, 1 - (1 - p) ** n, pass_lo, pass_hi))
    sample_secs = time.perf_counter() - start
    print(f"\nanalytic {an_secs:.1f}s for {len(items)} items; sampling {sample_secs:.1f}s ({n} samples each)")
    for r in rows:
        print("  {}: p={:.3f} hits={}/50 wilson=[{:.3f},{:.3f}] pass@50={:.3f} in [{:.3f},{:.3f}]".format(*r))
    assert len(rows) >= 20
    assert sum(0.05 < r[1] < 0.95 for r in rows) >= 10  # most items are informative, not trivially 0 or 1
    for _, p, _, lo, hi, pass_n, pass_lo, pass_hi in rows:
        assert lo <= p <= hi
        assert pass_lo <= pass_n <= pass_hi
