"""Capability κ over probes (R6; docs/latent.md): by generation, and for multiple choice by option
log-likelihood and by generated letter, net of chance at the rate level.

- ``kappa_generated``: greedy generation, scored by :class:`~remnant.score.scorer.Scorer` (normalised match,
  or the generated letter for multiple choice);
- ``choice_by_loglik``: the option whose text has the highest summed log-likelihood after the plain question
  (``answer_loglikelihoods``: every option of an item in one forward);
- ``kappa_rate``: the cell's Rate, with the chance rate attached for multiple choice (net of chance, floored
  at zero; R19).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from remnant.models.device import model_device
from remnant.models.forward_keywords import answer_logits
from remnant.models.prompts import EncodedPair, PromptFormat, collate, render_prompt_ids
from remnant.score.capability import generate_greedy
from remnant.score.probe import Probe
from remnant.score.rates import Rate
from remnant.score.scorer import Scorer


def kappa_generated(
    model: Any,
    tokenizer: Any,
    fmt: PromptFormat,
    probes: Sequence[Probe],
    *,
    scorer: Scorer | None = None,
    max_new_tokens: int = 32,
    batch_size: int = 16,
) -> tuple[list[bool], list[bool], list[str]]:
    """Per probe: κ, w and the greedy output (R6: both computed, kept apart)."""
    sc = scorer or Scorer()
    prompts = [render_prompt_ids(tokenizer, p.rendered_question(), fmt) for p in probes]
    texts = generate_greedy(model, tokenizer, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size)
    scored = [sc.score(p, t) for p, t in zip(probes, texts, strict=True)]
    return [k for k, _ in scored], [w for _, w in scored], texts


@torch.no_grad()
def choice_by_loglik(model: Any, tokenizer: Any, fmt: PromptFormat, probe: Probe) -> int:
    """Index of the option with the highest summed log-likelihood after the plain question."""
    if not probe.options:
        raise ValueError(f"item {probe.item_id} has no options")
    prompt = render_prompt_ids(tokenizer, probe.question, fmt)
    return option_by_loglik(model, tokenizer, prompt, probe.options, " " if fmt.style == "raw" else "")


def option_by_loglik(model: Any, tokenizer: Any, prompt: list[int], options: Sequence[str], sep: str) -> int:
    """Index of the option whose text, after ``sep``, has the highest summed log-likelihood after ``prompt``."""
    pairs = []
    for opt in options:
        ans = list(tokenizer(sep + opt, add_special_tokens=False)["input_ids"])
        pairs.append(EncodedPair.of(prompt, ans))
    return best_option(answer_loglikelihoods(model, pairs))


@torch.no_grad()
def answer_loglikelihoods(model: Any, pairs: Sequence[EncodedPair]) -> list[float]:
    """Summed log-probability of each pair's answer tokens after its prompt: one right-padded forward whose output
    head reads only the answer positions (:func:`~remnant.models.forward_keywords.answer_logits`). Every
    forced-choice reading (a pack's binding, Class D linkability) scores its options here. The options of one
    question share its prompt: that prefix runs once and its cache is repeated to every option (the same
    log-probabilities to float rounding; ``tests/unit/classd/test_classd_battery.py`` checks one option at a time)."""
    if not pairs:
        return []
    device = model_device(model)
    shared, forward = _shared_prompt(model, pairs, device)
    rows = [
        EncodedPair(p.input_ids[shared:], p.labels[shared:], p.prompt_len - shared, p.answer_ids)
        for p in pairs
    ]
    batch = {k: v.to(device) for k, v in collate(rows, pad_id=0, side="right").items()}
    if shared:
        mask = batch["attention_mask"]
        batch["attention_mask"] = torch.cat([mask.new_ones(mask.shape[0], shared), mask], dim=1)
        forward["position_ids"] = shared + torch.arange(mask.shape[1], device=device).expand(
            mask.shape[0], -1
        )
    logits, at = answer_logits(model, batch, **forward)
    targets = batch["labels"][:, 1:][at]
    token_logp = torch.log_softmax(logits, dim=-1).gather(1, targets[:, None])[:, 0]
    per_row = torch.split(token_logp, [int(n) for n in at.sum(dim=1)])
    return [float(row.sum()) for row in per_row]


def _shared_prompt(
    model: Any, pairs: Sequence[EncodedPair], device: torch.device
) -> tuple[int, dict[str, Any]]:
    """How many leading prompt tokens every pair shares (at least :data:`~remnant.models.greedy.MIN_SHARED`, one
    prompt token short of the shortest prompt so every answer's first logit is computed after it) and the forward
    keyword holding their cache, repeated to every pair; ``(0, {})`` when the model cannot take a cache."""
    from remnant.models.forward_keywords import cache_kwarg
    from remnant.models.greedy import MIN_SHARED, prefix_cache, shared_length

    name = cache_kwarg(model) if len(pairs) > 1 else None
    if name is None:
        return 0, {}
    shared = min(shared_length([p.input_ids for p in pairs]), min(p.prompt_len for p in pairs) - 1)
    cache = (
        prefix_cache(model, pairs[0].input_ids[:shared], len(pairs), device) if shared >= MIN_SHARED else None
    )
    return (shared, {name: cache}) if cache is not None else (0, {})


def best_option(scores: Sequence[float]) -> int:
    """The index of the highest score; ties go to the first (deterministic)."""
    return max(range(len(scores)), key=lambda i: (scores[i], -i))


def kappa_rate(hits: Sequence[bool], probes: Sequence[Probe]) -> Rate:
    """The cell's κ as a Rate; multiple-choice cells carry their chance rate (net of chance, floored at 0)."""
    chance = sum(p.chance_rate for p in probes) / len(probes) if probes else 0.0
    return Rate.count(hits, chance=chance)
