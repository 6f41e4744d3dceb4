"""Entity-span examples for patching audits: prompt, reference and positions built as UDS builds them.

docs/latent.md [V], as the reference code builds it (``compute_uds.py``): the prompt is
``"Question: {question}\\nAnswer: {prefix}"`` — always with the space after ``Answer:``, so an empty prefix gives a
prompt that ends in ``"Answer: "`` and the entity's first token carries no leading space — tokenised with special
tokens (BOS where the tokenizer adds one). The reference is the answer with the prefix stripped (when the answer
starts with it), given a leading space only when neither it nor the prompt has whitespace at the boundary, and
tokenised *separately* without special tokens; the input is ``prompt_ids + ref_ids`` (no re-tokenisation across
the boundary). The entity span inside ``ref_ids`` comes from fast-tokenizer offsets (the entity, then its stripped
form, then ``" " + entity``); it covers every token overlapping the entity's characters (a slow tokenizer: the
entity's ids, then those of ``" " + entity``, as a subsequence, the reference's fallback). An empty entity or
reference has no span. With ``start = len(prompt_ids) - 1`` the scored and patched positions are
``[start + span_start, start + span_end)``: the last token before the entity and every entity token but the last.

The ``chat`` format (our addition, recorded in every result) renders the question through the model's chat
template with the prefix as an assistant-turn prefill (``remnant.models.prompts``), for states installed in chat
form; the ``raw`` format is the reference's and the default.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from remnant.models.prompts import PromptFormat, render_prompt_ids

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from remnant.packs.schema import Pack

PromptStyle = Literal["raw", "chat"]


@dataclass(frozen=True)
class EntityExample:
    """One question whose answer names an entity (UDS record fields idx/question/answer/prefix/entity)."""

    idx: str
    question: str
    answer: str
    prefix: str
    entity: str


@dataclass(frozen=True)
class EncodedExample:
    """An example as ids with its scored/patched window ``[eval_start, eval_end)``."""

    idx: str
    input_ids: tuple[int, ...]
    prompt_len: int
    span: tuple[int, int]

    @property
    def eval_start(self) -> int:
        return self.prompt_len - 1 + self.span[0]

    @property
    def eval_end(self) -> int:
        return self.prompt_len - 1 + self.span[1]

    @property
    def targets(self) -> tuple[int, ...]:
        """Entity token ids, predicted by the logits at ``[eval_start, eval_end)`` (shift by one)."""
        return self.input_ids[self.eval_start + 1 : self.eval_end + 1]

    def to_dict(self) -> dict[str, object]:
        return {
            "idx": self.idx,
            "input_ids": list(self.input_ids),
            "prompt_len": self.prompt_len,
            "span": list(self.span),
        }


@dataclass(frozen=True)
class Encoded:
    """Encoded examples plus the ids of those skipped because the entity span was not found (§1.3)."""

    examples: tuple[EncodedExample, ...]
    skipped: tuple[str, ...]
    style: PromptStyle


def _prompt(
    tokenizer: Any, ex: EntityExample, style: PromptStyle, system_prompt: str | None = None
) -> tuple[list[int], str]:
    if style == "raw":
        text = f"Question: {ex.question}\nAnswer: {ex.prefix}"  # the space kept for an empty prefix
        return list(tokenizer(text, add_special_tokens=True)["input_ids"]), text
    fmt = PromptFormat("chat", system_prompt=system_prompt)
    ids = render_prompt_ids(tokenizer, ex.question, fmt, prefill=ex.prefix or None)
    return ids, tokenizer.decode(ids)


def reference_text(ex: EntityExample, prompt_text: str) -> str:
    """The answer with the prefix stripped, with a boundary space where neither side has one (§1.3)."""
    ref = ex.answer[len(ex.prefix) :] if ex.prefix and ex.answer.startswith(ex.prefix) else ex.answer
    if ref and not ref[0].isspace() and prompt_text and not prompt_text[-1].isspace():
        ref = " " + ref
    return ref


def _find(haystack: list[int], needle: list[int]) -> int | None:
    if not needle or len(needle) > len(haystack):
        return None
    for i in range(len(haystack) - len(needle) + 1):
        if haystack[i : i + len(needle)] == needle:
            return i
    return None


def _slow_span(tokenizer: PreTrainedTokenizerBase, ids: list[int], entity: str) -> tuple[int, int] | None:
    """The reference's fallback without offsets: the entity's ids, then ``" " + entity``'s, as a subsequence."""
    ent = list(tokenizer(entity, add_special_tokens=False)["input_ids"])
    at = _find(ids, ent)
    if at is None and not entity.startswith(" "):
        ent = list(tokenizer(" " + entity, add_special_tokens=False)["input_ids"])
        at = _find(ids, ent)
    return None if at is None else (at, at + len(ent))


