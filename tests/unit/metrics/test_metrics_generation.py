"""Greedy generations for ROUGE: batching, the EOS / stop-string cut, the recovered ground truth."""

from __future__ import annotations

from typing import Any

from metrics_data import SPLITS

from remnant.metrics.encoding import OpenUnlearningPrompt, encode_qa
from remnant.metrics.generation import cut_generation, greedy_generations
from remnant.metrics.text import clean_up_spaces


def test_cut_generation_keeps_text_before_each_stop_in_order() -> None:
    assert cut_generation("  Paris.\n\nQuestion: next", ["<eos>", "\n\n", "Question:"]) == "Paris."
    assert cut_generation("a<eos>b\n\nc", ["<eos>", "\n\n"]) == "a"
    assert cut_generation(" no stop here ", ["", "zzz"]) == "no stop here"


def test_clean_up_matches_transformers_4() -> None:
    assert (
        clean_up_spaces("Hello , world . It ' s done ! Is n't it ?") == "Hello, world. It's done! Isn't it?"
    )


def _prompts(tok: Any) -> list[tuple[int, ...]]:
    setting = OpenUnlearningPrompt.for_tokenizer(tok)
    rows = SPLITS["forget10_perturbed"] + SPLITS["holdout10"]
    return [encode_qa(tok, setting, r.question, r.answer).prompt_ids for r in rows]


def test_batched_generation_equals_one_at_a_time(tiny_llama: Any) -> None:
    prompts = _prompts(tiny_llama.tokenizer)
    assert len({len(p) for p in prompts}) > 1  # left padding is exercised
    batched = greedy_generations(
        tiny_llama.model, tiny_llama.tokenizer, prompts, batch_size=4, max_new_tokens=8
    )
    single = greedy_generations(
        tiny_llama.model, tiny_llama.tokenizer, prompts, batch_size=1, max_new_tokens=8
    )
    assert batched == single
    assert any(batched)


def test_stop_strings_cut_the_generation(tiny_llama: Any) -> None:
    tok = tiny_llama.tokenizer
    prompts = _prompts(tok)[:3]
    full = greedy_generations(tiny_llama.model, tok, prompts, batch_size=3, max_new_tokens=10)
    # stop at the first character of each generation that has one: the cut text must end before it
    stops = [text[2] for text in full if len(text) > 3]
    assert stops
    cut = greedy_generations(tiny_llama.model, tok, prompts, batch_size=3, max_new_tokens=10, stopwords=stops)
    for text, short in zip(full, cut, strict=True):
        assert short == cut_generation(text, stops)
        assert not any(s in short for s in stops if s.strip())
