"""Greedy generations for ROUGE: batching, the EOS / stop-string cut, the recovered ground truth."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
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


def _fresh(path: Any) -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path).eval()


def test_pruned_decoding_gives_generate_s_texts_as_rows_end(
    tiny_llama: Any, tiny_llama_dir: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows that end early leave the batch; every row's text is what generate gives for the same batch."""
    from remnant.models import greedy

    tok = tiny_llama.tokenizer
    prompts = _prompts(tok)
    model = _fresh(tiny_llama_dir)
    # an end-of-sequence token that the model produces at different steps in different rows
    assert greedy.pruned_decoding_applies(model)
    plain = greedy_generations(model, tok, prompts, batch_size=8, max_new_tokens=12)
    ids = [tok(t, add_special_tokens=False)["input_ids"] for t in plain]
    firsts = Counter(i for row in ids for i in set(row[1:6]))
    model.generation_config.eos_token_id = firsts.most_common(1)[0][0]
    calls = {"pruned": 0}
    real = greedy.greedy_pruned

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls["pruned"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(greedy, "greedy_pruned", counting)
    pruned = greedy_generations(model, tok, prompts, batch_size=8, max_new_tokens=12)
    assert calls["pruned"] > 0
    monkeypatch.setattr(greedy, "pruned_decoding_applies", lambda _m: False)
    reference = greedy_generations(model, tok, prompts, batch_size=8, max_new_tokens=12)
    assert pruned == reference
    assert len({len(t) for t in pruned}) > 3 and pruned != plain  # rows ended at different steps


def test_pruned_decoding_stops_on_stop_strings_as_generate_does(
    tiny_llama: Any, tiny_llama_dir: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from remnant.models import greedy

    tok = tiny_llama.tokenizer
    prompts = _prompts(tok)[:6]
    model = _fresh(tiny_llama_dir)
    full = greedy_generations(model, tok, prompts, batch_size=6, max_new_tokens=10)
    stops = sorted({text[3] for text in full if len(text) > 4})[:2]
    pruned = greedy_generations(model, tok, prompts, batch_size=6, max_new_tokens=10, stopwords=stops)
    monkeypatch.setattr(greedy, "pruned_decoding_applies", lambda _m: False)
    reference = greedy_generations(model, tok, prompts, batch_size=6, max_new_tokens=10, stopwords=stops)
    assert pruned == reference != full


def test_a_score_changing_generation_config_uses_generate(tiny_llama_dir: Any) -> None:
    from remnant.models.greedy import pruned_decoding_applies

    model = _fresh(tiny_llama_dir)
    assert pruned_decoding_applies(model)
    model.generation_config.repetition_penalty = 1.3
    assert not pruned_decoding_applies(model)
    model.generation_config.repetition_penalty = 1.0
    model.generation_config.no_repeat_ngram_size = 2
    assert not pruned_decoding_applies(model)


def test_a_cache_that_cannot_drop_rows_falls_back_to_generate(
    tiny_llama: Any, tiny_llama_dir: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import DynamicCache

    from remnant.models import greedy as decode

    tok = tiny_llama.tokenizer
    prompts = _prompts(tok)[:5]
    model = _fresh(tiny_llama_dir)
    expected = greedy_generations(model, tok, prompts, batch_size=5, max_new_tokens=8)
    owner = next(c for c in DynamicCache.__mro__ if "batch_select_indices" in vars(c))
    monkeypatch.delattr(owner, "batch_select_indices")
    used: list[object] = []
    real = decode.greedy_pruned
    monkeypatch.setattr(decode, "greedy_pruned", lambda *a, **k: used.append(real(*a, **k)) or used[-1])
    assert greedy_generations(model, tok, prompts, batch_size=5, max_new_tokens=8) == expected
    assert used == [None]  # the pruned loop declined, and generate gave the texts


def test_a_draft_is_what_followed_the_latest_match_copied_on_through_a_loop() -> None:
    from remnant.models.greedy import draft

    assert draft([5, 1, 2, 3, 1, 2, 3], 5) == [1, 2, 3, 1, 2]  # period 3, drafted past the context's end
    assert draft([1, 2, 1, 3, 1], 1) == [3]  # the latest earlier 1 is followed by 3, not 2
    assert draft([7, 8, 9, 7], 2) == [8, 9]  # no 3- or 2-gram repeats: the 1-gram does
    assert draft([1, 2, 3], 4) == []
    assert draft([4, 4], 0) == []


@pytest.mark.parametrize("ending", ["length", "frequent token"])
def test_drafted_decoding_gives_the_undrafted_tokens(
    tiny_llama: Any, tiny_llama_dir: Any, ending: str
) -> None:
    """Drafted positions are verified against the model's own greedy choice: the tokens are the same, in fewer
    steps; rows end inside an accepted draft where their end-of-sequence token falls there."""
    from remnant.models.greedy import greedy_pruned
    from remnant.models.prompts import padded

    tok = tiny_llama.tokenizer
    model = _fresh(tiny_llama_dir)
    ids, mask = padded(_prompts(tok)[:6], int(tok.pad_token_id or 0))
    eos = int(tok.eos_token_id)
    if ending == "frequent token":
        undrafted = greedy_pruned(model, ids, mask, max_new_tokens=40, eos_token_id=eos, max_draft=0)
        assert undrafted is not None
        eos = Counter(t for row in undrafted for t in row[3:]).most_common(1)[0][0]
        model.generation_config.eos_token_id = eos
    widths: list[int] = []
    hook = model.model.register_forward_pre_hook(
        lambda _m, _a, k: widths.append(int(k["input_ids"].shape[1])), with_kwargs=True
    )
    undrafted = greedy_pruned(model, ids, mask, max_new_tokens=40, eos_token_id=eos, max_draft=0)
    plain_steps, widths[:] = len(widths), []
    drafted = greedy_pruned(model, ids, mask, max_new_tokens=40, eos_token_id=eos)
    hook.remove()
    assert drafted == undrafted
    assert max(widths[1:]) > 1 and len(widths) < plain_steps
    if ending == "frequent token":
        assert len({len(row) for row in drafted}) > 1 and any(row[-1] == eos for row in drafted)


def test_a_prefix_every_prompt_shares_runs_once_and_gives_generate_s_texts(
    tiny_llama: Any, tiny_llama_dir: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prompts' shared start (their template's) is fed once, as one row; the rest of each prompt follows it
    left-padded, with every row's text what generate gives for the same batch."""
    from remnant.models import greedy
    from remnant.models.prompts import padded

    tok = tiny_llama.tokenizer
    prompts = _prompts(tok)[:8]
    shared = greedy.shared_length(prompts)
    assert shared >= greedy.MIN_SHARED and len({len(p) for p in prompts}) > 1
    model = _fresh(tiny_llama_dir)
    fed: list[tuple[int, int]] = []
    hook = model.model.register_forward_pre_hook(
        lambda _m, _a, k: fed.append(tuple(k["input_ids"].shape)), with_kwargs=True
    )
    pruned = greedy_generations(model, tok, prompts, batch_size=8, max_new_tokens=12)
    hook.remove()
    assert fed[:2] == [(1, shared), (8, max(len(p) for p in prompts) - shared)]
    monkeypatch.setattr(greedy, "pruned_decoding_applies", lambda _m: False)
    assert pruned == greedy_generations(model, tok, prompts, batch_size=8, max_new_tokens=12)
    # min_shared longer than every prompt turns the shared pass off (bench_generate's baseline): same tokens
    ids, mask = padded(prompts, int(tok.pad_token_id or 0))
    fed.clear()
    hook = model.model.register_forward_pre_hook(
        lambda _m, _a, k: fed.append(tuple(k["input_ids"].shape)), with_kwargs=True
    )
    kwargs = {"max_new_tokens": 12, "eos_token_id": tok.eos_token_id}
    apart = greedy.greedy_pruned(model, ids, mask, **kwargs, min_shared=ids.shape[1] + 1)
    hook.remove()
    assert fed[0] == tuple(ids.shape)  # the prompts fed whole, left-padded
    assert apart == greedy.greedy_pruned(model, ids, mask, **kwargs)


@pytest.mark.parametrize("shared", [0, 2, 6])
def test_prompts_sharing_a_short_or_long_start_give_generate_s_tokens(
    tiny_llama: Any, tiny_llama_dir: Any, shared: int
) -> None:
    """Prompts that share no start, a start too short to run apart (under MIN_SHARED) or a long one: every row's
    tokens are what generate gives for the same left-padded batch, so no prompt loses or repeats a token."""
    import torch

    from remnant.models import greedy
    from remnant.models.prompts import padded

    tok = tiny_llama.tokenizer
    model = _fresh(tiny_llama_dir)
    start = list(range(40, 46))[:shared]  # ordinary tokens of the tiny vocabulary
    prompts = [[*start, *p[-k:]] for p, k in zip(_prompts(tok)[:6], (3, 5, 4, 7, 2, 6), strict=True)]
    if shared == 0:
        prompts[1][0] = prompts[0][0] + 1  # no common first token
    assert greedy.shared_length(prompts) == shared
    ids, mask = padded(prompts, int(tok.pad_token_id or 0))
    fed: list[list[list[int]]] = []
    hook = model.model.register_forward_pre_hook(
        lambda _m, _a, k: fed.append(k["input_ids"].tolist()), with_kwargs=True
    )
    ours = greedy.greedy_pruned(model, ids, mask, max_new_tokens=8, eos_token_id=None, max_draft=0)
    hook.remove()
    run_apart = shared >= greedy.MIN_SHARED
    # the prompt pass: every prompt whole, or the shared start once and then each prompt's rest
    first = [[start]] if run_apart else []
    rests = [[t for t in row if t != 0] for row in fed[len(first)]]  # the rest's filler is token 0
    assert fed[: len(first)] == first
    assert rests == [p[len(start) if run_apart else 0 :] for p in prompts]
    with torch.inference_mode():
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=8,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
        )
    assert ours == out[:, ids.shape[1] :].tolist()
