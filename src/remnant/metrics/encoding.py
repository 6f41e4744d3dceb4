"""Question/answer pairs as token ids, in OpenUnlearning's format or remnant's (docs/metrics.md, "The prompt format";
§6.1), behind one interface (:func:`encode_qa` → :class:`EncodedQA`).

``openunlearning`` (:class:`OpenUnlearningPrompt`, ``remnant eval``'s default) follows their
``preprocess_chat_instance``, quirks included, so the numbers match theirs: the labelled tokens are everything past
the prompt's length (with a chat template the answer *and* the end-of-turn tokens; without one the raw tags and the
answer are tokenised *jointly*, so a token may straddle the boundary), and EOS is appended when the sequence does
not already end with it. ``remnant`` (:class:`RemnantPrompt`) is remnant's own format
(:mod:`remnant.models.prompts`, used by training and the assessment): numbers under it are not comparable to
OpenUnlearning's logs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from remnant.errors import ModelError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

#: OpenUnlearning's system prompt for every chat-template model config.
OPENUNLEARNING_SYSTEM_PROMPT = "You are a helpful assistant."


@dataclass(frozen=True)
class OpenUnlearningPrompt:
    """OpenUnlearning's ``template_args`` (configs/model/*.yaml); defaults are their chat and raw-tag values."""

    apply_chat_template: bool = True
    system_prompt: str | None = OPENUNLEARNING_SYSTEM_PROMPT
    #: Llama-3.x configs pin ``10 Apr 2025`` so the template's "Today Date" line is reproducible.
    date_string: str | None = None
    user_start_tag: str = "Question: "
    user_end_tag: str = "\n"
    asst_start_tag: str = "Answer: "
    #: Closes in-context examples only (the scored answer is followed by EOS, not by this tag).
    asst_end_tag: str = "\n\n"
    #: Raw-tag path only: text put before the first question (their Llama configs carry one, unused with chat).
    system_prompt_with_special_tokens: str | None = None
    #: Raw-tag path only: tokenizer truncation length.
    max_length: int = 512
    name: Literal["openunlearning"] = "openunlearning"

    @classmethod
    def for_tokenizer(
        cls, tokenizer: PreTrainedTokenizerBase, *, date_string: str | None = None
    ) -> OpenUnlearningPrompt:
        """Their chat setting when the tokenizer has a chat template, their raw tags otherwise (base models)."""
        if getattr(tokenizer, "chat_template", None):
            return cls(apply_chat_template=True, date_string=date_string)
        return cls(apply_chat_template=False, system_prompt=None)


@dataclass(frozen=True)
class RemnantPrompt:
    """remnant's own format (:mod:`remnant.models.prompts`): chat when there is a template, raw otherwise."""

    system_prompt: str | None = None
    name: Literal["remnant"] = "remnant"


PromptSetting = OpenUnlearningPrompt | RemnantPrompt


@dataclass(frozen=True)
class EncodedQA:
    """One scored pair: ``full_ids`` (prompt + labelled tokens) and ``prompt_ids`` (what generation starts from); the
    labelled tokens start at the prompt's token count, clamped to the sequence (a prompt that fills the truncated
    sequence leaves only the appended EOS labelled)."""

    full_ids: tuple[int, ...]
    prompt_ids: tuple[int, ...]

    @property
    def label_start(self) -> int:
        return min(len(self.prompt_ids), len(self.full_ids))


def _chat_ids(
    tokenizer: PreTrainedTokenizerBase, setting: OpenUnlearningPrompt, qs: Sequence[str], ans: Sequence[str]
) -> EncodedQA:
    from remnant.models.prompts import apply_template  # torch: imported only where a template is rendered

    chat: list[dict[str, str]] = []
    if setting.system_prompt:
        chat.append({"role": "system", "content": setting.system_prompt})
    for q, a in zip(qs, ans, strict=True):
        chat += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
    # apply_chat_template(tokenize=True) tokenises the rendered text without adding special tokens.
    full_text = apply_template(tokenizer, chat, generation_prompt=False, date_string=setting.date_string)
    prompt_text = apply_template(
        tokenizer, chat[:-1], generation_prompt=True, date_string=setting.date_string
    )
    full = list(tokenizer(full_text, add_special_tokens=False)["input_ids"])
    prompt = list(tokenizer(prompt_text, add_special_tokens=False)["input_ids"])
    return EncodedQA(full_ids=tuple(full), prompt_ids=tuple(prompt))