def _char_start(reference: str, entity: str) -> tuple[int, str]:
    """Where the entity's characters start (-1 if absent): the entity, its stripped form, then ``" " + entity``."""
    candidate, at = entity, reference.find(entity)
    stripped = entity.strip()
    if at < 0 and stripped and stripped != entity:
        candidate, at = stripped, reference.find(stripped)
    if at < 0 and not entity.startswith(" "):
        candidate = " " + entity
        at = reference.find(candidate)
    return at, candidate


def _span(
    tokenizer: PreTrainedTokenizerBase, reference: str, entity: str
) -> tuple[list[int], tuple[int, int] | None]:
    if not getattr(tokenizer, "is_fast", False):
        ids = list(tokenizer(reference, add_special_tokens=False)["input_ids"]) if reference else []
        return ids, (_slow_span(tokenizer, ids, entity) if ids and entity else None)
    if not reference or not entity:
        return [], None
    enc = tokenizer(reference, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(enc["input_ids"])
    at, candidate = _char_start(reference, entity)
    if at < 0 or not ids:
        return ids, None
    c0, c1 = at, at + len(candidate)
    hit = [i for i, (a, b) in enumerate(enc["offset_mapping"]) if a < c1 and b > c0]
    return ids, ((min(hit), max(hit) + 1) if hit else None)


def encode_example(
    tokenizer: PreTrainedTokenizerBase,
    ex: EntityExample,
    style: PromptStyle = "raw",
    system_prompt: str | None = None,
) -> EncodedExample | None:
    """Encode one example, or None when the entity span is not found (``entity_span_not_found``).

    ``system_prompt`` (chat only) is the system turn the states were trained with (None: the template's default).
    """
    prompt_ids, prompt_text = _prompt(tokenizer, ex, style, system_prompt)
    ref_ids, span = _span(tokenizer, reference_text(ex, prompt_text), ex.entity)
    if span is None:
        return None
    return EncodedExample(ex.idx, tuple(prompt_ids + ref_ids), len(prompt_ids), span)


def encode_examples(
    tokenizer: PreTrainedTokenizerBase,
    examples: Iterable[EntityExample],
    style: PromptStyle = "raw",
    system_prompt: str | None = None,
) -> Encoded:
    """Encode every example; the skipped ones are listed, not dropped silently (§1.3)."""
    done: list[EncodedExample] = []
    skipped: list[str] = []
    for ex in examples:
        enc = encode_example(tokenizer, ex, style, system_prompt)
        if enc is None:
            skipped.append(ex.idx)
        else:
            done.append(enc)
    return Encoded(tuple(done), tuple(skipped), style)


def examples_from_items(items: Sequence[Any]) -> list[EntityExample]:
    """Entity examples from pack fact items: the entity is the first accepted answer, the prefix what precedes it.

    Pack answers are templated (``"X works for Y."`` or the bare value), so the prefix is exact rather than the
    LLM-proposed, hand-reviewed prefix of the reference (§1.2). Items whose answer does not contain an accepted
    value are left out.
    """
    out: list[EntityExample] = []
    for it in items:
        values = [v for v in getattr(it, "accepted", []) if v and v in it.answer]
        if not values:
            continue
        value = values[0]
        prefix = it.answer[: it.answer.index(value)].rstrip()
        out.append(EntityExample(it.id, it.question, it.answer, prefix, value))
    return out


def probe_prompts(
    tokenizer: PreTrainedTokenizerBase, pack: Pack, attributes: list[str], fmt: PromptFormat
) -> tuple[tuple[int, ...], ...]:
    """Forget-domain probe inputs (B.3 step 1): held-out phrasings about the probe entities and the install
    phrasings of every forget entity (the removal split), identical for every state."""
    items = [it for it in pack.split("probe") if it.kind == "fact" and it.attribute in attributes]
    items += [it for it in pack.split("removal") if it.attribute in attributes]
    questions = list(dict.fromkeys(it.question for it in items))
    return tuple(tuple(render_prompt_ids(tokenizer, q, fmt)) for q in questions)


__all__ = [
    "Encoded",
    "EncodedExample",
    "EntityExample",
    "PromptStyle",
    "encode_example",
    "encode_examples",
    "examples_from_items",
    "probe_prompts",
    "reference_text",
]
