"""The ``icl`` attack: in-context demonstrations before the question (seed 003's "I"; algorithms.md §4.3 [R]).

``shots`` question/answer pairs from the context's demonstrations (retain items: other entities, never the
target) precede the probe, as earlier chat turns or as one block. Demonstrations that contain the probe's
answer are dropped (leakage check, §4.1). The draw is seeded from the run seed and the item id, so every state
sees the same demonstrations in the same order (C-Q4). Shots are dropped from the end until the prompt and the
generation fit the context limit; the number used is recorded.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from remnant.attacks.base import Attack, AttackContext, ItemOutcome
from remnant.attacks.dialogue import demo_answer, pick_demonstrations, render_dialogue_ids
from remnant.errors import ConfigError
from remnant.registry import register
from remnant.score.probe import Probe


def demonstration_prompts(
    ctx: AttackContext,
    probes: Sequence[Probe],
    questions: Sequence[str],
    *,
    shots: int,
    style: Literal["turns", "block"],
    key: str,
) -> tuple[list[list[int]], list[dict[str, Any]]]:
    """Prompt ids with up to ``shots`` seeded, leak-free demonstrations before each of ``questions``."""
    if shots > 0 and not ctx.demonstrations:
        raise ConfigError(f"{key}: needs demonstrations (retain items) in the attack context")
    budget = ctx.max_context() - ctx.max_new_tokens
    prompts: list[list[int]] = []
    extras: list[dict[str, Any]] = []
    for probe, question in zip(probes, questions, strict=True):
        rng = random.Random(ctx.derive_seed(key, probe.item_id))
        demos = pick_demonstrations(ctx.demonstrations, probe, shots, rng)
        pairs = [(d.rendered_question(), demo_answer(d)) for d in demos]
        ids = render_dialogue_ids(ctx.tokenizer, ctx.fmt, pairs, question, style=style)
        while len(ids) > budget and pairs:
            pairs.pop()
            ids = render_dialogue_ids(ctx.tokenizer, ctx.fmt, pairs, question, style=style)
        prompts.append(ids)
        extras.append({"shots": len(pairs), "demonstrations": [d.item_id for d in demos[: len(pairs)]]})
    return prompts, extras


@register("attack", "icl", "1")
class ICL(Attack):
    """k retain-item demonstrations in context, then the target question."""

    name = "icl"
    version = "1"
    surface = "inference_time"
    paper = "seed 003 (ICL auditor: Q&A pairs as an input prefix); template reconstructed, algorithms.md §4.3"
    formats = ("free_text", "multiple_choice")
    provenance = "R"
    smoke_params: ClassVar[dict[str, Any]] = {"shots": 2}

    def __init__(self, shots: int = 5, style: Literal["turns", "block"] = "turns") -> None:
        if shots < 1:
            raise ConfigError("icl: shots must be ≥ 1")
        if style not in ("turns", "block"):
            raise ConfigError(f"icl: style must be 'turns' or 'block', not {style!r}")
        self.shots, self.style = shots, style

    def run(self, ctx: AttackContext, probes: Sequence[Probe]) -> list[ItemOutcome]:
        questions = [p.rendered_question() for p in probes]
        prompts, extras = demonstration_prompts(
            ctx, probes, questions, shots=self.shots, style=self.style, key=self.name
        )
        return ctx.generate_and_score(probes, prompts, extras=extras)
