"""ROUGE-L recall of an attack's generations, as seed 003 scores its auditors (its Tables 1 and 2), beside κ.

Seed 003 §4.5 scores every auditor by ROUGE-L recall ("longest common subsequence normalized by reference
length") of the model's answer against the ground truth:

- **greedy** (its Table 1): one greedy generation per item;
- **sampled** (its Table 2): "temperature 2 and Top-K sampling with K = 40 … 50 responses with a maximum of 64
  new tokens"; the mean and the maximum ROUGE-L recall over an item's samples.

Both decode the inputs the attack's own κ is scored on, computed once, inside its generation scope; the greedy
generation is the κ generation, so an item's ROUGE and κ describe one output. The score is rouge-score's stemmed
ROUGE-L recall (:mod:`remnant.metrics.rouge`) against the probe's answer. A multiple-choice probe is scored against
its true option's text; seed 003 has no multiple-choice items, so treat those values as outside its definition.

Sampling is seeded per (run seed, ``"rouge_sampling"``, attack name, item, try, sample): sample ``i`` of an item
is the same on every state (C-Q4) and independent of the others; there is no global seeding. For a best-of-k
attack (``actpert_sweep``: one try per strength) an item's value is its best try's, as its κ is: greedy = the
largest greedy ROUGE over tries, sampled mean = the largest per-try mean, sampled max = the largest sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from remnant.attacks.base import Attack, AttackContext, GenerationInput
from remnant.attacks.decoding import sample_ids
from remnant.errors import ConfigError
from remnant.score.probe import Probe, target_format

#: Seed key of the ROUGE sampling generators (with the attack name, item id, try and sample index).
SAMPLING_KEY = "rouge_sampling"


@dataclass(frozen=True)
class SamplingSpec:
    """Seed 003's sampled decoding (Table 2): T = 2, top-k 40, 50 samples of at most 64 new tokens."""

    n_samples: int = 50
    temperature: float = 2.0
    top_k: int | None = 40
    max_new_tokens: int = 64

    def __post_init__(self) -> None:
        if self.n_samples < 1 or self.max_new_tokens < 1:
            raise ConfigError("ROUGE sampling: n_samples and max_new_tokens must be ≥ 1", requirement="R23")
        if not self.temperature > 0 or (self.top_k is not None and self.top_k < 1):
            raise ConfigError("ROUGE sampling: temperature > 0 and top_k ≥ 1 (or none)", requirement="R23")

    def to_dict(self) -> dict[str, object]:
        return {
            "n_samples": self.n_samples,
            "temperature": self.temperature,
            "top_k": self.top_k,
            "max_new_tokens": self.max_new_tokens,
        }


@dataclass(frozen=True)
class RougeItem:
    """One probe's ROUGE-L recall under one attack on one state, per try (one try for most attacks)."""

    item_id: str
    reference: str
    greedy: tuple[str, ...]
    greedy_rouge: tuple[float, ...]
    kappa: bool
    samples: tuple[tuple[str, ...], ...] = ()
    samples_rouge: tuple[tuple[float, ...], ...] = ()

    @property
    def best_try(self) -> int:
        return max(range(len(self.greedy_rouge)), key=lambda i: self.greedy_rouge[i])

    @property
    def output(self) -> str:
        """The greedy generation of the best try."""
        return self.greedy[self.best_try]

    @property
    def rouge_greedy(self) -> float:
        return max(self.greedy_rouge)

    @property
    def rouge_sampled_mean(self) -> float | None:
        if not self.samples_rouge:
            return None
        return max(sum(r) / len(r) for r in self.samples_rouge)

    @property
    def rouge_sampled_max(self) -> float | None:
        if not self.samples_rouge:
            return None
        return max(max(r) for r in self.samples_rouge)

    def to_dict(self) -> dict[str, object]:
        return {
            "item_id": self.item_id,
            "reference": self.reference,
            "output": self.output,
            "kappa": self.kappa,
            "rouge_greedy": self.rouge_greedy,
            "rouge_sampled_mean": self.rouge_sampled_mean,
            "rouge_sampled_max": self.rouge_sampled_max,
            "tries": len(self.greedy),
        }


