"""J-Access (the J-Access paper, eqs. 3–6) and the logit lens: ranks, silent subsets, unclipped JOcc, no gradients."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from _jaccess_tiny import taught  # noqa: F401
from _latent_tiny import EXAMPLES, mix

from remnant.errors import ConfigError
from remnant.latent.inputs import encode_example
from remnant.latent.jaccess import (
    AccessConfig,
    AccessReadout,
    FirstPieceScreen,
    Probe,
    ProbeReadout,
    concept_token_ids,
    drop_generic,
    j_occ,
    make_probe,
    raw_access,
    read_access,
    read_access_many,
    read_probe,
    silent_set,
    token_hit_rates,
)
from remnant.latent.jacobian_lens import LensConfig, fit_lens
from remnant.latent.logit_lens import logit_lens_uds


def _readout(hits: dict[str, tuple[bool, bool]], lens: str = "jacobian", model: str = "m") -> AccessReadout:
    probes = [
        ProbeReadout(
            idx=i, hit=h, best_rank=1 if h else 99, occupancy=0.5 if h else 0.0, emitted=e, n_concepts=2
        )
        for i, (h, e) in hits.items()
    ]
    return AccessReadout(
        model=model, lens=lens, target_layer=1, layers=[0], positions="last 8", k=10, probes=probes
    )


def test_jocc_uses_the_audited_silent_subset_and_is_unclipped() -> None:
    # probe: (hit, emitted). The audited model emits on p4, so p4 is out of I(θ) for all three readouts.
    audited = _readout({"p1": (True, False), "p2": (True, False), "p3": (False, False), "p4": (True, True)})
    original = _readout({"p1": (True, True), "p2": (True, True), "p3": (True, True), "p4": (False, True)})
    retain = _readout({"p1": (False, False), "p2": (False, False), "p3": (True, False), "p4": (False, False)})
    assert silent_set(audited) == {"p1", "p2", "p3"}
    assert raw_access(audited, {"p1", "p2", "p3"}) == pytest.approx(2 / 3)
    res = j_occ(audited, original, retain)
    # (2/3 − 1/3) / (1 − 1/3) = 0.5; the original's own emissions do not shrink the subset (eq. 6)
    assert res.jocc == pytest.approx(0.5) and res.n_silent == 3
    over = j_occ(
        _readout({"p1": (True, False), "p2": (True, False)}),
        _readout({"p1": (True, False), "p2": (False, False)}),
        _readout({"p1": (False, False), "p2": (False, False)}),
    )
    assert (
        over.jocc == pytest.approx(2.0) and over.jocc_clipped == 1.0
    )  # beyond the original anchor: unclipped
    tie = j_occ(audited, retain, retain)
    assert tie.jocc is None  # anchors tie: undefined, not 0


def test_retain_gap_is_the_paired_difference_on_the_silent_probes() -> None:
    """retain_gap = A(θ) − A(θ_g) on I(θ), with Newcombe's paired interval over the same probes: the table is
    counted probe by probe (p1 hit by both, p2 by θ only, p3 by θ_g only; p4 is not silent and not counted)."""
    from remnant.stats import newcombe_paired_difference

    audited = _readout({"p1": (True, False), "p2": (True, False), "p3": (False, False), "p4": (True, True)})
    original = _readout({p: (True, True) for p in ("p1", "p2", "p3", "p4")})
    retain = _readout({"p1": (True, False), "p2": (False, False), "p3": (True, False), "p4": (False, False)})
    res = j_occ(audited, original, retain)
    d, lo, hi = newcombe_paired_difference(1, 1, 1, 0)
    assert res.retain_gap == pytest.approx(0.0) == d
    assert res.retain_gap_ci95 == pytest.approx((lo, hi)) and lo < 0 < hi
    empty = j_occ(_readout({"p1": (True, True)}), original, retain)  # nothing silent: no gap, no interval
    assert empty.retain_gap is None and empty.retain_gap_ci95 is None


def test_jocc_records_whose_lens_each_model_was_read_through() -> None:
    hits = {"p1": (True, False), "p2": (False, False)}
    own = [_readout(hits, model=m).model_copy(update={"lens_model": m}) for m in ("u", "o", "r")]
    assert j_occ(*own).decoder == "own"
    fixed = [_readout(hits, model=m).model_copy(update={"lens_model": "o"}) for m in ("u", "o", "r")]
    assert j_occ(*fixed).decoder == "fixed"  # one shared J (the original model's): a fixed decoder
    mixed = [own[0], fixed[1], fixed[2].model_copy(update={"lens_model": "u"})]
    assert j_occ(*mixed).decoder == "mixed"
    logit = [_readout(hits, lens="logit", model=m) for m in ("u", "o", "r")]
    assert j_occ(*logit).decoder == "logit"


def test_concept_tokens_exclude_prompt_tokens(tiny_llama: Any) -> None:
    tok = tiny_llama.tokenizer
    prompt = list(tok("Question: Where does Zorvak live?\nAnswer:")["input_ids"])
    ids = concept_token_ids(tok, ["Zorvak Telumi"], prompt)
    assert ids and not ids & set(prompt)
    everything = concept_token_ids(tok, ["Zorvak Telumi"], [])
    assert ids < everything  # the prompt's own name tokens were dropped (copying is no access)


def test_first_piece_screen_makes_first_token_concept_sets_distinct(tiny_llama: Any) -> None:
    """A pack minted through the screen gives every town a C_i of multi-character tokens no other town shares."""
    from remnant.packs import ClassDSpec, mint_class_d

    tok = tiny_llama.tokenizer
    screen = FirstPieceScreen(tok, min_chars=1)  # the tiny BPE has few long first pieces; SmolLM2's take 3
    pack = mint_class_d(
        ClassDSpec(entities=4, controls=1, seed=5, distinct_towns=True, general=False, link_options=2),
        accept_town=screen,
        town_screen=screen.description,
    )
    towns = [e.attributes["home_town"] for e in pack.manifest.entities]
    sets = [concept_token_ids(tok, [t], []) for t in towns]
    assert all(len(c) == 2 for c in sets)  # the bare and the spaced first token
    for i, a in enumerate(sets):
        assert all(not a & b for b in sets[i + 1 :])  # no town's concept token is another's
    assert pack.manifest.design["attributes"]["home_town"]["screen"] == screen.description
    fresh = FirstPieceScreen(tok, min_chars=2)  # the screen's verdicts: a one-letter first piece, a taken one
    assert not fresh("Qzx") and fresh.taken == set()
    long = next(t for t in towns if min(len(tok.decode([i]).strip()) for i in fresh.first_ids(t)) >= 2)
    assert fresh(long) and not fresh(long)


def test_logit_lens_rank_at_last_block_equals_model_rank(taught: dict[str, Any]) -> None:  # noqa: F811
    s = taught
    tok, full = s["tokenizer"], s["full"]
    enc = encode_example(tok, EXAMPLES[0], "raw")
    assert enc is not None
    prompt = list(enc.input_ids[: enc.eval_start + 1])
    probe = make_probe(tok, "town", prompt, ["Vessiburg"])
    hit, best, occ = read_probe(full, probe, [1], None, AccessConfig(positions=1, k=1))
    logits = full(input_ids=torch.tensor([prompt])).logits[0, -1]
    ranks = [int(1 + (logits > logits[t]).sum()) for t in probe.concept_ids]
    assert best == min(ranks) and hit == (min(ranks) <= 1) and occ == float(hit)
    assert best == 1  # the taught model predicts the entity


def test_j_access_end_to_end_tiny(taught: dict[str, Any]) -> None:  # noqa: F811
    s = taught
    tok = s["tokenizer"]
    probes = []
    for ex in EXAMPLES[:3]:
        enc = encode_example(tok, ex, "raw")
        assert enc is not None
        probes.append(make_probe(tok, ex.idx, enc.input_ids[: enc.eval_start + 1], [ex.entity]))
    lens_prompts = [list(e.input_ids) for e in (encode_example(tok, ex, "raw") for ex in EXAMPLES) if e]
    cfg = LensConfig(target_layer=1, skip_first=2, dim_batch=16)
    acfg = AccessConfig(layers=(0,), positions=2, k=5, max_new_tokens=8)
    reads = {}
    for name in ("full", "retain"):
        lens = fit_lens(s[name], lens_prompts, cfg)
        reads[name] = read_access(s[name], tok, probes, lens, acfg)
        assert reads[name].lens == "jacobian" and reads[name].target_layer == 1
    assert all(p.emitted for p in reads["full"].probes[:2])  # the taught model says the entity
    assert not any(p.emitted for p in reads["retain"].probes)
    res = j_occ(reads["retain"], reads["full"], reads["retain"])
    assert not probes[2].concept_ids  # "1984" is digits only: no concept token, so never in I(θ)
    assert res.n_silent == 2 and (res.jocc is None or res.jocc == pytest.approx(0.0))
    ll = read_access(s["full"], tok, probes, None, acfg)
    assert ll.lens == "logit"


def test_read_access_many_equals_one_readout_per_variant(taught: dict[str, Any]) -> None:  # noqa: F811
    """The shared-pass reader (one forward per prompt for every concept-set variant and decoder) gives exactly the
    readouts of separate read_access calls."""
    s = taught
    tok = s["tokenizer"]
    encs = [encode_example(tok, ex, "raw") for ex in EXAMPLES]
    probes = [
        make_probe(tok, ex.idx, e.input_ids[: e.eval_start + 1], [ex.entity])
        for ex, e in zip(EXAMPLES, encs, strict=True)
        if e is not None
    ]
    lens = fit_lens(
        s["full"], [list(e.input_ids) for e in encs if e], LensConfig(target_layer=1, skip_first=2)
    )
    fewer = [
        Probe(p.idx, p.prompt_ids, frozenset(sorted(p.concept_ids)[:1])) for p in probes
    ]  # a C_i variant
    acfg = AccessConfig(band=(0.0, 0.9), positions=3, k=40, max_new_tokens=6)
    model = mix(s["full"], s["retain"], 0.5)
    variants = [(probes, lens), (fewer, lens), (probes, None), (fewer, None)]
    many = read_access_many(model, tok, variants, acfg)
    one = [read_access(model, tok, ps, ln, acfg) for ps, ln in variants]
    assert [m.model_dump() for m in many] == [o.model_dump() for o in one]
    for m, (ps, ln) in zip(many, variants, strict=True):  # and the per-probe reference path, layer by layer
        naive = [read_probe(model, p, m.layers, ln, acfg) for p in ps]
        assert naive == [(r.hit, r.best_rank, r.occupancy) for r in m.probes]
    assert any(p.hit for m in many for p in m.probes) and any(not p.hit for m in many for p in m.probes)
    with pytest.raises(ValueError, match="same prompts"):
        read_access_many(model, tok, [(probes, lens), (probes[::-1], lens)], acfg)


def test_readout_carries_no_gradient(taught: dict[str, Any]) -> None:  # noqa: F811
    from remnant.latent.jacobian_lens import readout

    model = s_model = taught["full"]
    h = torch.randn(2, 64, generator=torch.Generator().manual_seed(1), requires_grad=True)
    assert all(p.requires_grad for p in s_model.parameters())
    assert not readout(model, h).requires_grad  # never a training signal (the J-Access paper, Test 3)


def test_logit_lens_uds_sanity(latent_states: dict[str, Any]) -> None:
    s = latent_states
    zero = logit_lens_uds(s["full"], s["retain"], s["full"], s["tokenizer"], EXAMPLES)
    one = logit_lens_uds(s["full"], s["retain"], s["retain"], s["tokenizer"], EXAMPLES)
    mid = logit_lens_uds(s["full"], s["retain"], mix(s["full"], s["retain"], 0.5), s["tokenizer"], EXAMPLES)
    assert zero.measurement == "logit_lens_uds" and zero.n_scored >= 1
    assert zero.score == pytest.approx(0.0) and one.score == pytest.approx(1.0)
    assert mid.score is not None and 0.0 <= mid.score <= 1.0


def test_token_hit_rates_equal_per_token_probe_hits(taught: dict[str, Any]) -> None:  # noqa: F811
    """The decoy baseline (docs/latent.md) equals eq. 3 read token by token and prompt by prompt."""
    s = taught
    tok, model = s["tokenizer"], s["full"]
    prompts = []
    for ex in EXAMPLES[:4]:
        enc = encode_example(tok, ex, "raw")
        assert enc is not None
        prompts.append(tuple(enc.input_ids[: enc.eval_start + 1]))
    lens = fit_lens(model, [list(p) for p in prompts], LensConfig(target_layer=1, skip_first=2, dim_batch=16))
    with (
        torch.no_grad()
    ):  # the model's own next-token picks at the read positions: tokens some cell ranks first
        picks = {
            int(t) for p in prompts for t in model(input_ids=torch.tensor([p])).logits[0, -3:].argmax(-1)
        }
    tokens = sorted({t for p in prompts for t in p} | set(range(5, 25)) | picks)
    for lens_ in (lens, None):
        seen: list[float] = []
        for k in (1, 5):
            acfg = AccessConfig(layers=(0, 1) if lens_ is None else (0,), positions=3, k=k)
            rates = token_hit_rates(model, prompts, tokens, lens_, acfg)
            layers = [0, 1] if lens_ is None else [0]
            for t in tokens:
                naive = [
                    read_probe(model, Probe("d", p, frozenset([t])), layers, lens_, acfg)[0] for p in prompts
                ]
                assert rates[t] == pytest.approx(sum(naive) / len(prompts))
            seen += rates.values()
        assert any(r > 0 for r in seen) and any(r < 1 for r in seen)  # some tokens hit, not all everywhere


def test_drop_generic_keeps_probes_and_only_specific_tokens() -> None:
    probes = [Probe("a", (1, 2), frozenset({10, 11})), Probe("b", (1, 3), frozenset({12}))]
    kept = drop_generic(probes, {10: 0.9, 11: 0.1, 12: 0.6}, 0.5)
    assert [p.idx for p in kept] == ["a", "b"]
    assert kept[0].concept_ids == frozenset({11}) and kept[1].concept_ids == frozenset()


def test_j_access_audit_decoders_and_generic_filter(taught: dict[str, Any]) -> None:  # noqa: F811
    """The fixed-band variant (``band_rule="fixed"``: remnant's earlier reading of the depth fractions) with both
    decoders, and the generic-token filter, against readouts assembled by hand."""
    from remnant import registry

    s = taught
    tok = s["tokenizer"]
    encs = [encode_example(tok, ex, "raw") for ex in EXAMPLES]
    prompts = [tuple(e.input_ids[: e.eval_start + 1]) for e in encs if e is not None]
    probes = [make_probe(tok, ex.idx, p, [ex.entity]) for ex, p in zip(EXAMPLES[:3], prompts, strict=False)]
    lens_prompts = [list(e.input_ids) for e in encs if e is not None]
    params = {
        "target_layer": 1,
        "skip_first": 2,
        "dim_batch": 16,
        "positions": 2,
        "k": 5,
        "max_new_tokens": 8,
        "band": (0.0, 0.9),  # block 0 of the 2-block model
        "band_rule": "fixed",
    }
    mid = mix(s["full"], s["retain"], 0.5)
    fixed = registry.create("audit", "j_access", {**params, "decoder": "fixed"})
    own = registry.create("audit", "j_access", {**params, "decoder": "own"})
    assert fixed.spec.params["decoder"] == "fixed" and fixed.adjudicating is False
    r_fixed = fixed.run(mid, s["full"], s["retain"], tok, probes, lens_prompts)
    r_own = own.run(mid, s["full"], s["retain"], tok, probes, lens_prompts)
    assert r_fixed.decoder == "fixed" and r_own.decoder == "own"
    with pytest.raises(ConfigError, match="decoy prompts"):
        registry.create("audit", "j_access", {**params, "generic_max": 0.5}).run(
            mid, s["full"], s["retain"], tok, probes, lens_prompts
        )
    # the filter equals dropping, by hand, the tokens the original model's lens surfaces on the decoys; k is the
    # smallest at which some but not all concept tokens surface there (which k that is depends on the tiny model's
    # float rounding, so it is found, not fixed: at k = 5 none surfaced on one machine)
    decoys = prompts[3:]
    concepts = sorted(set().union(*(p.concept_ids for p in probes)))

    def audit(k: int) -> Any:
        return registry.create(
            "audit", "j_access", {**params, "k": k, "decoder": "fixed", "generic_max": 0.0}
        )

    lens = fit_lens(s["full"], lens_prompts, audit(5).lens)

    def n_generic(k: int) -> int:
        return sum(
            r > 0 for r in token_hit_rates(s["full"], decoys, concepts, lens, audit(k).access).values()
        )

    k = next(k for k in (5, 10, 20, 50, 100, 200) if 0 < n_generic(k) < len(concepts))
    filt = audit(k)
    got = filt.run(mid, s["full"], s["retain"], tok, probes, lens_prompts, decoys=decoys)
    kept = drop_generic(probes, token_hit_rates(s["full"], decoys, concepts, lens, filt.access), 0.0)
    want = j_occ(*(read_access(m, tok, kept, lens, filt.access) for m in (mid, s["full"], s["retain"])))
    assert got.model_dump() == want.model_dump()
    assert any(a.concept_ids != b.concept_ids for a, b in zip(probes, kept, strict=True))  # it dropped some
    with pytest.raises(ConfigError, match="decoder"):
        registry.create("audit", "j_access", {"decoder": "mine"})
    assert r_fixed.band_selection is None and r_fixed.probe_level is None  # fixed band, caller-named C_i
