"""UDS (the UDS paper, docs/latent.md): sanity checks, fast path = naive, stage-1 cache, compat, no-retain (C-H6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from _latent_tiny import EXAMPLES, MISSING, mix
from _uds_reference import EXTRA
from hypothesis import given, settings
from hypothesis import strategies as st

from remnant.latent.inputs import encode_example, encode_examples, examples_from_items, reference_text
from remnant.latent.patching import (
    fast_scores_many,
    naive_scores,
    source_states_many,
    window_packs,
)
from remnant.latent.uds import UDSConfig, aggregate_example, score_source, stage1, uds, uds_no_retain


def test_positions_follow_the_reference(tiny_llama: Any) -> None:
    tok = tiny_llama.tokenizer
    ex = EXAMPLES[0]
    enc = encode_example(tok, ex, "raw")
    assert enc is not None
    prompt = list(tok(f"Question: {ex.question}\nAnswer: {ex.prefix}", add_special_tokens=True)["input_ids"])
    ref = list(tok(" Vessiburg.", add_special_tokens=False)["input_ids"])
    assert list(enc.input_ids) == prompt + ref  # separate tokenisation, joined as ids (§1.3)
    assert enc.eval_start == len(prompt) - 1 + enc.span[0]
    entity_ids = tok(" Vessiburg", add_special_tokens=False)["input_ids"]
    assert list(enc.targets) == entity_ids  # the logits on the window predict exactly the entity tokens
    assert reference_text(ex, "Answer: The x is") == " Vessiburg."
    assert reference_text(EXAMPLES[3], "Answer:") == " Paris."
    # the reference's empty-prefix prompt ends in a space, so the reference gets none
    assert reference_text(EXAMPLES[3], "Answer: ") == "Paris."


def test_span_not_found_is_skipped_and_counted(latent_states: dict[str, Any]) -> None:
    s = latent_states
    enc = encode_examples(s["tokenizer"], [*EXAMPLES, MISSING])
    assert enc.skipped == ("missing",)
    res = uds(s["full"], s["retain"], s["retain"], s["tokenizer"], [*EXAMPLES, MISSING])
    assert res.n_examples == 6 and res.n_span_not_found == 1
    assert res.n_scored + res.n_no_ke == 5


def test_examples_from_pack_items() -> None:
    from remnant.packs import ClassDSpec, mint_class_d

    pack = mint_class_d(ClassDSpec(entities=8, controls=2, general=False, seed=1))
    exs = examples_from_items(pack.split("install"))
    assert exs and all(e.entity in e.answer for e in exs)
    long = [e for e in exs if e.prefix]
    assert long and all(e.answer.startswith(e.prefix) and not e.prefix.endswith(" ") for e in long)


@pytest.mark.parametrize("source", ["full", "retain", "mixed", "random"])
def test_fast_path_equals_naive(latent_states: dict[str, Any], source: str) -> None:
    s = latent_states
    other = mix(s["full"], s["retain"], 0.5) if source == "mixed" else s.get(source)
    if source == "random":
        other = mix(s["full"], s["retain"], -0.7)
    layers = [0, 1]
    for ex in encode_examples(s["tokenizer"], [*EXAMPLES, *EXTRA]).examples:  # empty prefixes included
        states = [source_states_many(m, [ex], layers)[0] for m in (other, s["retain"])]
        f_full, f_rows = fast_scores_many(s["full"], [ex], [states], layers)[0]
        n_full, n_rows = naive_scores(s["full"], ex, states, layers)
        assert abs(f_full - n_full) < 1e-5
        assert torch.allclose(torch.tensor(f_rows), torch.tensor(n_rows), atol=1e-5, rtol=0)


@pytest.mark.parametrize("family", ["llama", "qwen2", "gpt2"])
def test_the_growing_batch_equals_naive_on_each_family(
    family: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The fast path's batch grows along the depth (a row joins at its patched block); on every tiny family, with
    three sources (rows of one block interleaved), layers listed out of order and a repeated layer, each patched
    score equals the naive path's one-forward-per-patch score."""
    from fixtures_models import build_tiny_model
    from remnant.models import load_model

    target = load_model(build_tiny_model(family, tmp_path_factory.mktemp(family) / "m", seed=0), dtype="fp32")
    others = [
        load_model(
            build_tiny_model(family, tmp_path_factory.mktemp(family) / f"s{k}", seed=k), dtype="fp32"
        ).model
        for k in (1, 2)
    ]
    tok, layers = target.tokenizer, [1, 0, 1]  # every tiny family has two blocks
    sources = [mix(target.model, others[0], 0.5), *others]
    checked = 0
    for ex in encode_examples(tok, [*EXAMPLES, *EXTRA]).examples:
        states = [source_states_many(m, [ex], layers)[0] for m in sources]
        f_full, f_rows = fast_scores_many(target.model, [ex], [states], layers)[0]
        n_full, n_rows = naive_scores(target.model, ex, states, layers)
        assert abs(f_full - n_full) < 1e-5
        assert torch.allclose(torch.tensor(f_rows), torch.tensor(n_rows), atol=1e-5, rtol=0)
        assert f_rows[0][0] == f_rows[0][2]  # the repeated layer reads the same row
        assert len({round(r[0], 4) for r in f_rows}) > 1  # the sources' rows differ: not one row read thrice
        checked += 1
    assert checked >= 4