def _raw_ids(
    tokenizer: PreTrainedTokenizerBase, setting: OpenUnlearningPrompt, qs: Sequence[str], ans: Sequence[str]
) -> EncodedQA:
    s = setting
    prompt_text = s.system_prompt_with_special_tokens or ""
    for q, a in zip(qs[:-1], ans[:-1], strict=True):
        prompt_text += s.user_start_tag + q + s.user_end_tag + s.asst_start_tag + a + s.asst_end_tag
    prompt_text += s.user_start_tag + qs[-1] + s.user_end_tag + s.asst_start_tag

    def ids(text: str) -> list[int]:
        return list(
            tokenizer(text, add_special_tokens=True, max_length=s.max_length, truncation=True)["input_ids"]
        )

    return EncodedQA(full_ids=tuple(ids(prompt_text + ans[-1])), prompt_ids=tuple(ids(prompt_text)))


def encode_openunlearning(
    tokenizer: PreTrainedTokenizerBase,
    setting: OpenUnlearningPrompt,
    questions: Sequence[str],
    answers: Sequence[str],
) -> EncodedQA:
    """Their ``preprocess_chat_instance``: all pairs but the last are in-context examples (MUSE knowmem)."""
    if not questions or len(questions) != len(answers):
        raise ValueError("questions and answers must be non-empty and of one length")
    encoded = (_chat_ids if setting.apply_chat_template else _raw_ids)(tokenizer, setting, questions, answers)
    full = encoded.full_ids
    eos = getattr(tokenizer, "eos_token_id", None)
    if not isinstance(eos, int):
        raise ModelError(
            "the tokenizer has no EOS token; OpenUnlearning's format appends one to every answer"
        )
    if not full or full[-1] != eos:
        full = (*full, eos)
    return EncodedQA(full_ids=full, prompt_ids=encoded.prompt_ids)


def encode_remnant(
    tokenizer: PreTrainedTokenizerBase, setting: RemnantPrompt, question: str, answer: str
) -> EncodedQA:
    """remnant's :func:`remnant.models.prompts.encode_pair` (separate tokenisation, one end-of-turn)."""
    from remnant.models.prompts import PromptFormat, encode_pair

    fmt = PromptFormat.for_tokenizer(tokenizer, system_prompt=setting.system_prompt)
    pair = encode_pair(tokenizer, question, answer, fmt)
    return EncodedQA(full_ids=tuple(pair.input_ids), prompt_ids=tuple(pair.input_ids[: pair.prompt_len]))


def encode_qa(
    tokenizer: PreTrainedTokenizerBase, setting: PromptSetting, question: str, answer: str
) -> EncodedQA:
    """One question/answer pair under ``setting``."""
    if isinstance(setting, OpenUnlearningPrompt):
        return encode_openunlearning(tokenizer, setting, [question], [answer])
    return encode_remnant(tokenizer, setting, question, answer)


def encode_completion(
    tokenizer: PreTrainedTokenizerBase,
    prefix: str,
    text: str,
    *,
    max_length: int = 2048,
    insert_space: bool = False,
) -> EncodedQA:
    """Their ``preprocess_pretraining_instance`` (MUSE verbmem and MIA): prefix and text tokenised jointly with
    special tokens, the text cut to ``max_length`` tokens past the prefix, no EOS appended, and at least the first
    token unlabelled (so an empty prefix still leaves position 0 without a label)."""
    full = list(
        tokenizer(prefix + (" " if insert_space else "") + text, add_special_tokens=True)["input_ids"]
    )
    prompt = list(tokenizer(prefix, add_special_tokens=True)["input_ids"])
    full = full[: len(prompt) + max_length]
    if not prompt:
        # Their labels start at max(len(prefix ids), 1); a one-token prompt stand-in keeps label_start there.
        return EncodedQA(full_ids=tuple(full), prompt_ids=tuple(full[:1]))
    return EncodedQA(full_ids=tuple(full), prompt_ids=tuple(prompt))


__all__ = [
    "OPENUNLEARNING_SYSTEM_PROMPT",
    "EncodedQA",
    "OpenUnlearningPrompt",
    "PromptSetting",
    "RemnantPrompt",
    "encode_completion",
    "encode_openunlearning",
    "encode_qa",
    "encode_remnant",
]
