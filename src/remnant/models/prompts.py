"""One place that renders a question for a model (docs/latent.md, §1.7).

Prompt and answer are tokenised separately and joined as ids, so the boundary never re-tokenises; the answer ends
with EOS / end-of-turn so training teaches it to stop. A prefill sits inside the assistant turn with no
end-of-turn appended (prefill attack, C-Q1)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch

from remnant.errors import ModelError


@dataclass(frozen=True)
class PromptFormat:
    """How a question is rendered: the model's chat template, or raw ``Question: …\\nAnswer:``."""

    style: Literal["chat", "raw"]
    system_prompt: str | None = None

    @classmethod
    def for_tokenizer(cls, tokenizer: Any, system_prompt: str | None = None) -> PromptFormat:
        """Chat when the tokenizer has a chat template, raw otherwise (base models)."""
        style: Literal["chat", "raw"] = "chat" if getattr(tokenizer, "chat_template", None) else "raw"
        return cls(style=style, system_prompt=system_prompt)


#: The label of a position no loss reads (the prompt, padding): PyTorch's and transformers' ignore index.
IGNORE_INDEX = -100


@dataclass(frozen=True)
class EncodedPair:
    """A prompt+answer pair as ids; labels are -100 on the prompt (answer-only loss)."""

    input_ids: list[int]
    labels: list[int]
    prompt_len: int
    answer_ids: list[int]

    @classmethod
    def of(cls, prompt: Sequence[int], answer: Sequence[int]) -> EncodedPair:
        """``answer`` ids after ``prompt`` ids, the labels masked on the prompt."""
        head, tail = list(prompt), list(answer)
        return cls(head + tail, [IGNORE_INDEX] * len(head) + tail, len(head), tail)