@pytest.mark.parametrize("family", ["llama", "qwen2", "gpt2"])
@pytest.mark.parametrize("clean", [True, False])
def test_packed_windows_equal_each_example_naive(
    family: str, clean: bool, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Every example's window in one packed forward (prefixes of different lengths, windows of
    different widths): each example's scores equal its own naive forwards, so no window reads another example's
    prefix or window, and each reads its own positions. The source states read packed in one row equal each
    example's own."""
    from fixtures_models import build_tiny_model
    from remnant.models import load_model

    target = load_model(build_tiny_model(family, tmp_path_factory.mktemp(family) / "m", seed=0), dtype="fp32")
    other = load_model(build_tiny_model(family, tmp_path_factory.mktemp(family) / "s", seed=3), dtype="fp32")
    sources = [mix(target.model, other.model, 0.5), other.model]
    layers = [0, 1]
    examples = encode_examples(target.tokenizer, [*EXAMPLES, *EXTRA]).examples
    assert len({e.eval_start for e in examples}) > 2
    assert len({e.eval_end - e.eval_start for e in examples}) > 1
    states = [[source_states_many(m, [ex], layers)[0] for m in sources] for ex in examples]
    rows = source_states_many(sources[0], examples, layers, batch_size=len(examples))  # one packed row
    for own, row in zip(states, rows, strict=True):
        for layer in layers:
            assert (row[layer] - own[0][layer]).abs().max() <= 1e-5 * own[0][layer].abs().max()
    packed = fast_scores_many(target.model, examples, states, layers, clean=clean)
    for ex, own, (f_full, f_rows) in zip(examples, states, packed, strict=True):
        n_full, n_rows = naive_scores(target.model, ex, own, layers)
        assert (f_full is None) is not clean
        assert f_full is None or abs(f_full - n_full) < 1e-5
        assert torch.allclose(torch.tensor(f_rows), torch.tensor(n_rows), atol=1e-5, rtol=0)


def test_window_packs_keep_the_logits_within_their_bytes(latent_states: dict[str, Any]) -> None:
    """Packs are consecutive runs in order; a pack grows while rows × packed positions × vocabulary × 4 bytes stays
    within the budget, and an example alone over it is a pack of its own."""
    s = latent_states
    examples = encode_examples(s["tokenizer"], [*EXAMPLES, *EXTRA]).examples
    widths = [e.eval_end - e.eval_start for e in examples]
    per_position = 3 * s["full"].config.vocab_size * 4
    assert window_packs(s["full"], examples, rows=3, max_bytes=sum(widths) * per_position) == [
        list(range(len(examples)))
    ]
    budget = (widths[0] + widths[1]) * per_position
    packs = window_packs(s["full"], examples, rows=3, max_bytes=budget)
    assert [i for p in packs for i in p] == list(range(len(examples)))
    assert packs[0] == [0, 1]  # the third window would pass the budget
    assert all(len(p) == 1 or sum(widths[i] for i in p) * per_position <= budget for p in packs)
    assert window_packs(s["full"], examples, rows=3, max_bytes=0) == [[i] for i in range(len(examples))]


def test_kept_prefixes_give_the_same_scores_and_stay_with_their_model(latent_states: dict[str, Any]) -> None:
    """Stage 2 over a pool reads the full model's prefixes that stage 1 kept: the same scores as recomputing them
    (a memo of 0 bytes keeps nothing); another target never reads them; a kept prefix is copied, not consumed."""
    from remnant.latent.patching import PrefixMemo

    s = latent_states
    half = mix(s["full"], s["retain"], 0.5)
    s1 = stage1(s["full"], s["retain"], s["tokenizer"], EXAMPLES)
    assert s1.prefixes.bytes > 0  # stage 1 kept the prefixes it computed
    kept = [score_source(s["full"], half, s1).score for _ in range(2)]  # the second reads copies again
    fresh = stage1(s["full"], s["retain"], s["tokenizer"], EXAMPLES)
    object.__setattr__(fresh, "prefixes", PrefixMemo(max_bytes=0))
    assert kept[0] == kept[1] == score_source(s["full"], half, fresh).score
    assert fresh.prefixes.bytes == 0
    memo = PrefixMemo()
    ex = next(e for e in encode_examples(s["tokenizer"], EXAMPLES).examples if e.eval_start > 0)
    states = [source_states_many(half, [ex], [0, 1])[0]]
    fast_scores_many(s["full"], [ex], [states], [0, 1], memo)
    assert memo.get(s["full"], ex) is not None and memo.get(s["retain"], ex) is None
    f_full, f_rows = fast_scores_many(s["retain"], [ex], [states], [0, 1], memo)[
        0
    ]  # another target: its own prefix
    n_full, n_rows = naive_scores(s["retain"], ex, states, [0, 1])
    assert abs(f_full - n_full) < 1e-5
    assert torch.allclose(torch.tensor(f_rows), torch.tensor(n_rows), atol=1e-5, rtol=0)


