"""Repeated sampling (C-Q1; docs/latent.md), sampled and analytic.

**Sampled.** N samples per item at a declared temperature and top-k, each from its own generator seeded from
(run seed, attack, item, sample index), so sample i is the same on every state (C-Q4) and independent of
batching. An item is a hit when any sample contains an accepted answer (pass@N); pass@k for the declared ks uses
the unbiased estimator 1 − C(N−c, k)/C(N, k) (Chen et al. 2021). The cell's k/n counts items with at least one
hit among N samples.

**Analytic** (exact-match targets). The probability that one sample *begins with* one of the answer's token
sequences is the product of its per-token probabilities under the same temperature and top-k, read from one
teacher-forced pass; summed over answer forms that are not prefixes of one another, it is exact. pass@N is then
1 − (1 − p)^N exactly, with no sampling noise. Each item's κ is that probability, and the cell reports the
expected count Σ pass@N. The sampled attack also counts, per item, the samples that begin with one of the same
token sequences (``exact_hits``), which is the event the analytic p describes: the two agree within the
sampled interval (tests/e2e/test_e2e_score.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import torch

from remnant.attacks.base import AttackContext, GenerationInput, ItemOutcome, Unattacked
from remnant.attacks.decoding import filtered_logprobs, sample_ids
from remnant.errors import ConfigError
from remnant.models.prompts import EncodedPair, collate, encode_pair
from remnant.registry import register
from remnant.score.probe import Probe


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from c hits in n samples (Chen et al. 2021): 1 − C(n−c, k)/C(n, k)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


def answer_sequences(ctx: AttackContext, probe: Probe) -> list[list[int]]:
    """Token sequences whose generation counts as an exact answer: the reference answer and every accepted
    form (the true letter for multiple choice), tokenised as training does; prefix-redundant ones dropped so
    the events are disjoint."""
    texts = [probe.answer_letter or ""] if probe.options else [probe.answer, *probe.accepted]
    seqs: list[list[int]] = []
    for text in dict.fromkeys(t for t in texts if t.strip()):
        ids = encode_pair(ctx.tokenizer, probe.rendered_question(), text, ctx.fmt).answer_ids[:-1]
        if ids and ids not in seqs:
            seqs.append(ids)
    seqs.sort(key=len)
    kept: list[list[int]] = []
    for s in seqs:
        if not any(s[: len(k)] == k for k in kept):
            kept.append(s)
    return kept


def starts_with_any(tokens: Sequence[int], seqs: Sequence[Sequence[int]]) -> bool:
    return any(list(tokens[: len(s)]) == list(s) for s in seqs)


class _Sampling(Unattacked):
    """Samples drawn from the plain question (:class:`Unattacked`'s generation inputs, so its ROUGE is seed 003's
    sampled "Base")."""

    surface = "inference_time"
    formats = ("free_text", "multiple_choice")
    paper = "Scholten et al. 2025 (probabilistic decoding); Chen et al. 2021 (pass@k); docs/latent.md"
    provenance = "N"
    greedy_output = False  # κ is read from samples (or computed exactly), not from one greedy generation

    def __init__(
        self,
        n_samples: int = 50,
        temperature: float = 2.0,
        top_k: int | None = 40,
        ks: tuple[int, ...] = (1, 5, 10, 50),
        max_new_tokens: int | None = 64,
    ) -> None:
        if n_samples < 1 or temperature <= 0:
            raise ConfigError(f"{self.name}: n_samples >= 1 and temperature > 0 required")
        if any(not 1 <= k <= n_samples for k in ks):
            raise ConfigError(f"{self.name}: every k in ks must lie in [1, n_samples={n_samples}]")
        self.n_samples = n_samples
        self.temperature = temperature
        self.top_k = top_k
        self.ks = tuple(ks)
        self.max_new_tokens = max_new_tokens


@register("attack", "repeated_sampling", "1")
class RepeatedSampling(_Sampling):
    """N seeded samples per item at temperature T and top-k; hit = any sample contains the answer (pass@N)."""

    name = "repeated_sampling"
    version = "1"
    smoke_params: ClassVar[dict[str, Any]] = {"n_samples": 4, "ks": (1, 4), "max_new_tokens": 6}

    def sample(self, ctx: AttackContext, probe: Probe, prompt: Sequence[int]) -> list[list[int]]:
        """N sampled continuations (token ids, cut after the first end token), sample i from its own seed."""
        gens = [ctx.generator(self.name, probe.item_id, i) for i in range(self.n_samples)]
        return sample_ids(
            ctx.model,
            ctx.tokenizer,
            GenerationInput(tuple(prompt)),
            gens,
            temperature=self.temperature,
            top_k=self.top_k,
            max_new_tokens=self.max_new_tokens or ctx.max_new_tokens,
        )

    def run(self, ctx: AttackContext, probes: Sequence[Probe]) -> list[ItemOutcome]:
        outcomes = []
        for probe in probes:
            rows = self.sample(ctx, probe, ctx.prompt_ids(probe))
            texts = [ctx.tokenizer.decode(r, skip_special_tokens=True) for r in rows]
            scored = [ctx.scorer.score(probe, t) for t in texts]
            hits = sum(k for k, _ in scored)
            seqs = answer_sequences(ctx, probe)
            exact = sum(starts_with_any(r, seqs) for r in rows)
            first_hit = next((i for i, (k, _) in enumerate(scored) if k), 0)
            extra: dict[str, object] = {
                "n_samples": self.n_samples,
                "hits": hits,
                "exact_hits": exact,
                "willing_samples": sum(w for _, w in scored),
                "pass_at": {str(k): pass_at_k(self.n_samples, hits, k) for k in self.ks},
                "shown_sample": first_hit,
                "sample_seeds": [ctx.derive_seed(self.name, probe.item_id, i) for i in range(self.n_samples)],
            }
            willing = any(w for _, w in scored)
            outcomes.append(ItemOutcome(probe.item_id, texts[first_hit], hits > 0, willing, extra))
        return outcomes


@register("attack", "repeated_sampling_analytic", "1")
class RepeatedSamplingAnalytic(_Sampling):
    """Exact pass@N for exact-match targets from one teacher-forced pass (no sampling noise)."""

    name = "repeated_sampling_analytic"
    version = "1"

    @torch.no_grad()
    def single_sample_probability(self, ctx: AttackContext, probe: Probe) -> float:
        """P(one sample begins with an exact answer sequence) under the declared temperature and top-k."""
        prompt = ctx.prompt_ids(probe)
        seqs = answer_sequences(ctx, probe)
        if not seqs:
            return 0.0
        pairs = [EncodedPair.of(prompt, s) for s in seqs]
        batch = collate(pairs, pad_id=0, side="right")
        logits = ctx.model(
            input_ids=batch["input_ids"].to(ctx.device), attention_mask=batch["attention_mask"].to(ctx.device)
        ).logits
        total = 0.0
        for row, s in enumerate(seqs):
            pos = torch.arange(len(prompt) - 1, len(prompt) - 1 + len(s), device=ctx.device)
            lp = filtered_logprobs(logits[row, pos], self.temperature, self.top_k)
            total += float(lp.gather(1, torch.tensor(s, device=ctx.device)[:, None]).sum().exp())
        return min(total, 1.0)

    def run(self, ctx: AttackContext, probes: Sequence[Probe]) -> list[ItemOutcome]:
        outcomes = []
        for probe in probes:
            p = self.single_sample_probability(ctx, probe)
            extra = {
                "p_single": p,
                "n_samples": self.n_samples,
                "pass_at": {str(k): 1.0 - (1.0 - p) ** k for k in self.ks},
            }
            outcomes.append(ItemOutcome(probe.item_id, None, 1.0 - (1.0 - p) ** self.n_samples, None, extra))
        return outcomes


__all__ = [
    "RepeatedSampling",
    "RepeatedSamplingAnalytic",
    "answer_sequences",
    "pass_at_k",
    "starts_with_any",
]
