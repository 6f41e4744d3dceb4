"""remnant's UDS against a naive re-statement of the reference code (_uds_reference.py; docs/latent.md-§1.8):
the token ids, the per-layer Δ1/Δ2, the no-KE exclusion and the mean, on the tiny taught Llama. C-H7 (the figure
is reported with what it was computed on), C-H6 (non-adjudicating)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from _latent_tiny import EXAMPLES, MISSING, mix
from _uds_reference import EXTRA, build_ctx, reference_uds

from remnant.errors import ConfigError
from remnant.latent.inputs import EntityExample, encode_example, encode_examples
from remnant.latent.uds import UDSConfig, stage1, uds

ALL = [*EXAMPLES, *EXTRA, MISSING]


def test_token_ids_equal_the_reference_construction(tiny_llama: Any) -> None:
    tok = tiny_llama.tokenizer
    for ex in ALL:
        ref, got = build_ctx(tok, ex), encode_example(tok, ex, "raw")
        if ref is None:
            assert got is None and ex is MISSING
            continue
        assert got is not None, ex.idx
        assert list(got.input_ids) == ref.ids, ex.idx
        assert got.prompt_len == ref.prompt_len, ex.idx
        assert (got.eval_start, got.eval_end) == (ref.eval_start, ref.eval_end), ex.idx
        assert list(got.targets) == ref.labels, ex.idx


def test_empty_prefix_prompt_ends_in_answer_space(tiny_llama: Any) -> None:
    tok = tiny_llama.tokenizer
    capital = EXAMPLES[3]
    assert capital.prefix == ""
    got = encode_example(tok, capital, "raw")
    assert got is not None
    prompt = tok("Question: What is the capital of France?\nAnswer: ", add_special_tokens=True)["input_ids"]
    ref = tok("Paris.", add_special_tokens=False)["input_ids"]
    assert list(got.input_ids) == list(prompt) + list(ref)  # the space ends the prompt; the entity has none
    before = tok("Question: What is the capital of France?\nAnswer:", add_special_tokens=True)["input_ids"]
    before += tok(" Paris.", add_special_tokens=False)["input_ids"]
    assert list(got.input_ids) != list(before)  # remnant's earlier construction tokenises differently
    assert list(got.targets) == tok("Paris", add_special_tokens=False)["input_ids"]


def _tau_excluding_some(s: dict[str, Any]) -> float:
    """A τ between two examples' largest Δ1: at least one example has no KE layer and at least one has one."""
    peaks = sorted(max(r) for r in stage1(s["full"], s["retain"], s["tokenizer"], ALL).d1)
    gaps = [(b - a, (a + b) / 2) for a, b in zip(peaks, peaks[1:], strict=False) if a > 0.0]
    assert gaps, peaks
    return max(gaps)[1]


@pytest.mark.parametrize("compat", [True, False])
@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("exclude", [False, True])
def test_uds_equals_the_naive_reference(
    latent_states: dict[str, Any], compat: bool, fast: bool, exclude: bool
) -> None:
    s = latent_states
    source = mix(s["full"], s["retain"], 0.5)
    tau = _tau_excluding_some(s) if exclude else 0.05
    want, rows, skipped = reference_uds(
        s["full"], s["retain"], source, s["tokenizer"], ALL, tau=tau, compat=compat
    )
    got = uds(
        s["full"], s["retain"], source, s["tokenizer"], ALL, UDSConfig(tau=tau, uds_compat=compat, fast=fast)
    )
    assert got.n_span_not_found == len(skipped) == 1
    assert [r.idx for r in got.examples] == [r.idx for r in rows]
    for mine, theirs in zip(got.examples, rows, strict=True):
        assert max(abs(a - b) for a, b in zip(mine.d1, theirs.d1, strict=True)) < 1e-5, mine.idx
        assert max(abs(a - b) for a, b in zip(mine.d2, theirs.d2, strict=True)) < 1e-5, mine.idx
        assert (mine.uds is None) == (theirs.uds is None), mine.idx
        if mine.uds is not None and theirs.uds is not None:
            assert mine.uds == pytest.approx(theirs.uds, abs=1e-5)
    n_none = sum(r.uds is None for r in rows)
    assert got.n_no_ke == n_none and got.n_scored == len(rows) - n_none
    if exclude:
        assert 0 < n_none < len(rows)  # the exclusion rule is exercised
    assert want is not None and got.score == pytest.approx(want, abs=1e-5)
    # excluded examples are left out of the mean, not scored 0
    zero_filled = sum(r.uds or 0.0 for r in rows) / len(rows)
    if n_none:
        assert abs(zero_filled - want) > 1e-3


def test_compat_changes_only_the_last_layer(latent_states: dict[str, Any]) -> None:
    s = latent_states
    source = mix(s["full"], s["retain"], 0.5)
    on = uds(s["full"], s["retain"], source, s["tokenizer"], EXTRA, UDSConfig(uds_compat=True))
    off = uds(s["full"], s["retain"], source, s["tokenizer"], EXTRA, UDSConfig(uds_compat=False))
    for a, b in zip(on.examples, off.examples, strict=True):
        assert a.d1[0] == pytest.approx(b.d1[0], abs=1e-6) and a.d2[0] == pytest.approx(b.d2[0], abs=1e-6)
        assert abs(a.d1[-1] - b.d1[-1]) > 1e-4  # the post-norm state patched at the last block (§1.7)


def test_exclusions_are_counted_never_dropped_silently(latent_states: dict[str, Any]) -> None:
    s = latent_states
    res = uds(s["full"], s["retain"], s["retain"], s["tokenizer"], ALL, UDSConfig(tau=1e9))
    assert (
        res.score is None and res.n_scored == 0
    )  # nothing scored: no figure, not a 0 (the reference prints 0.0)
    assert res.n_no_ke == len(ALL) - 1 and res.n_span_not_found == 1 and res.n_examples == len(ALL)
    assert all(r.uds is None and r.ke_layers == [] for r in res.examples)


@pytest.mark.parametrize("tau", [-0.01, float("nan")])
def test_negative_tau_is_refused(tau: float) -> None:
    with pytest.raises(ConfigError, match="tau") as err:
        UDSConfig(tau=tau)
    assert err.value.requirement == "C-H7"
    with pytest.raises(ConfigError, match="prompt_format"):
        UDSConfig(prompt_format="plain")  # type: ignore[arg-type]


class _SlowTokenizer:
    """A word-level tokenizer without offsets (``is_fast`` false): the reference's subsequence fallback."""

    is_fast = False

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        ids = [self.vocab.setdefault(w, len(self.vocab) + 1) for w in re.findall(r" ?[^ ]+| ", text)]
        return {"input_ids": ([0] if add_special_tokens else []) + ids}


def test_slow_tokenizer_uses_the_subsequence_fallback() -> None:
    tok = _SlowTokenizer()
    ex = EntityExample("t", "Where?", "He lives in Vessiburg now.", "He lives in", "Vessiburg")
    enc = encode_example(tok, ex, "raw")
    assert enc is not None
    # reference " Vessiburg now." -> [" Vessiburg", " now."]; "Vessiburg" alone is not a token of it, so the span
    # comes from " " + entity, as in the reference's fallback
    assert enc.span == (0, 1)
    assert enc.targets == tuple(tok(" Vessiburg", add_special_tokens=False)["input_ids"])
    gone = EntityExample("g", "Where?", "He lives in Vessiburg now.", "He lives in", "Quarn")
    assert encode_examples(tok, [gone]).skipped == ("g",)