def rouge_l_recall(references: Sequence[str], generations: Sequence[str]) -> list[float]:
    """Stemmed ROUGE-L recall of each generation against its reference (rouge-score, via remnant.metrics)."""
    from remnant.metrics.rouge import GenerationRecord, rouge_log

    if len(references) != len(generations):
        raise ValueError("rouge_l_recall needs one reference per generation")
    if not references:
        return []
    items = [[GenerationRecord("", r, g)] for r, g in zip(references, generations, strict=True)]
    log = rouge_log(items, rouge_type="rougeL_recall", multi=False)
    by_index = log.value_by_index or {}
    return [float(by_index[str(i)]["rougeL_recall"]) for i in range(len(items))]


def sample_texts(
    attack: Attack,
    ctx: AttackContext,
    probe: Probe,
    try_index: int,
    inp: GenerationInput,
    sampling: SamplingSpec,
) -> list[str]:
    """``sampling.n_samples`` sampled generations of one input, each from its own seeded generator."""
    gens = [
        ctx.generator(SAMPLING_KEY, attack.name, probe.item_id, try_index, i)
        for i in range(sampling.n_samples)
    ]
    rows = sample_ids(
        ctx.model,
        ctx.tokenizer,
        inp,
        gens,
        temperature=sampling.temperature,
        top_k=sampling.top_k,
        max_new_tokens=sampling.max_new_tokens,
    )
    return [ctx.tokenizer.decode(r, skip_special_tokens=True) for r in rows]


def score_rouge(
    attack: Attack,
    ctx: AttackContext,
    probes: Sequence[Probe],
    *,
    sampling: SamplingSpec | None = None,
) -> list[RougeItem]:
    """Per probe (in order), greedy ROUGE-L recall and κ on the context's model state, and, with ``sampling``,
    the mean and max ROUGE-L recall over sampled generations. Refuses an attack not defined for the probes'
    response format (C-Q2)."""
    reason = attack.applicable(target_format(list(probes)))
    if reason is not None:
        raise ConfigError(f"ROUGE scoring of {attack.name}: {reason}", requirement="C-Q2")
    with attack.generation_scope(ctx):
        inputs = attack.generation_inputs(ctx, probes)
        greedy = attack.greedy_texts(ctx, inputs)
        sampled: list[list[list[str]]] = []
        if sampling is not None:
            sampled = [
                [sample_texts(attack, ctx, probe, t, inp, sampling) for t, inp in enumerate(tries)]
                for probe, tries in zip(probes, inputs, strict=True)
            ]
    refs: list[str] = []
    gens: list[str] = []
    for i, probe in enumerate(probes):
        texts = [*greedy[i], *(s for per_try in (sampled[i] if sampled else []) for s in per_try)]
        refs += [probe.answer] * len(texts)
        gens += texts
    scores = iter(rouge_l_recall(refs, gens))
    out: list[RougeItem] = []
    for i, probe in enumerate(probes):
        g_rouge = tuple(next(scores) for _ in greedy[i])
        s_texts = tuple(tuple(s) for s in sampled[i]) if sampled else ()
        s_rouge = tuple(tuple(next(scores) for _ in s) for s in s_texts)
        kappa = any(ctx.scorer.score(probe, t)[0] for t in greedy[i])
        out.append(RougeItem(probe.item_id, probe.answer, tuple(greedy[i]), g_rouge, kappa, s_texts, s_rouge))
    return out


def summarise(items: Sequence[RougeItem]) -> dict[str, Any]:
    """Means over items (seed 003's table cells): greedy ROUGE-L recall, sampled mean and sampled max, and κ
    as k/n of the greedy generations."""
    n = len(items)

    def mean(values: Sequence[float | None]) -> float | None:
        got = [v for v in values if v is not None]
        return sum(got) / len(got) if got and len(got) == n else None

    return {
        "n": n,
        "rouge_greedy": mean([i.rouge_greedy for i in items]),
        "rouge_sampled_mean": mean([i.rouge_sampled_mean for i in items]),
        "rouge_sampled_max": mean([i.rouge_sampled_max for i in items]),
        "kappa_k": sum(i.kappa for i in items),
    }


__all__ = [
    "SAMPLING_KEY",
    "RougeItem",
    "SamplingSpec",
    "rouge_l_recall",
    "sample_texts",
    "score_rouge",
    "summarise",
]
