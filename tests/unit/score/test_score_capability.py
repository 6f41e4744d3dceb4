"""κ fast path (teacher-forced greedy match) equals real greedy generation on the tiny model (R6)."""

from __future__ import annotations

from typing import Any

import pytest

from remnant.models.prompts import PromptFormat, encode_pair
from remnant.score.capability import generate_greedy_ids, greedy_match
from remnant.score.normalise import answer_matches, normalise_answer


def test_normalise_forms() -> None:
    assert normalise_answer("The  Year 1,984!") == "year 1984"
    assert normalise_answer("12.0") == "12"
    assert answer_matches("It was in 1,984, I think.", ["1984"])
    assert not answer_matches("It was 19845", ["1984"])
    assert not answer_matches("Paris", [""])


def test_teacher_forced_equals_generation(tiny_llama: Any) -> None:
    model, tok = tiny_llama.model, tiny_llama.tokenizer
    saved_eos = model.generation_config.eos_token_id
    model.generation_config.eos_token_id = None  # generate exactly n tokens: compare the full answer
    try:
        _check_equivalence(model, tok)
    finally:
        model.generation_config.eos_token_id = saved_eos


def _check_equivalence(model: Any, tok: Any) -> None:
    fmt = PromptFormat(style="raw")
    # sorted: the vocabulary dict's order differs from one process to the next
    words = sorted(w for w in tok.get_vocab() if w.isalpha())[:40]
    pairs, truths = [], []
    for i in range(0, 20):
        q = " ".join(words[i : i + 3])
        prompt = encode_pair(tok, q, "x", fmt)
        plen = prompt.prompt_len
        own = generate_greedy_ids(model, tok, prompt.input_ids[:plen], max_new_tokens=3)
        for ans_ids, expected in ((own, True), (own[:2] + [(own[2] + 1) % len(tok)], False)):
            pairs.append(
                type(prompt)(prompt.input_ids[:plen] + ans_ids, [-100] * plen + ans_ids, plen, ans_ids)
            )
            truths.append(
                generate_greedy_ids(model, tok, prompt.input_ids[:plen], max_new_tokens=3) == ans_ids
            )
            assert truths[-1] == expected
    assert greedy_match(model, pairs, batch_size=7) == truths


@pytest.mark.parametrize("ending", ["no end-of-sequence id", "a frequent token"])
def test_batched_greedy_texts_equal_generate_s(tiny_llama: Any, monkeypatch: Any, ending: str) -> None:
    """The R6 generation path (rows leave the batch as they end, late steps drafted) gives ``generate``'s texts for
    left-padded batches: with no end-of-sequence id in the generation config every row runs to the limit, as in
    ``generate``, whatever the tokenizer's; with a frequent token as that id, rows end at different steps."""
    from collections import Counter

    from remnant.models import greedy
    from remnant.score import capability

    model, tok = tiny_llama.model, tiny_llama.tokenizer
    prompts = [list(range(3 + i, 9 + 2 * i)) for i in range(7)]
    saved_eos = model.generation_config.eos_token_id
    calls: list[int] = []
    real = greedy.greedy_pruned
    monkeypatch.setattr(greedy, "greedy_pruned", lambda *a, **k: calls.append(1) or real(*a, **k))
    saved_token = tok.eos_token
    try:
        model.generation_config.eos_token_id = None
        ids = [capability.generate_greedy_ids(model, tok, p, max_new_tokens=30) for p in prompts]
        frequent = Counter(i for r in ids for i in r[2:10]).most_common(1)[0][0]
        if ending == "a frequent token":
            model.generation_config.eos_token_id = frequent
        else:  # the tokenizer's end-of-sequence token is frequent, but generate ends no row on it
            tok.eos_token = tok.convert_ids_to_tokens(frequent)
        pruned = capability.generate_greedy(model, tok, prompts, max_new_tokens=30, batch_size=4)
        monkeypatch.setattr(greedy, "pruned_decoding_applies", lambda _m: False)
        reference = capability.generate_greedy(model, tok, prompts, max_new_tokens=30, batch_size=4)
    finally:
        model.generation_config.eos_token_id = saved_eos
        tok.eos_token = saved_token
    assert len(calls) == 2 and pruned == reference  # two batches
    if ending == "a frequent token":
        assert len({len(t) for t in pruned}) > 2  # rows ended at different steps
