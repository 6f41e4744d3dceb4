"""Prompt pieces the prompting attacks share: demonstrations and answer-free targets.

Leakage check (docs/latent.md): no demonstration and no optimisation target may contain the probe's answer;
otherwise an attack would hand the model what it is supposed to recover.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

from remnant.errors import ConfigError
from remnant.models.prompts import PromptFormat, continuation
from remnant.packs.templates import answer_stem
from remnant.score.normalise import answer_matches
from remnant.score.probe import Probe

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


def demo_answer(demo: Probe) -> str:
    """What a demonstration's assistant turn says: the answer, or the letter and option for multiple choice."""
    if demo.options and demo.answer_index is not None:
        return f"{demo.answer_letter}. {demo.options[demo.answer_index]}"
    return demo.answer


def leaks(text: str, probe: Probe) -> bool:
    """True when ``text`` contains one of the probe's accepted answers (or its true option's text)."""
    accepted = list(probe.accepted)
    if probe.options and probe.answer_index is not None:
        accepted.append(probe.options[probe.answer_index])
    return answer_matches(text, accepted)


def eligible_demonstrations(demos: Sequence[Probe], probe: Probe) -> list[Probe]:
    """The ``demos`` that may be shown with ``probe``, in order: not the probe itself, and not leaking its answer
    (in the question or the demonstration's answer)."""
    return [
        d
        for d in demos
        if d.item_id != probe.item_id and not leaks(f"{d.rendered_question()} {demo_answer(d)}", probe)
    ]


def pick_demonstrations(demos: Sequence[Probe], probe: Probe, k: int, rng: random.Random) -> list[Probe]:
    """``k`` demonstrations for ``probe``, drawn by ``rng`` from its :func:`eligible_demonstrations`."""
    pool = eligible_demonstrations(demos, probe)
    return rng.sample(pool, min(k, len(pool)))


def answer_free_target(probe: Probe, mode: str, fixed: str) -> tuple[str, str]:
    """The optimisation target for GCG / soft prompts and where it came from (``"stem"`` or ``"fixed"``).

    ``mode="stem"`` uses the pack's answer stem ("Zorvak Telumi is from") where the probe has one, else ``fixed``.
    A target that contains the answer is refused: optimising towards the answer proves nothing (§4.7).
    """
    if mode not in ("stem", "fixed"):
        raise ConfigError(f"target must be 'stem' or 'fixed', not {mode!r}")
    stem = answer_stem(probe) if mode == "stem" else None
    text, source = (stem, "stem") if stem else (fixed, "fixed")
    if leaks(text, probe):
        raise ConfigError(
            f"item {probe.item_id}: the {source} target {text!r} contains the answer (leakage check, §4.1)"
        )
    return text, source


def target_ids(tokenizer: PreTrainedTokenizerBase, fmt: PromptFormat, text: str) -> list[int]:
    """Target token ids as they follow the prompt: raw answers start with a space (as ``encode_pair``)."""
    return [int(t) for t in tokenizer(continuation(fmt, text), add_special_tokens=False)["input_ids"]]
