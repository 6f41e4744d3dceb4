"""Many-shot prompting (Anil et al. 2024; C-Q1; docs/latent.md [N]).

k demonstrations — question/answer pairs from the retain items, never the target's — precede the probe as real
prior chat turns (or ``Question:/Answer:`` blocks in the raw format), as many as fit in the context with room for
the answer. The demonstrations are the same for every probe, so the prompts share a long prefix whose key/value
cache is computed once and cropped back after each probe (``use_prefix_cache=False`` recomputes everything; the
outputs are identical).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from remnant.attacks.base import Attack, AttackContext, GenerationInput
from remnant.attacks.decoding import forward_cached
from remnant.attacks.dialogue import demo_answer
from remnant.errors import ConfigError
from remnant.models.device import model_device
from remnant.models.greedy import eos_ids
from remnant.models.greedy import shared_length as shared_prefix_len  # common prefix, one token left
from remnant.models.prompts import PromptFormat, render_prompt_ids
from remnant.registry import register
from remnant.score.normalise import answer_matches
from remnant.score.probe import Probe

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


def render_many_shot(
    tokenizer: PreTrainedTokenizerBase, fmt: PromptFormat, demos: Sequence[Probe], question: str
) -> list[int]:
    """Prompt ids: the demonstrations as prior turns, then the question, ending where the answer starts (the
    in-context attack's renderer)."""
    shots = [(d.rendered_question(), demo_answer(d)) for d in demos]
    return render_prompt_ids(tokenizer, question, fmt, shots=shots)


@torch.no_grad()
def greedy_from(
    model: PreTrainedModel, ids: Sequence[int], cache: Any, max_new_tokens: int, eos: Collection[int]
) -> list[int]:
    """Greedy continuation of ``ids`` given a cache already holding the tokens before them (or None)."""
    device = model_device(model)
    logits, cache = forward_cached(model, torch.tensor([list(ids)], device=device), cache)
    new: list[int] = []
    for _ in range(max_new_tokens):
        nxt = int(logits[0, -1].argmax())
        new.append(nxt)
        if nxt in eos:
            break
        logits, cache = forward_cached(model, torch.tensor([[nxt]], device=device), cache)
    return new


def _rewind(cache: Any, length: int, pristine: Any) -> Any:
    """The cache cut back to its first ``length`` tokens (crop; a fresh copy where a layer type cannot crop)."""
    extra = cache.get_seq_length() - length
    try:
        if extra > 0:
            cache.crop(-extra)
        return cache
    except (RuntimeError, ValueError):
        return copy.deepcopy(pristine)


@register("attack", "many_shot", "1")
class ManyShot(Attack):
    """k retain-item demonstrations as prior turns, then the probe, greedy (C-Q1)."""

    name = "many_shot"
    surface = "inference_time"
    version = "1"
    paper = "Anil et al. 2024, Many-shot jailbreaking; docs/latent.md"
    formats = ("free_text", "multiple_choice")
    provenance = "N"
    smoke_params: ClassVar[dict[str, Any]] = {"shots": 4}

    def __init__(self, shots: int = 16, use_prefix_cache: bool = True) -> None:
        if shots < 1:
            raise ConfigError(f"many_shot needs shots >= 1, got {shots}")
        self.shots = shots
        self.use_prefix_cache = use_prefix_cache

    def select_demos(self, ctx: AttackContext, probes: Sequence[Probe]) -> list[Probe]:
        """Retain demonstrations that leak no probe's answer, entity or item, in a seed-fixed order."""
        ids = {p.item_id for p in probes}
        entities = {p.entity for p in probes if p.entity}
        answers = [a for p in probes for a in p.accepted]
        pool = [
            d
            for d in ctx.demonstrations
            if d.item_id not in ids
            and (d.entity is None or d.entity not in entities)
            and not answer_matches(demo_answer(d) + " " + d.question, answers)
        ]
        if not pool:
            raise ConfigError("many_shot needs retain demonstrations that do not leak the probes' answers")
        random.Random(ctx.derive_seed(self.name, "order")).shuffle(pool)
        return pool[: self.shots]

    def fit(self, ctx: AttackContext, demos: list[Probe], probes: Sequence[Probe]) -> list[Probe]:
        """Drop demonstrations from the end until the longest prompt plus the answer fits the context."""
        longest = max(probes, key=lambda p: len(p.rendered_question()))
        limit = ctx.max_context() - ctx.max_new_tokens
        k = len(demos)
        while (
            k > 0
            and len(render_many_shot(ctx.tokenizer, ctx.fmt, demos[:k], longest.rendered_question())) > limit
        ):
            k -= 1
        if k == 0:
            raise ConfigError(f"many_shot: not one demonstration fits the context limit {ctx.max_context()}")
        return demos[:k]

    def generation_inputs(
        self, ctx: AttackContext, probes: Sequence[Probe]
    ) -> list[tuple[GenerationInput, ...]]:
        """The same fitted demonstrations before every probe (the prompts share their long prefix)."""
        demos = self.fit(ctx, self.select_demos(ctx, probes), probes)
        prompts = [render_many_shot(ctx.tokenizer, ctx.fmt, demos, p.rendered_question()) for p in probes]
        plen = shared_prefix_len(prompts) if self.use_prefix_cache else 0
        extra = {"shots": len(demos), "demo_ids": [d.item_id for d in demos], "shared_prefix_tokens": plen}
        return [(GenerationInput(tuple(ids), extra={**extra, "prompt_tokens": len(ids)}),) for ids in prompts]

    def greedy_texts(
        self, ctx: AttackContext, inputs: Sequence[Sequence[GenerationInput]]
    ) -> list[list[str]]:
        """Greedy generations, the shared prefix's key/value cache computed once (or none, if disabled)."""
        prompts = [list(tries[0].prompt_ids) for tries in inputs]
        if any(len(tries) != 1 for tries in inputs):
            raise RuntimeError("many_shot has one try per probe")
        eos = eos_ids(ctx.model, ctx.tokenizer.eos_token_id)
        plen = shared_prefix_len(prompts) if self.use_prefix_cache and prompts else 0
        cache = pristine = None
        if plen:
            with torch.no_grad():
                _, pristine = forward_cached(ctx.model, torch.tensor([prompts[0][:plen]], device=ctx.device))
            cache = copy.deepcopy(pristine)
        texts: list[list[str]] = []
        for ids in prompts:
            new = greedy_from(ctx.model, ids[plen:], cache, ctx.max_new_tokens, eos)
            if cache is not None:
                cache = _rewind(cache, plen, pristine)  # back to the shared prefix for the next probe
            texts.append([ctx.tokenizer.decode(new, skip_special_tokens=True)])
        return texts
