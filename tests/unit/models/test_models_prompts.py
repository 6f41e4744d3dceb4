"""Prompt rendering and pair encoding (docs/latent.md: no re-tokenisation across the boundary)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from remnant.models.prompts import PromptFormat, collate, encode_pair, render_prompt_ids


@pytest.fixture(scope="module")
def tok(tiny_llama: Any) -> Any:
    return tiny_llama.tokenizer


def test_format_for_tokenizer(tok: Any) -> None:
    assert PromptFormat.for_tokenizer(tok).style == "chat"


@pytest.mark.parametrize("style", ["chat", "raw"])
def test_encode_pair_is_prompt_plus_answer_ids(tok: Any, style: str) -> None:
    fmt = PromptFormat(style=style, system_prompt="Be brief.")  # type: ignore[arg-type]
    q, a = "Where does Zorvak Telumi live?", "Vessiburg, since 1984 (ID-4821)."
    pair = encode_pair(tok, q, a, fmt)
    prompt = render_prompt_ids(tok, q, fmt)
    assert pair.input_ids == prompt + pair.answer_ids and pair.prompt_len == len(prompt)
    assert pair.labels == [-100] * len(prompt) + pair.answer_ids
    end = tok.convert_tokens_to_ids("<|im_end|>") if style == "chat" else tok.eos_token_id
    assert pair.answer_ids[-1] == end
    assert tok.unk_token_id is None or tok.unk_token_id not in pair.input_ids
    assert "Vessiburg" in tok.decode(pair.answer_ids)


def test_chat_prompt_ends_with_assistant_turn_and_prefill_has_no_end(tok: Any) -> None:
    fmt = PromptFormat(style="chat")
    ids = render_prompt_ids(tok, "Who?", fmt, prefill="Sure, the answer is")
    text = tok.decode(ids)
    assert text.endswith("<|im_start|>assistant\nSure, the answer is")
    assert text.count("<|im_end|>") == 1  # only the user turn is closed


def test_raw_format(tok: Any) -> None:
    text = tok.decode(render_prompt_ids(tok, "Who?", PromptFormat(style="raw")))
    assert text.endswith("Question: Who?\nAnswer:")


@pytest.mark.parametrize("side", ["left", "right"])
def test_collate_pads(tok: Any, side: str) -> None:
    fmt = PromptFormat(style="chat")
    pairs = [
        encode_pair(tok, "Q?", "short", fmt),
        encode_pair(tok, "A longer question here?", "long answer", fmt),
    ]
    batch = collate(pairs, pad_id=tok.pad_token_id, side=side)
    width = max(len(p.input_ids) for p in pairs)
    assert batch["input_ids"].shape == (2, width)
    n0 = len(pairs[0].input_ids)
    row = batch["input_ids"][0].tolist()
    assert (row[-n0:] if side == "left" else row[:n0]) == pairs[0].input_ids
    assert int(batch["attention_mask"][0].sum()) == n0
    assert (batch["labels"][batch["attention_mask"] == 0] == -100).all()


def _end_by_vocab(tokenizer: Any) -> int:
    """The naive rule: the first end-of-turn token present in the vocabulary dict, else EOS."""
    vocab = tokenizer.get_vocab()
    for token in ("<|im_end|>", "<end_of_turn>", "<|eot_id|>", "<|end|>"):
        if token in vocab:
            return int(vocab[token])
    return int(tokenizer.eos_token_id)


@pytest.mark.parametrize("unk", [None, "<|pad|>"])
@pytest.mark.parametrize("chat_token", ["<|im_end|>", "<|eot_id|>", None])
def test_chat_end_id_equals_the_vocabulary_rule(chat_token: str | None, unk: str | None) -> None:
    """The chat answer's end id is the first end-of-turn token the tokenizer has, else EOS: one lookup per token
    (never the whole vocabulary dict), the same answer as reading the dict, with or without an unk token."""
    from fixtures_models import CHAT_TEMPLATE, build_tokenizer

    tok = build_tokenizer()
    specials = [t for t in ("<|im_start|>", chat_token) if t]
    tok = type(tok)(
        tokenizer_object=tok.backend_tokenizer,
        eos_token="<|endoftext|>",
        pad_token="<|pad|>",
        unk_token=unk,
        additional_special_tokens=specials,
    )
    if chat_token is None:  # drop <|im_end|> from the vocabulary itself, not only from the special list
        from tokenizers import Tokenizer

        state = json.loads(tok.backend_tokenizer.to_str())
        state["added_tokens"] = [t for t in state["added_tokens"] if t["content"] != "<|im_end|>"]
        state["model"]["vocab"].pop("<|im_end|>", None)
        tok = type(tok)(
            tokenizer_object=Tokenizer.from_str(json.dumps(state)),
            eos_token="<|endoftext|>",
            pad_token="<|pad|>",
            unk_token=unk,
        )
    tok.chat_template = CHAT_TEMPLATE
    pair = encode_pair(tok, "Where?", "There.", PromptFormat("chat"))
    assert pair.answer_ids[-1] == _end_by_vocab(tok)
    assert (pair.answer_ids[-1] == tok.eos_token_id) == (chat_token is None)
