"""Prompt pieces the prompting attacks share: demonstrations, multi-turn rendering, answer-free targets.

Leakage check (docs/latent.md): no demonstration and no optimisation target may contain the probe's answer;
otherwise an attack would hand the model what it is supposed to recover.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from remnant.errors import ConfigError, ModelError
from remnant.models.prompts import PromptFormat
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


def pick_demonstrations(demos: Sequence[Probe], probe: Probe, k: int, rng: random.Random) -> list[Probe]:
    """``k`` demonstrations for ``probe``, drawn by ``rng`` from those that are not the probe and do not leak."""
    pool = [
        d
        for d in demos
        if d.item_id != probe.item_id and not leaks(f"{d.rendered_question()} {demo_answer(d)}", probe)
    ]
    return rng.sample(pool, min(k, len(pool)))


def _ids(tokenizer: PreTrainedTokenizerBase, text: str, *, special: bool) -> list[int]:
    return [int(t) for t in tokenizer(text, add_special_tokens=special)["input_ids"]]


def render_text(
    tokenizer: Any,
    fmt: PromptFormat,
    shots: Sequence[tuple[str, str]],
    question: str,
    style: Literal["turns", "block"] = "turns",
) -> str:
    """The text of :func:`render_dialogue_ids`'s prompt, before tokenisation (raw: with special tokens; chat:
    without, the template writes them) and without the prefill (:func:`prefill_ids`)."""
    if fmt.style == "raw" or style == "block":
        block = "".join(f"Question: {q}\nAnswer: {a}\n\n" for q, a in shots)
        if fmt.style == "raw":
            text = f"{block}Question: {question}\nAnswer:"
            return f"{fmt.system_prompt}\n\n{text}" if fmt.system_prompt else text
        # chat + block: every demonstration inside the one user message, no earlier turns
        question = f"{block}Question: {question}\nAnswer:" if block else question
        shots = []
    if not getattr(tokenizer, "chat_template", None):
        raise ModelError("prompt style 'chat' needs a tokenizer with a chat template")
    messages: list[dict[str, str]] = []
    if fmt.system_prompt is not None:
        messages.append({"role": "system", "content": fmt.system_prompt})
    for q, a in shots:
        messages += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
    messages.append({"role": "user", "content": question})
    rendered: str = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return rendered


def prefill_ids(tokenizer: PreTrainedTokenizerBase, fmt: PromptFormat, prefill: str | None) -> list[int]:
    """The ids of ``prefill`` text opening the answer, placed as ``render_prompt_ids`` places it (inside the
    assistant turn, no end-of-turn; after a space in the raw format)."""
    if not prefill:
        return []
    raw_space = fmt.style == "raw" and not prefill[0].isspace()
    return _ids(tokenizer, " " + prefill if raw_space else prefill, special=False)


def render_dialogue_ids(
    tokenizer: Any,
    fmt: PromptFormat,
    shots: Sequence[tuple[str, str]],
    question: str,
    *,
    style: Literal["turns", "block"] = "turns",
    prefill: str | None = None,
) -> list[int]:
    """Prompt ids with ``shots`` (question, answer) before ``question``: as earlier chat turns, or one block.

    The raw format always writes ``Question: …\\nAnswer: …`` blocks (it has no turns). ``prefill`` text opens
    the answer (:func:`prefill_ids`).
    """
    text = render_text(tokenizer, fmt, shots, question, style)
    return _ids(tokenizer, text, special=fmt.style == "raw") + prefill_ids(tokenizer, fmt, prefill)


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
    if fmt.style == "raw" and not text[:1].isspace():
        text = " " + text
    return _ids(tokenizer, text, special=False)