@pytest.mark.parametrize("uds_compat", [False, True])
def test_source_states_read_together_equal_each_alone(
    latent_states: dict[str, Any], uds_compat: bool
) -> None:
    """Examples of different lengths right-padded into one forward give each example's own window states."""
    from remnant.latent.patching import source_states_many

    s = latent_states
    examples = encode_examples(s["tokenizer"], [*EXAMPLES, *EXTRA]).examples
    assert len({ex.eval_end for ex in examples}) > 1  # padding happens
    together = source_states_many(s["full"], examples, [0, 1], uds_compat=uds_compat, batch_size=4)
    for ex, states in zip(examples, together, strict=True):
        alone = source_states_many(s["full"], [ex], [0, 1], uds_compat=uds_compat)[0]
        for layer in (0, 1):
            assert states[layer].shape == (ex.eval_end - ex.eval_start, alone[layer].shape[-1])
            # float32 rounding at the scale of the states (the taught model's reach ~100)
            assert (states[layer] - alone[layer]).abs().max() <= 1e-6 * alone[layer].abs().max()


def test_fast_and_naive_uds_agree(latent_states: dict[str, Any]) -> None:
    s = latent_states
    half = mix(s["full"], s["retain"], 0.5)
    fast = uds(s["full"], s["retain"], half, s["tokenizer"], EXAMPLES, UDSConfig(fast=True))
    slow = uds(s["full"], s["retain"], half, s["tokenizer"], EXAMPLES, UDSConfig(fast=False))
    assert fast.score is not None and slow.score is not None
    assert abs(fast.score - slow.score) < 1e-5
    for a, b in zip(fast.examples, slow.examples, strict=True):
        assert max(abs(x - y) for x, y in zip(a.d2, b.d2, strict=True)) < 1e-5


def test_sanity_full_zero_retain_one(latent_states: dict[str, Any]) -> None:
    s = latent_states
    s1 = stage1(s["full"], s["retain"], s["tokenizer"], EXAMPLES)
    assert any(max(r) > 0.05 for r in s1.d1)  # the taught model has KE layers
    zero = score_source(s["full"], s["full"], s1)
    one = score_source(s["full"], s["retain"], s1)
    assert zero.n_scored >= 3 and one.n_scored == zero.n_scored
    assert zero.score == pytest.approx(0.0, abs=1e-6)
    assert all(abs(v) < 1e-5 for r in zero.examples for v in r.d2)  # hooks: no norm applied twice
    assert one.score == pytest.approx(1.0, abs=1e-6)
    half = score_source(s["full"], mix(s["full"], s["retain"], 0.5), s1)
    assert half.score is not None and 0.0 < half.score < 1.0
    for r in half.examples:
        assert r.uds is None or 0.0 <= r.uds <= 1.0


def test_uds_compat_reproduces_the_last_layer_bug(latent_states: dict[str, Any]) -> None:
    s = latent_states
    s1 = stage1(s["full"], s["retain"], s["tokenizer"], EXAMPLES, UDSConfig(uds_compat=True))
    res = score_source(s["full"], s["full"], s1, UDSConfig(uds_compat=True))
    first = [abs(r.d2[0]) for r in res.examples]
    last = [abs(r.d2[-1]) for r in res.examples]
    assert max(first) < 1e-5  # earlier blocks: hidden_states[l+1] is the block output
    assert max(last) > 1e-3  # last block: post-norm state patched into a pre-norm slot (§1.7)
    assert res.uds_compat