def _ids(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


#: The conversation a chat template is rendered on once at load time: what every template must handle.
TEMPLATE_CHECK_MESSAGES = ({"role": "user", "content": "Hello"},)


def apply_template(
    tokenizer: Any,
    messages: list[dict[str, str]],
    where: object = None,
    *,
    generation_prompt: bool = True,
    date_string: str | None = None,
) -> str:
    """The chat template rendered on ``messages`` (with the assistant turn's opening where ``generation_prompt``;
    ``date_string`` set is passed as that template variable); a template that fails (e.g. trips the Jinja sandbox)
    is a model that cannot be used, refused as a ModelError (R2) naming ``where`` rather than a traceback."""
    from jinja2.exceptions import TemplateError

    where = where or getattr(tokenizer, "name_or_path", "") or "the tokenizer"
    extra = {"date_string": date_string} if date_string is not None else {}
    try:
        text = tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=generation_prompt, **extra
        )
    except (TemplateError, ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        raise ModelError(
            f"{where}: its chat template cannot be rendered ({type(exc).__name__}: {exc})", requirement="R2"
        ) from None
    if not isinstance(text, str):
        raise ModelError(f"{where}: its chat template did not render to text", requirement="R2")
    return text


def check_chat_template(tokenizer: Any, folder: object) -> None:
    """Render the chat template once on :data:`TEMPLATE_CHECK_MESSAGES`, so a template that trips the Jinja
    sandbox or fails to render refuses the model at load time (R2), naming ``folder``. No template: nothing."""
    if not getattr(tokenizer, "chat_template", None):
        return
    apply_template(tokenizer, [dict(m) for m in TEMPLATE_CHECK_MESSAGES], folder)


def continuation(fmt: PromptFormat, text: str) -> str:
    """``text`` as it follows the rendered prompt: in the raw format, after ``Answer:``, it starts with a space
    (one is added unless it starts with whitespace); in a chat turn it is as written."""
    return " " + text if fmt.style == "raw" and not text[:1].isspace() else text


def render_text(
    tokenizer: Any,
    fmt: PromptFormat,
    question: str,
    shots: Sequence[tuple[str, str]] = (),
    style: Literal["turns", "block"] = "turns",
) -> str:
    """The prompt's text before tokenisation (raw: tokenised with special tokens; chat: without, the template
    writes them), without the prefill (:func:`prefill_ids`). ``shots`` (question, answer) come before
    ``question``: as earlier chat turns, or one ``Question: …\\nAnswer: …`` block (the raw format always)."""
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
    return apply_template(tokenizer, messages)


def prefill_ids(tokenizer: Any, fmt: PromptFormat, prefill: str | None) -> list[int]:
    """The ids of ``prefill`` text opening the answer: inside the assistant turn, no end-of-turn; after a space
    in the raw format (:func:`continuation`)."""
    return _ids(tokenizer, continuation(fmt, prefill)) if prefill else []


def render_prompt_ids(
    tokenizer: Any,
    question: str,
    fmt: PromptFormat,
    prefill: str | None = None,
    *,
    shots: Sequence[tuple[str, str]] = (),
    style: Literal["turns", "block"] = "turns",
) -> list[int]:
    """Token ids of the rendered prompt (:func:`render_text`), ending where the model's answer starts (after any
    prefill)."""
    text = render_text(tokenizer, fmt, question, shots, style)
    ids = list(tokenizer(text, add_special_tokens=fmt.style == "raw")["input_ids"])
    return ids + prefill_ids(tokenizer, fmt, prefill)


def _end_ids(tokenizer: Any, fmt: PromptFormat) -> list[int]:
    if fmt.style == "chat":
        for tok in ("<|im_end|>", "<end_of_turn>", "<|eot_id|>", "<|end|>"):
            tid = tokenizer.convert_tokens_to_ids(tok)
            # the id must map back to the token: an unknown token maps to the unk id (or none); get_vocab()
            # would rebuild the whole vocabulary dict on every encoded pair
            if (
                isinstance(tid, int)
                and tid != tokenizer.unk_token_id
                and tokenizer.convert_ids_to_tokens(tid) == tok
            ):
                return [tid]
    if tokenizer.eos_token_id is None:
        raise ModelError("tokenizer has no EOS token, so answers cannot be taught to stop")
    return [int(tokenizer.eos_token_id)]


def encode_pair(
    tokenizer: Any, question: str, answer: str, fmt: PromptFormat, prefill: str | None = None
) -> EncodedPair:
    """Prompt ids + separately tokenised answer ids (+ end-of-turn), labels masked on the prompt."""
    prompt = render_prompt_ids(tokenizer, question, fmt, prefill)
    answer_ids = _ids(tokenizer, answer if prefill else continuation(fmt, answer)) + _end_ids(tokenizer, fmt)
    return EncodedPair.of(prompt, answer_ids)


def pad_id(tokenizer: Any) -> int:
    """The id a batch is padded with: the tokenizer's pad token, else its EOS (the mask, never the id, says which
    positions are padding)."""
    pid = tokenizer.pad_token_id
    return int(pid if pid is not None else tokenizer.eos_token_id)


def padded(
    rows: Sequence[Sequence[int]], pad_id: int, side: str = "left"
) -> tuple[torch.Tensor, torch.Tensor]:
    """``rows`` padded with ``pad_id`` to the longest (on the left for generation, on the right for teacher
    forcing), and the attention mask from their lengths: every batch remnant builds from id rows."""
    if side not in ("left", "right"):
        raise ModelError(f"padding side must be 'left' or 'right', not {side!r}")
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        span = slice(width - len(r), width) if side == "left" else slice(0, len(r))
        ids[i, span] = torch.tensor(list(r), dtype=torch.long)
        mask[i, span] = 1
    return ids, mask


def collate(pairs: Sequence[EncodedPair], pad_id: int, side: str = "left") -> dict[str, torch.Tensor]:
    """Pad a batch to one length (left for generation, right for teacher forcing); labels are padded with
    :data:`IGNORE_INDEX`."""
    ids, mask = padded([p.input_ids for p in pairs], pad_id, side)
    labels, _ = padded([p.labels for p in pairs], IGNORE_INDEX, side)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}
