"""κ fast path: logits on the answer-predicting rows only equal the full-logits path (R6).

``greedy_predictions`` asks the model for logits on the positions that predict answer tokens only (a boolean
``logits_to_keep``); ``full_logits=True`` computes every position and gathers afterwards. On right-padded batches
with varied prompt and answer lengths both must give the same argmax token at every answer position and the same
κ decision, and the fast path must really apply the output head to those rows and no others.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch

from remnant.models.prompts import EncodedPair, PromptFormat, encode_pair
from remnant.score.capability import generate_greedy_ids, greedy_match, greedy_predictions


def _pairs(model: Any, tok: Any, seed: int) -> list[EncodedPair]:
    """24 pairs: prompts of 1-9 words, answers of 1-5 tokens, half the model's own continuation (a match), half
    random tokens that are not (a miss)."""
    rng = random.Random(seed)
    fmt = PromptFormat(style="raw")
    words = sorted(w for w in tok.get_vocab() if w.isalpha())  # a dict's order differs per process
    out = []
    for i in range(24):
        prompt = encode_pair(tok, " ".join(rng.sample(words, rng.randint(1, 9))), "x", fmt)
        head = prompt.input_ids[: prompt.prompt_len]
        n = rng.randint(1, 5)
        own = generate_greedy_ids(model, tok, head, max_new_tokens=n)
        answer = own
        # a random answer redrawn until it is not the model's own: a one-token draw equals it one time in |V|,
        # and a random vocabulary order once made that the test's only failure
        while i % 2 == 1 and answer == own:
            answer = [rng.randrange(len(tok)) for _ in range(n)]
        out.append(EncodedPair(head + answer, [-100] * len(head) + answer, len(head), answer))
    return out


@contextmanager
def _head_rows(model: Any) -> Iterator[list[int]]:
    """Record how many rows each call of the output head projects."""
    rows: list[int] = []

    def hook(_m: Any, args: tuple[torch.Tensor, ...]) -> None:
        rows.append(int(args[0].reshape(-1, args[0].shape[-1]).shape[0]))

    handle = model.get_output_embeddings().register_forward_pre_hook(hook)
    try:
        yield rows
    finally:
        handle.remove()


def _check(model: Any, tok: Any, seed: int) -> None:
    saved = model.generation_config.eos_token_id
    model.generation_config.eos_token_id = None  # own continuations of exactly n tokens
    try:
        pairs = _pairs(model, tok, seed)
    finally:
        model.generation_config.eos_token_id = saved
    # batches of 5: every batch mixes prompt and answer lengths, so rows are right-padded by varied amounts
    assert len({len(p.input_ids) for p in pairs[:5]}) > 1
    with _head_rows(model) as rows:
        fast = greedy_predictions(model, pairs, batch_size=5, by_length=False)
    assert rows == [sum(len(p.answer_ids) for p in pairs[s : s + 5]) for s in range(0, len(pairs), 5)], (
        "the head did not run on the answer rows only"
    )
    with _head_rows(model) as rows:
        full = greedy_predictions(model, pairs, batch_size=5, full_logits=True, by_length=False)
    widths = [max(len(p.input_ids) for p in pairs[s : s + 5]) for s in range(0, len(pairs), 5)]
    assert rows == [min(5, len(pairs) - 5 * b) * w for b, w in enumerate(widths)]
    assert fast == full
    # batches cut in order of length (the default): the same predictions, back in the pairs' order, from
    # batches that pad less
    ordered = sorted(pairs, key=lambda p: len(p.input_ids))
    with _head_rows(model) as rows:
        assert greedy_predictions(model, pairs, batch_size=5, full_logits=True) == full
    sorted_widths = [max(len(p.input_ids) for p in ordered[s : s + 5]) for s in range(0, len(pairs), 5)]
    assert rows == [min(5, len(pairs) - 5 * b) * w for b, w in enumerate(sorted_widths)]
    assert sum(sorted_widths) < sum(widths)
    assert greedy_predictions(model, pairs, batch_size=5) == fast
    assert [len(f) for f in fast] == [len(p.answer_ids) for p in pairs]
    hits = greedy_match(model, pairs, batch_size=5)
    assert hits == greedy_match(model, pairs, batch_size=5, full_logits=True)
    assert hits == [f == p.answer_ids for f, p in zip(full, pairs, strict=True)]
    # the own continuations all match and the random answers do not: both decisions occur
    assert all(hits[0::2]) and not any(hits[1::2])


@pytest.mark.parametrize("family", ["llama", "qwen2", "gpt2"])
def test_answer_rows_equal_full_logits(family: str, request: pytest.FixtureRequest) -> None:
    from remnant.models import load_model

    state = load_model(request.getfixturevalue(f"tiny_{family}_dir"))
    _check(state.model, state.tokenizer, seed=7)


def test_answer_rows_equal_full_logits_with_softcapping(tiny_llama: Any) -> None:
    """Gemma's final logit soft-capping runs after the head: the model's own forward still applies it."""
    import transformers as tf

    tok = tiny_llama.tokenizer
    config = tf.Gemma3TextConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=256,
        final_logit_softcapping=2.0,  # small, so the cap bends the logits a random model produces
        eos_token_id=tok.eos_token_id,
        bos_token_id=tok.bos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.random.manual_seed(3)  # scoped by fork_rng: no global seeding leaks out of the test
        model = tf.AutoModelForCausalLM.from_config(config).eval()
    _check(model, tok, seed=11)


def test_empty_answer_is_a_match(tiny_llama: Any) -> None:
    """An empty answer asks for no logits and is vacuously reproduced, as before the fast path."""
    model = tiny_llama.model
    pairs = [EncodedPair([5, 6, 7], [-100] * 3, 3, []), EncodedPair([5, 6, 7, 8], [-100] * 3 + [8], 3, [8])]
    assert greedy_predictions(model, pairs[:1]) == [[]]
    fast = greedy_predictions(model, pairs)
    assert fast == greedy_predictions(model, pairs, full_logits=True)
    assert greedy_match(model, pairs)[0] is True