def test_stage1_cache_equals_fresh(latent_states: dict[str, Any], tmp_path: Path) -> None:
    s = latent_states
    fresh = stage1(s["full"], s["retain"], s["tokenizer"], EXAMPLES, cache_dir=tmp_path)
    files = list((tmp_path / "uds-stage1").glob("*.json"))
    assert len(files) == 1 and files[0].stem == fresh.key
    cached = stage1(s["full"], s["retain"], s["tokenizer"], EXAMPLES, cache_dir=tmp_path)
    assert cached.key == fresh.key and cached.d1 == fresh.d1 and cached.full_scores == fresh.full_scores
    # a different retain model or layer set is a different key, never a stale hit
    other = stage1(s["full"], s["full"], s["tokenizer"], EXAMPLES, cache_dir=tmp_path)
    assert other.key != fresh.key
    one_layer = stage1(
        s["full"], s["retain"], s["tokenizer"], EXAMPLES, UDSConfig(layers=(1,)), cache_dir=tmp_path
    )
    assert one_layer.key != fresh.key and len(one_layer.d1[0]) == 1
    # a poisoned cache entry is what gets read: proves stage 1 really comes from the cache
    import json

    data = json.loads(files[0].read_text())
    data["d1"] = [[9.0, 9.0] for _ in data["d1"]]
    files[0].write_text(json.dumps(data))
    assert stage1(s["full"], s["retain"], s["tokenizer"], EXAMPLES, cache_dir=tmp_path).d1[0] == (9.0, 9.0)


def test_no_retain_variant_is_labelled(latent_states: dict[str, Any]) -> None:
    s = latent_states
    same = uds_no_retain(s["full"], s["full"], s["tokenizer"], EXAMPLES)
    gone = uds_no_retain(s["full"], s["retain"], s["tokenizer"], EXAMPLES)
    assert same.measurement == "uds_no_retain" and same.retain_model is None and "[R]" in same.provenance
    assert same.score == pytest.approx(0.0, abs=1e-5)
    assert gone.score is not None and gone.score > 0.1


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(-3, 3, allow_nan=False), st.floats(-3, 3, allow_nan=False)),
        min_size=1,
        max_size=12,
    )
)
def test_aggregate_is_clipped_weighted_ratio(pairs: list[tuple[float, float]]) -> None:
    d1 = [a for a, _ in pairs]
    d2 = [b for _, b in pairs]
    got = aggregate_example(d1, d2, 0.05)
    ke = [i for i, v in enumerate(d1) if v > 0.05]
    if not ke:
        assert got is None
        return
    expect = sum(min(max(d2[i], 0.0), d1[i]) for i in ke) / sum(d1[i] for i in ke)
    assert got is not None and 0.0 <= got <= 1.0 + 1e-12
    assert got == pytest.approx(expect, rel=1e-9, abs=1e-12)


def test_aggregate_golden() -> None:
    # KE = layers 0 and 2 (Δ1 0.5 and 1.0); LER 0.4/0.5 = 0.8 and clip(2.0) = 1 → (0.4 + 1.0) / 1.5
    assert aggregate_example([0.5, 0.01, 1.0], [0.4, 5.0, 2.0]) == pytest.approx(1.4 / 1.5)
    assert aggregate_example([0.5, 1.0], [-1.0, 0.25]) == pytest.approx(0.25 / 1.5)
    assert aggregate_example([0.05, 0.0], [1.0, 1.0]) is None  # τ is strict


def test_an_audits_keeper_makes_stage_one_once_for_every_state_it_reads(
    latent_states: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The UDS audit reads stage 1 through its inputs' keeper: one keeper (an assessment's audit plan, a sweep
    worker) makes it once for every audited state, with the figures a fresh stage 1 gives; a new keeper makes it
    again."""
    from types import SimpleNamespace

    import remnant.latent as latent
    from remnant import registry
    from remnant.engine.audit_base import AuditInputs, Keeper
    from remnant.latent.block import Anchors

    s = latent_states
    made: list[str] = []
    real = latent.stage1

    def counted(*args: Any, **kwargs: Any) -> Any:
        made.append("stage1")
        return real(*args, **kwargs)

    monkeypatch.setattr(latent, "stage1", counted)
    audit = registry.create("audit", "uds", {"layers": [0, 1]})  # as a config gives them: a list
    refs = {
        "full": SimpleNamespace(model=s["full"], digest="f" * 64),
        "retain": SimpleNamespace(model=s["retain"], digest="r" * 64),
    }
    sources = [mix(s["full"], s["retain"], w) for w in (0.3, 0.7)]
    states = [
        SimpleNamespace(model=m, digest=f"{i}" * 64, role="post_removal") for i, m in enumerate(sources)
    ]

    def inputs(keep: Keeper) -> AuditInputs:
        return AuditInputs({"examples": EXAMPLES}, Anchors(), "removed", s["tokenizer"], None, keep)

    shared = Keeper()
    kept = [audit.read(state, refs, inputs(shared))[0][0] for state in states]
    assert made == ["stage1"]
    fresh = [audit.read(state, refs, inputs(Keeper()))[0][0] for state in states]
    assert made == ["stage1"] * 3
    assert kept == fresh and kept[0] != kept[1]
