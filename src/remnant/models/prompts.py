"""One place that renders a question for a model (docs/latent.md, §1.7).

Prompt and answer are tokenised separately and joined as ids, so the boundary never re-tokenises; the answer
ends with EOS / end-of-turn so training teaches it to stop. A prefill sits inside the assistant turn with no
end-of-turn appended (prefill attack, C-Q1).
"""

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


@dataclass(frozen=True)
class EncodedPair:
    """A prompt+answer pair as ids; labels are -100 on the prompt (answer-only loss)."""

    input_ids: list[int]
    labels: list[int]
    prompt_len: int
    answer_ids: list[int]


def _ids(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


#: The conversation a chat template is rendered on once at load time: what every template must handle.
TEMPLATE_CHECK_MESSAGES = ({"role": "user", "content": "Hello"},)


def _apply_template(tokenizer: Any, messages: list[dict[str, str]], where: object = None) -> str:
    """The chat template rendered on ``messages``; a template that fails (e.g. trips the Jinja sandbox) is a
    model that cannot be used, refused as a ModelError (R2) naming ``where`` rather than a traceback."""
    from jinja2.exceptions import TemplateError

    where = where or getattr(tokenizer, "name_or_path", "") or "the tokenizer"
    try:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
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
    _apply_template(tokenizer, [dict(m) for m in TEMPLATE_CHECK_MESSAGES], folder)


def render_prompt_ids(
    tokenizer: Any, question: str, fmt: PromptFormat, prefill: str | None = None
) -> list[int]:
    """Token ids of the rendered prompt, ending where the model's answer starts (after any prefill)."""
    if fmt.style == "raw":
        text = f"Question: {question}\nAnswer:"
        if fmt.system_prompt:
            text = f"{fmt.system_prompt}\n\n{text}"
        ids = list(tokenizer(text, add_special_tokens=True)["input_ids"])
        if prefill:
            ids += _ids(tokenizer, prefill if prefill[0].isspace() else " " + prefill)
        return ids
    if not getattr(tokenizer, "chat_template", None):
        raise ModelError("prompt style 'chat' needs a tokenizer with a chat template")
    messages = []
    if fmt.system_prompt is not None:
        messages.append({"role": "system", "content": fmt.system_prompt})
    messages.append({"role": "user", "content": question})
    text = _apply_template(tokenizer, messages)
    ids = _ids(tokenizer, text)
    if prefill:
        ids += _ids(tokenizer, prefill)
    return ids


def _end_ids(tokenizer: Any, fmt: PromptFormat) -> list[int]:
    if fmt.style == "chat":
        for tok in ("<|im_end|>", "<end_of_turn>", "<|eot_id|>", "<|end|>"):
            tid = tokenizer.convert_tokens_to_ids(tok)
            if isinstance(tid, int) and tid != tokenizer.unk_token_id and tok in tokenizer.get_vocab():
                return [tid]
    if tokenizer.eos_token_id is None:
        raise ModelError("tokenizer has no EOS token, so answers cannot be taught to stop")
    return [int(tokenizer.eos_token_id)]


def encode_pair(
    tokenizer: Any, question: str, answer: str, fmt: PromptFormat, prefill: str | None = None
) -> EncodedPair:
    """Prompt ids + separately tokenised answer ids (+ end-of-turn), labels masked on the prompt."""
    prompt = render_prompt_ids(tokenizer, question, fmt, prefill)
    if fmt.style == "raw" and not prefill and not answer[:1].isspace():
        answer = " " + answer
    answer_ids = _ids(tokenizer, answer) + _end_ids(tokenizer, fmt)
    return EncodedPair(
        input_ids=prompt + answer_ids,
        labels=[-100] * len(prompt) + answer_ids,
        prompt_len=len(prompt),
        answer_ids=answer_ids,
    )


def collate(pairs: Sequence[EncodedPair], pad_id: int, side: str = "left") -> dict[str, torch.Tensor]:
    """Pad a batch to one length (left for generation, right for teacher forcing)."""
    if side not in ("left", "right"):
        raise ModelError(f"padding side must be 'left' or 'right', not {side!r}")
    width = max(len(p.input_ids) for p in pairs)
    columns: dict[str, list[list[int]]] = {"input_ids": [], "attention_mask": [], "labels": []}
    for p in pairs:
        pad = width - len(p.input_ids)
        ids = {"input_ids": (p.input_ids, pad_id), "attention_mask": ([1] * len(p.input_ids), 0)}
        for name, (row, fill) in {**ids, "labels": (p.labels, -100)}.items():
            columns[name].append([fill] * pad + row if side == "left" else row + [fill] * pad)
    return {name: torch.tensor(rows, dtype=torch.long) for name, rows in columns.items()}
