"""The ``mask`` attack: the question rewritten as a cloze (seed 003's "M"; algorithms.md §4.3 variant (a) [R]).

The probe becomes ``Fill in the [MASK]: {sentence}``, where the sentence is the pack's own answer phrasing for
the attribute with the value masked ("Zorvak Telumi is from [MASK].", :data:`remnant.packs.templates.ANSWER_FORMS`)
or, for a free-text item with no such phrasing, the question and an answer slot ("Where …? Answer: [MASK].").
The seed applies MASK together with ICL ("M,I"): ``shots`` > 0 puts seeded retain demonstrations before it.

Defined for free-text targets only: a multiple-choice response is a letter, and a cloze of it is not the same
measurement, so a multiple-choice target gets *not applicable* with that reason (C-Q2), never a silent pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from remnant.attacks.base import Attack, AttackContext, ItemOutcome
from remnant.attacks.icl import demonstration_prompts
from remnant.errors import ConfigError
from remnant.packs.templates import ANSWER_FORMS
from remnant.registry import register
from remnant.score.probe import Probe

MASK_TOKEN = "[MASK]"
CLOZE_TEMPLATE = "Fill in the [MASK]: {sentence}"


def cloze_sentence(probe: Probe) -> tuple[str, str]:
    """The masked sentence for ``probe`` and its source: ``"answer_form"`` or ``"question"``."""
    if probe.attribute is not None and probe.entity:
        for form in ANSWER_FORMS.get(probe.attribute, ()):
            if "{name}" in form and "{value}" in form:
                return form.format(name=probe.entity, value=MASK_TOKEN), "answer_form"
    return f"{probe.question} Answer: {MASK_TOKEN}.", "question"


@register("attack", "mask", "1")
class Mask(Attack):
    """Cloze rewrite of the question with the answer masked, optionally after ICL demonstrations."""

    name = "mask"
    version = "1"
    surface = "inference_time"
    paper = "seed 003 (MASK auditor, applied with ICL); cloze template reconstructed, algorithms.md §4.3"
    formats = ("free_text",)
    provenance = "R"
    smoke_params: ClassVar[dict[str, Any]] = {"shots": 1}

    def __init__(self, shots: int = 0, style: Literal["turns", "block"] = "turns") -> None:
        if shots < 0:
            raise ConfigError("mask: shots must be ≥ 0")
        if style not in ("turns", "block"):
            raise ConfigError(f"mask: style must be 'turns' or 'block', not {style!r}")
        self.shots, self.style = shots, style

    def run(self, ctx: AttackContext, probes: Sequence[Probe]) -> list[ItemOutcome]:
        clozes = [cloze_sentence(p) for p in probes]
        questions = [CLOZE_TEMPLATE.format(sentence=s) for s, _ in clozes]
        prompts, extras = demonstration_prompts(
            ctx, probes, questions, shots=self.shots, style=self.style, key=self.name
        )
        for extra, question, (_s, source) in zip(extras, questions, clozes, strict=True):
            extra.update({"cloze": question, "cloze_source": source})
        return ctx.generate_and_score(probes, prompts, extras=extras)
