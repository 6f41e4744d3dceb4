"""In-context demonstrations before the question: seed 003's "I" (``icl``) and the retain variant (``icl_retain``).

Seed 003 §4.4: ICL "provides multiple Q&A pairs related to the unlearning target as an input prefix, thereby
assisting the LLM in recalling relevant target knowledge". So ``icl`` draws its ``shots`` demonstrations from
question/answer items *about the target* (:func:`demonstration_pool`; the seed's are about the forgotten subject
itself, and are the audit set's other Q&A pairs).

A demonstration that contains the probe's answer is never used (leakage check, docs/latent.md): it would
hand the model what it is meant to recover, so what ICL recovers is the probed fact from *other* facts about the
same target. Demonstrations are earlier chat turns (``style="turns"``) or one ``Question:/Answer:`` block.

``icl_retain`` draws demonstrations from the retain items (other entities, never the target), which teach the
answer format only: it measures a different thing.

The draw is seeded from the run seed, the key :data:`ICL_DRAW_KEY` and the item id, so every state sees the same
demonstrations in the same order (C-Q4), and ``icl``, ``mask_icl`` and ``mask_icl_aoa`` show an item the same
demonstrations: their columns in seed 003's table differ only by the masking and the AOA wrapper. Shots are
dropped from the end until the prompt and the generation fit the context limit; the number used is recorded.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from remnant.attacks.base import Attack, AttackContext, GenerationInput
from remnant.attacks.dialogue import demo_answer, eligible_demonstrations, pick_demonstrations
from remnant.errors import ConfigError
from remnant.models.prompts import PromptFormat, render_prompt_ids
from remnant.registry import register
from remnant.score.probe import Probe

DemoSource = Literal["target", "retain"]
Style = Literal["turns", "block"]
#: The seed key of the demonstration draw shared by the target-ICL attacks (I, M+I, M+I+A).
ICL_DRAW_KEY = "icl"


def demonstration_pool(
    ctx: AttackContext, probes: Sequence[Probe], probe: Probe, source: DemoSource, *, same_entity: bool = True
) -> tuple[list[Probe], str]:
    """The items ``probe``'s demonstrations are drawn from, and which pool that is (recorded per item).

    ``"retain"``: the context's retain demonstrations. ``"target"``: the context's target demonstrations
    (unscored items about the target, e.g. the removal split's), or the run's probes when it has none, less the
    probe itself and every item that leaks its answer; narrowed to the probe's entity where any such item is left
    (``same_entity``).
    """
    if source == "retain":
        return list(ctx.demonstrations), "retain"
    if ctx.target_demonstrations:
        pool, origin = list(ctx.target_demonstrations), "target_demonstrations"
    else:
        pool, origin = list(probes), "probes"
    pool = eligible_demonstrations(pool, probe)
    if same_entity and probe.entity:
        own = [d for d in pool if d.entity == probe.entity]
        if own:
            return own, f"{origin}:same_entity"
    return pool, origin


def demonstration_prompts(
    ctx: AttackContext,
    probes: Sequence[Probe],
    questions: Sequence[str],
    *,
    shots: int,
    style: Style,
    source: DemoSource,
    key: str,
    same_entity: bool = True,
    fmt: PromptFormat | None = None,
    prefill: str | None = None,
) -> tuple[list[list[int]], list[dict[str, object]]]:
    """Prompt ids with up to ``shots`` seeded, leak-free demonstrations before each of ``questions``.

    ``fmt`` overrides the context's prompt format (AOA's system prompt); ``prefill`` opens the answer.
    """
    if shots > 0 and source == "retain" and not ctx.demonstrations:
        raise ConfigError(f"{key}: needs demonstrations (retain items) in the attack context")
    fmt = fmt or ctx.fmt
    budget = ctx.max_context() - ctx.max_new_tokens
    prompts: list[list[int]] = []
    extras: list[dict[str, object]] = []
    for probe, question in zip(probes, questions, strict=True):
        pool, origin = demonstration_pool(ctx, probes, probe, source, same_entity=same_entity)
        rng = random.Random(ctx.derive_seed(key, probe.item_id))
        demos = pick_demonstrations(pool, probe, shots, rng)
        pairs = [(d.rendered_question(), demo_answer(d)) for d in demos]

        def render(pairs: list[tuple[str, str]], question: str = question) -> list[int]:
            return render_prompt_ids(ctx.tokenizer, question, fmt, prefill, shots=pairs, style=style)

        ids = render(pairs)
        while len(ids) > budget and pairs:
            pairs.pop()
            ids = render(pairs)
        prompts.append(ids)
        extras.append(
            {
                "shots": len(pairs),
                "demonstrations": [d.item_id for d in demos[: len(pairs)]],
                "demonstration_pool": origin,
            }
        )
    return prompts, extras


def check_style(name: str, style: str) -> None:
    if style not in ("turns", "block"):
        raise ConfigError(f"{name}: style must be 'turns' or 'block', not {style!r}")


@register("attack", "icl", "2")
class ICL(Attack):
    """k demonstrations about the target (never containing the probe's answer), then the target question."""

    name = "icl"
    version = "2"
    surface = "inference_time"
    paper = "seed 003 §4.4 (ICL: Q&A pairs related to the unlearning target as an input prefix)"
    formats = ("free_text", "multiple_choice")
    provenance = "N"
    smoke_params: ClassVar[dict[str, Any]] = {"shots": 2}
    source: ClassVar[DemoSource] = "target"

    def __init__(self, shots: int = 5, style: Style = "turns", same_entity: bool = True) -> None:
        if shots < 1:
            raise ConfigError(f"{self.name}: shots must be ≥ 1")
        check_style(self.name, style)
        self.shots, self.style, self.same_entity = shots, style, same_entity

    def generation_inputs(
        self, ctx: AttackContext, probes: Sequence[Probe]
    ) -> list[tuple[GenerationInput, ...]]:
        prompts, extras = demonstration_prompts(
            ctx,
            probes,
            [p.rendered_question() for p in probes],
            shots=self.shots,
            style=self.style,
            source=self.source,
            key=ICL_DRAW_KEY if self.source == "target" else self.name,
            same_entity=self.same_entity,
        )
        return [(GenerationInput(tuple(ids), extra=e),) for ids, e in zip(prompts, extras, strict=True)]


@register("attack", "icl_retain", "1")
class ICLRetain(ICL):
    """k retain-item demonstrations (other entities, never the target), then the target question."""

    name = "icl_retain"
    version = "1"
    paper = (
        "docs/latent.md reconstruction (retain demonstrations); seed 003's ICL uses target demonstrations "
        "(attack icl)"
    )
    provenance = "R"
    source: ClassVar[DemoSource] = "retain"

    def __init__(self, shots: int = 5, style: Style = "turns") -> None:
        super().__init__(shots, style, same_entity=False)


__all__ = ["ICL", "ICL_DRAW_KEY", "DemoSource", "ICLRetain", "demonstration_pool", "demonstration_prompts"]
