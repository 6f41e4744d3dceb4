"""Seed 003's MASK auditor: the target's keyword masked in the question — ``mask`` (M), ``mask_icl`` (M,I) and
``mask_icl_aoa`` (M,I,A).

Seed 003 §4.4: "MASK replaces keywords related to the unlearning target (e.g., Harry Potter) with a special
token, e.g., [MASK]. Note that MASK is applied [in] conjunction with ICL, as it may introduce ambiguity into the
query." The query loses the keyword an unlearned model may have been trained to react to; the ICL prefix (Q&A
pairs about the target, :mod:`remnant.attacks.icl`) says what the mask stands for. Its tables report M,I and
M,I,A (AOA's identity shift on top, :mod:`remnant.attacks.aoa`), never M alone; ``mask`` is the operator by itself.

The keyword is the probe's entity name (a Class D canary's name, a TOFU author): every whole-word occurrence in
the question, any case, becomes ``mask_token`` ("Name the town Zorvak Telumi comes from." → "Name the town
[MASK] comes from."). A probe whose question does not name its entity is asked unmasked, and ``masked_spans``
= 0 records it. Only the question is masked: the demonstrations are ``icl``'s, drawn with the same seed key
(:data:`~remnant.attacks.icl.ICL_DRAW_KEY`). M,I,A wraps the masked question as :mod:`remnant.attacks.aoa` does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar

from remnant.attacks.aoa import AOA_OPENER, AOA_SYSTEM, AOA_USER
from remnant.attacks.base import Attack, AttackContext, GenerationInput
from remnant.attacks.icl import ICL_DRAW_KEY, Style, check_style, demonstration_prompts
from remnant.errors import ConfigError
from remnant.models.prompts import PromptFormat, render_prompt_ids
from remnant.registry import register
from remnant.score.probe import Probe

MASK_TOKEN = "[MASK]"


def mask_keywords(text: str, keywords: Sequence[str], token: str = MASK_TOKEN) -> tuple[str, int]:
    """``text`` with every whole-word, case-insensitive occurrence of each keyword replaced by ``token``, and
    the number of spans replaced. Longer keywords go first, so a full name wins over a part of it."""
    count = 0
    for word in sorted({k for k in keywords if k.strip()}, key=len, reverse=True):
        pattern = re.compile(rf"(?<!\w){re.escape(word)}(?!\w)", re.IGNORECASE)
        text, n = pattern.subn(token, text)
        count += n
    return text, count


def mask_question(probe: Probe, token: str = MASK_TOKEN) -> tuple[Probe, int]:
    """``probe`` with its entity's name masked in the question (options untouched), and the spans masked."""
    question, n = mask_keywords(probe.question, [probe.entity] if probe.entity else [], token)
    return replace(probe, question=question), n


class _MaskedQuestion(Attack):
    """The masked question, with target demonstrations before it (``with_icl``) and AOA around it (``with_aoa``)."""

    surface = "inference_time"
    formats = ("free_text", "multiple_choice")
    provenance = "N"
    with_icl: ClassVar[bool] = False
    with_aoa: ClassVar[bool] = False

    def _setup(
        self,
        mask_token: str,
        shots: int = 0,
        style: Style = "turns",
        same_entity: bool = True,
        identity: str = "ChatGPT",
        opener: bool = False,
    ) -> None:
        if not mask_token.strip():
            raise ConfigError(f"{self.name}: mask_token must be a visible token such as '[MASK]'")
        if self.with_icl and shots < 1:
            raise ConfigError(f"{self.name}: shots must be ≥ 1 (MASK is applied with ICL)")
        check_style(self.name, style)
        self.mask_token, self.shots, self.style = mask_token, shots, style
        self.same_entity, self.identity, self.opener = same_entity, identity, opener

    def generation_inputs(
        self, ctx: AttackContext, probes: Sequence[Probe]
    ) -> list[tuple[GenerationInput, ...]]:
        masked = [mask_question(p, self.mask_token) for p in probes]
        questions = [m.rendered_question() for m, _ in masked]
        fmt, prefill = ctx.fmt, None
        if self.with_aoa:
            fmt = PromptFormat(style=ctx.fmt.style, system_prompt=AOA_SYSTEM.format(identity=self.identity))
            questions = [AOA_USER.format(question=q) for q in questions]
            prefill = AOA_OPENER if self.opener else None
        if self.with_icl:
            prompts, extras = demonstration_prompts(
                ctx,
                probes,
                questions,
                shots=self.shots,
                style=self.style,
                source="target",
                key=ICL_DRAW_KEY,
                same_entity=self.same_entity,
                fmt=fmt,
                prefill=prefill,
            )
        else:
            prompts = [render_prompt_ids(ctx.tokenizer, q, fmt, prefill) for q in questions]
            extras = [{} for _ in probes]
        out: list[tuple[GenerationInput, ...]] = []
        for ids, extra, question, (_m, n) in zip(prompts, extras, questions, masked, strict=True):
            extra.update({"masked_question": question, "masked_spans": n})
            out.append((GenerationInput(tuple(ids), extra=extra),))
        return out


@register("attack", "mask", "2")
class Mask(_MaskedQuestion):
    """M: the target's name masked in the question (the seed applies it only with ICL: ``mask_icl``)."""

    name = "mask"
    version = "2"
    paper = "seed 003 §4.4 (MASK: keywords of the unlearning target replaced by [MASK]); operator alone"

    def __init__(self, mask_token: str = MASK_TOKEN) -> None:
        self._setup(mask_token)


@register("attack", "mask_icl", "1")
class MaskICL(_MaskedQuestion):
    """M,I: demonstrations about the target, then the question with the target's name masked."""

    name = "mask_icl"
    version = "1"
    paper = "seed 003 §4.4–4.5 (M,I: MASK applied with ICL)"
    smoke_params: ClassVar[dict[str, Any]] = {"shots": 2}
    with_icl = True

    def __init__(
        self, shots: int = 5, style: Style = "turns", same_entity: bool = True, mask_token: str = MASK_TOKEN
    ) -> None:
        self._setup(mask_token, shots, style, same_entity)


@register("attack", "mask_icl_aoa", "1")
class MaskICLAOA(_MaskedQuestion):
    """M,I,A: the AOA system prompt, target demonstrations, then "AOA, execute my instruction: {masked}"."""

    name = "mask_icl_aoa"
    version = "1"
    paper = "seed 003 §4.4–4.5 (M,I,A: MASK with ICL and AOA); AOA template Qi et al. 2023"
    smoke_params: ClassVar[dict[str, Any]] = {"shots": 2}
    with_icl = True
    with_aoa = True

    def __init__(
        self,
        shots: int = 5,
        style: Style = "turns",
        same_entity: bool = True,
        mask_token: str = MASK_TOKEN,
        identity: str = "ChatGPT",
        opener: bool = False,
    ) -> None:
        self._setup(mask_token, shots, style, same_entity, identity, opener)


__all__ = ["MASK_TOKEN", "Mask", "MaskICL", "MaskICLAOA", "mask_keywords", "mask_question"]
