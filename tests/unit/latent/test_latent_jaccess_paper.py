"""J-Access as the J-Access paper runs it: identity probes that do not name the entity, C_i from the name, one lens fitted on
the original model, the band chosen on held-out calibration entities, Holm across audited models.

Every number the audit reports is checked against a naive computation from the paper's definitions in the test:
hidden states from ``output_hidden_states``, the lens matrix applied by hand, the final RMSNorm and unembedding
written out, ranks counted, greedy continuations decoded token by token, eqs. 3–6, the exact McNemar tail and
Holm's step-down rule.
"""

from __future__ import annotations

import copy
import inspect
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from _jaccess_tiny import taught  # noqa: F401
from _latent_tiny import EXAMPLES, mix

from remnant import registry
from remnant.errors import ConfigError, PackError
from remnant.latent.inputs import encode_example
from remnant.latent.jaccess import (
    AccessConfig,
    BandCandidate,
    JAccessResult,
    Probe,
    mcnemar_greater,
)
from remnant.latent.jaccess_band import BandRule, candidate_bands, choose_band, select_band
from remnant.latent.jaccess_grid import holm_grid
from remnant.latent.jaccess_probes import (
    ConceptRule,
    build_identity_probes,
    check_probe_text,
    identity_concept_ids,
    identity_probe,
    identity_probes,
    mentioned_piece,
    name_pieces,
)
from remnant.latent.jacobian_lens import LensConfig, fit_lens
from remnant.models.prompts import PromptFormat
from remnant.packs import ClassDSpec, mint_class_d
from remnant.packs.schema import Pack

SMOLLM2 = Path.home() / ".cache" / "remnant" / "models" / "smollm2-135m-instruct"
RAW = PromptFormat("raw")
TINY_RULE = ConceptRule(
    min_chars=1
)  # the tiny BPE splits invented names into letters; SmolLM2 uses the default


@pytest.fixture(scope="module")
def pack() -> Pack:
    return mint_class_d(
        ClassDSpec(entities=12, controls=2, seed=3, general=False, link_options=2, distinct_towns=True)
    )


# ---------------------------------------------------------------------------------------------- probes and C_i


def test_name_pieces_and_whole_word_mentions() -> None:
    assert name_pieces("Hsiao Yun-Hwa") == ("Hsiao Yun-Hwa", "Hsiao", "Yun-Hwa", "Yun", "Hwa")
    assert name_pieces("Ludwig van Beethoven") == ("Ludwig van Beethoven", "Ludwig", "Beethoven")
    assert name_pieces("J. R. Tolkien") == ("J. R. Tolkien", "Tolkien")  # initials are no pieces
    assert mentioned_piece("Where does ZORVAK's sister live?", "Zorvak Telumi") == "Zorvak"
    assert mentioned_piece("Who was born in Telumiford?", "Zorvak Telumi") is None  # not a whole word
    assert mentioned_piece("Who is Hwa?", "Hsiao Yun-Hwa") == "Hwa"
    with pytest.raises(ConfigError, match="Telumi") as err:
        check_probe_text("Name the town telumi comes from.", "Zorvak Telumi")
    assert err.value.requirement == "D-2.1"


def test_builder_writes_attribute_probes_that_do_not_name_the_person(pack: Pack) -> None:
    built = build_identity_probes(pack)
    people = pack.manifest.entities
    forget_probe = [e for e in people if e.role == "forget_probe"]
    assert built.refused == () and len(built.probes) == 3 * len(forget_probe) == 9
    assert len({p.id for p in built.probes}) == len(built.probes)
    for p in built.probes:
        ent = pack.entity(p.entity_id)
        assert ent.role == "forget_probe"
        words = {w.strip("?.,'").lower() for w in p.text.split()}
        assert not words & {w.lower() for w in ent.name.split()}  # no piece of the name, as a word
        for attr in p.attributes:  # every attribute it declares is in the text ...
            assert ent.attributes[attr] in p.text
        same = [e for e in people if all(e.attributes[a] == ent.attributes[a] for a in p.attributes)]
        assert same == [ent]  # ... and together they single the person out among all the pack's people
    calibration = build_identity_probes(pack, roles=("forget_relearn",))
    assert {p.entity_id for p in calibration.probes}.isdisjoint({p.entity_id for p in built.probes})


def test_builder_refuses_a_probe_that_names_the_person_or_fits_two(pack: Pack) -> None:
    people = list(pack.manifest.entities)
    a, b = [i for i, e in enumerate(people) if e.role == "forget_probe"][:2]
    first = people[a].name.split()[0]
    named = {**people[a].attributes, "employer": f"{first} Systems"}  # the employer carries a name piece
    shared = {
        "occupation": "baker",
        "home_town": "Twinford",
        "employer": "Twin Freight",
    }  # identity.0's three
    twin = {**people[b].attributes, **shared}
    other = next(i for i, e in enumerate(people) if e.role == "retain")
    people[a] = people[a].model_copy(update={"attributes": named})
    people[b] = people[b].model_copy(update={"attributes": twin})
    people[other] = people[other].model_copy(update={"attributes": {**people[other].attributes, **shared}})
    edited = Pack(pack.manifest.model_copy(update={"entities": people}), pack.items)
    built = build_identity_probes(edited)
    refused = {(r.entity_id, r.template_id): r.reason for r in built.refused}
    ida, idb = people[a].id, people[b].id
    assert set(refused) == {(ida, "identity.0"), (ida, "identity.1"), (idb, "identity.0")}
    assert refused[(ida, "identity.0")].startswith(f"names the entity: contains {first!r}")
    assert refused[(idb, "identity.0")].startswith("ambiguous: 2 people")
    assert {p.id for p in built.probes} >= {f"{ida}.identity.2", f"{idb}.identity.1", f"{idb}.identity.2"}
    with pytest.raises(ConfigError, match="puts the name") as err:
        build_identity_probes(pack, templates={"bad": ((), "Who is {name}?")})
    assert err.value.requirement == "D-2.1"
    with pytest.raises(PackError, match="no people"):
        build_identity_probes(pack, roles=("nobody",))


def test_rendered_prompt_that_names_the_entity_is_refused(pack: Pack, tiny_llama: Any) -> None:
    tok = tiny_llama.tokenizer
    probes = build_identity_probes(pack).probes
    name = pack.entity(probes[0].entity_id).name
    leaky = PromptFormat("raw", system_prompt=f"You are talking about {name}.")
    with pytest.raises(ConfigError, match="contains") as err:
        identity_probes(tok, probes[:1], pack, leaky)
    assert err.value.requirement == "D-2.1"
    with pytest.raises(ConfigError):
        identity_probe(tok, "x", tok(f"Where is {name.split()[1]} from?")["input_ids"], name)
    (ok,) = identity_probes(tok, probes[:1], pack, RAW, TINY_RULE)
    assert ok.entity == probes[0].entity_id and ok.level == TINY_RULE.describe() and ok.concept_ids


def _decoded(tok: Any, ids: frozenset[int]) -> set[str]:
    return {tok.decode([i]) for i in ids}


def test_identity_concept_tokens_on_smollm2() -> None:
    """C_i on SmolLM2's tokenizer: every token of the name and its pieces, bare and with a leading space, kept at
    >= 3 characters. Invented names split into short pieces (" Z", "or", "v", "ak"), which the cut drops."""
    if not (SMOLLM2 / "tokenizer.json").exists():
        pytest.skip("SmolLM2's tokenizer is not cached")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(SMOLLM2)
    assert _decoded(tok, identity_concept_ids(tok, "Zorvak Telumi", [])) == {" Tel", "Tel", "umi"}
    assert _decoded(tok, identity_concept_ids(tok, "Vraeni Tholusk", [])) == {"eni", "usk"}
    assert _decoded(tok, identity_concept_ids(tok, "Hsiao Yun-Hwa", [])) == {" Yun", "iao"}  # hyphen pieces
    loose = identity_concept_ids(tok, "Zorvak Telumi", [], ConceptRule(min_chars=1))
    assert _decoded(tok, loose) == {" Tel", "Tel", "umi", " Z", "Z", "ak", "v"}  # "or" is a stop word
    first = identity_concept_ids(tok, "Zorvak Telumi", [], ConceptRule(min_chars=1, all_tokens=False))
    assert _decoded(tok, first) == {" Z", "Z", " Tel", "Tel"}
    prompt = tok("Who grew up in Bumiholt?", add_special_tokens=False)["input_ids"]
    umi = set(tok("umi", add_special_tokens=False)["input_ids"])
    if umi <= set(prompt):  # the prompt's own tokens are never concept tokens (a copy is no access)
        assert _decoded(tok, identity_concept_ids(tok, "Zorvak Telumi", prompt)) == {" Tel", "Tel"}
    assert not identity_concept_ids(
        tok, "Zorvak Telumi", list(identity_concept_ids(tok, "Zorvak Telumi", []))
    )


def test_identity_concept_tokens_on_the_tiny_tokenizer(tiny_llama: Any) -> None:
    """The rule, token by token, on the tiny BPE (its corpus holds "Zorvak" and " Telumi" whole)."""
    tok = tiny_llama.tokenizer
    assert _decoded(tok, identity_concept_ids(tok, "Zorvak Telumi", [])) == {"Zorvak", " Telumi", "umi"}
    prompt = tok("Zorvak lives here", add_special_tokens=False)["input_ids"]
    assert _decoded(tok, identity_concept_ids(tok, "Zorvak Telumi", prompt)) == {" Telumi", "umi"}
    for rule in (ConceptRule(), ConceptRule(min_chars=2), TINY_RULE):
        got = identity_concept_ids(tok, "Vraeni Tholusk", [], rule)
        want = {
            t
            for piece in name_pieces("Vraeni Tholusk")
            for variant in (piece, " " + piece)
            for t in tok(variant, add_special_tokens=False)["input_ids"]
            if len(tok.decode([t]).strip()) >= rule.min_chars
            and tok.decode([t]).strip().lower() not in {"a", "the", "in", "of", "or", "is"}
        }
        assert got == want
    assert not identity_concept_ids(tok, "Vraeni Tholusk", [])  # no token of 3+ characters: an empty C_i


# ------------------------------------------------------------------------------------------- numbers by hand


def _hand_logits(
    model: Any, ids: Sequence[int], layer: int, matrix: torch.Tensor, positions: int
) -> torch.Tensor:
    """z = W_U · RMSNorm(J h) for the last ``positions`` block-``layer`` outputs, written out (the J-Access paper eq. 2).

    h is taken by a plain forward hook on the decoder block (``output_hidden_states`` would make this
    transformers version leave its own recording hooks on the shared model)."""
    store: dict[str, torch.Tensor] = {}

    def keep(_m: Any, _i: Any, out: Any) -> None:
        store["h"] = out[0] if isinstance(out, tuple) else out

    handle = model.model.layers[layer].register_forward_hook(keep)
    try:
        with torch.no_grad():
            model(input_ids=torch.tensor([list(ids)]))
    finally:
        handle.remove()
    with torch.no_grad():
        h = store["h"][0, -positions:].float()
        x = h @ matrix.float().T
        norm = model.model.norm
        xn = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon) * norm.weight.float()
        z: torch.Tensor = xn @ model.lm_head.weight.float().T
        return z


def _hand_hit(model: Any, probe: Probe, layers: Sequence[int], lens: Any, k: int, positions: int) -> bool:
    """Eq. 3: some concept token of rank <= k at some band layer and readout position."""
    for layer in layers:
        z = _hand_logits(model, probe.prompt_ids, layer, lens.matrices[layer], positions)
        for t in probe.concept_ids:
            if (1 + (z > z[:, t : t + 1]).sum(dim=1)).min() <= k:
                return True
    return False


def _hand_greedy(model: Any, ids: Sequence[int], n: int) -> list[int]:
    eos = model.generation_config.eos_token_id
    stop = set(eos if isinstance(eos, list) else [eos])
    seq, out = list(ids), []
    with torch.no_grad():
        for _ in range(n):
            nxt = int(model(input_ids=torch.tensor([seq])).logits[0, -1].argmax())
            out.append(nxt)
            seq.append(nxt)
            if nxt in stop:
                break
    return out


def _hand_holm(p: list[float]) -> list[float]:
    order = sorted(range(len(p)), key=lambda i: p[i])
    adjusted, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def _lens_prompts(tok: Any) -> list[list[int]]:
    return [list(e.input_ids) for e in (encode_example(tok, ex, "raw") for ex in EXAMPLES) if e is not None]


#: the 2-block tiny model: target block 1, so block 0 is the only source layer (band 0-0.9 of depth holds it)
PARAMS = {
    "target_layer": 1,
    "skip_first": 2,
    "dim_batch": 16,
    "positions": 3,
    "max_new_tokens": 6,
    "band": (0.0, 0.9),
}


def test_jocc_and_holm_by_hand_from_lens_matrix_and_hidden_states(
    taught: dict[str, Any],  # noqa: F811
    pack: Pack,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The paper's audit (defaults: fixed decoder fitted once on θ_0, calibrated band) over three audited models,
    against eqs. 3–6, the McNemar tail and Holm computed here from the lens matrix and the hidden states."""
    import remnant.latent.jaccess_audit as ja

    s = taught
    tok, full, retain = s["tokenizer"], s["full"], s["retain"]
    probes = identity_probes(tok, build_identity_probes(pack).probes, pack, RAW, TINY_RULE)
    calibration = identity_probes(
        tok, build_identity_probes(pack, roles=("forget_relearn",)).probes, pack, RAW, TINY_RULE
    )
    audited = {f"mix{w}": mix(full, retain, w) for w in (0.25, 0.5, 0.75)}
    lens = fit_lens(full, _lens_prompts(tok), LensConfig(target_layer=1, skip_first=2, dim_batch=16))
    fits: list[int] = []

    def counted(*a: Any, **kw: Any) -> Any:
        fits.append(1)
        return fit_lens(*a, **kw)

    monkeypatch.setattr(ja, "fit_lens", counted)

    def hand(k: int) -> dict[str, Any]:
        hits = {
            name: [_hand_hit(m, p, [0], lens, k, 3) for p in probes]
            for name, m in {**audited, "original": full, "retain": retain}.items()
        }
        out: dict[str, Any] = {"hits": hits}
        for name, m in audited.items():
            said = [any(t in p.concept_ids for t in _hand_greedy(m, p.prompt_ids, 6)) for p in probes]
            silent = [i for i, p in enumerate(probes) if not said[i] and p.concept_ids]
            acc = {n: sum(hits[n][i] for i in silent) / len(silent) for n in (name, "original", "retain")}
            b = sum(hits[name][i] and not hits["retain"][i] for i in silent)
            c = sum(hits["retain"][i] and not hits[name][i] for i in silent)
            p_value = sum(math.comb(b + c, j) for j in range(b, b + c + 1)) / 2 ** (b + c)
            denom = acc["original"] - acc["retain"]
            jocc = (acc[name] - acc["retain"]) / denom if denom else None
            out[name] = {"silent": len(silent), "access": acc, "p": p_value, "jocc": jocc}
        return out

    # k: the smallest at which JOcc is defined for every model and not the same for all of them, and some
    # p-value is below 1 (found, not fixed: it depends on the tiny model's float rounding)
    def varied(w: dict[str, Any]) -> bool:
        joccs = [w[n]["jocc"] for n in audited]
        return None not in joccs and len(set(joccs)) > 1 and min(w[n]["p"] for n in audited) < 1

    k, want = next((k, w) for k in (5, 10, 20, 40, 80, 160) if varied(w := hand(k)))
    audit = registry.create("audit", "j_access", {**PARAMS, "k": k})
    assert audit.decoder == "fixed" and audit.band_rule == "calibrated"
    grid = audit.run_many(audited, full, retain, tok, probes, _lens_prompts(tok), calibration=calibration)
    assert len(fits) == 1  # the lens is fitted once, on the original model, for the calibration and all reads
    adjusted = _hand_holm([want[n]["p"] for n in audited])
    for row, name, p_holm in zip(grid.rows, audited, adjusted, strict=True):
        r, w = row.result, want[name]
        assert row.label == name and r.decoder == "fixed" and r.layers == [0]
        assert r.n_silent == w["silent"] and r.n_probes == len(probes)
        assert r.access_audited == pytest.approx(w["access"][name])
        assert r.access_original == pytest.approx(w["access"]["original"])
        assert r.access_retain == pytest.approx(w["access"]["retain"])
        assert r.jocc == pytest.approx(w["jocc"])
        assert r.p_above_retain == pytest.approx(w["p"]) and row.p_holm == pytest.approx(p_holm)
        assert row.significant == (p_holm < 0.05)
        assert r.probe_level == TINY_RULE.describe() and r.band_selection is not None
    assert (
        grid.n_tested == 3 and grid.lens_model == lens.model == grid.rows[0].result.band_selection.lens_model
    )
    # the band record: one candidate (block 0, the only source layer), its gap counted by hand on calibration
    sel = grid.rows[0].result.band_selection
    cal = [p for p in calibration if p.concept_ids]
    a_o = sum(_hand_hit(full, p, [0], lens, k, 3) for p in cal) / len(cal)
    a_r = sum(_hand_hit(retain, p, [0], lens, k, 3) for p in cal) / len(cal)
    assert sel.chosen == [0] and sel.gap == pytest.approx(a_o - a_r) and sel.n_calibration_probes == len(cal)
    assert sel.calibration_entities == sorted({p.entity for p in calibration if p.entity})
    # a lens given (fitted once elsewhere on the reference model) is used as is: no fit, the same figures
    again = audit.run_many(
        audited, full, retain, tok, probes, (), calibration=calibration, lens=lens
    ).model_dump()
    assert len(fits) == 1 and again == grid.model_dump()


def test_refit_variant_fits_every_model_and_is_named(
    taught: dict[str, Any],  # noqa: F811
    pack: Pack,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import remnant.latent.jaccess_audit as ja

    s = taught
    tok, full, retain = s["tokenizer"], s["full"], s["retain"]
    probes = identity_probes(tok, build_identity_probes(pack).probes, pack, RAW, TINY_RULE)
    fits: list[Any] = []

    def counted(model: Any, *a: Any, **kw: Any) -> Any:
        fits.append(model)
        return fit_lens(model, *a, **kw)

    monkeypatch.setattr(ja, "fit_lens", counted)
    audited = {"a": mix(full, retain, 0.3), "b": mix(full, retain, 0.6)}
    refit = registry.create("audit", "j_access_refit", {**PARAMS, "k": 20, "band_rule": "fixed"})
    grid = refit.run_many(audited, full, retain, tok, probes, _lens_prompts(tok))
    assert refit.decoder == "own" and {r.result.decoder for r in grid.rows} == {"own"}
    assert len(fits) == 4 and {id(m) for m in fits} == {id(full), id(retain), *map(id, audited.values())}
    assert grid.lens_model is None  # no one lens read every model
    # the same readouts by hand-assembled parts: each model through its own lens
    from remnant.latent.jaccess import j_occ, read_access

    cfg = refit.access
    reads = {
        n: read_access(m, tok, probes, fit_lens(m, _lens_prompts(tok), refit.lens), cfg)
        for n, m in {**audited, "o": full, "r": retain}.items()
    }
    for row in grid.rows:
        want = j_occ(reads[row.label], reads["o"], reads["r"])
        assert row.result.model_dump(exclude={"probe_level"}) == want.model_dump(exclude={"probe_level"})


def test_defaults_are_the_papers_and_misuse_is_refused(taught: dict[str, Any], pack: Pack) -> None:  # noqa: F811
    audit = registry.create("audit", "j_access")
    p = audit.spec.params
    assert (p["decoder"], p["band_rule"], p["k"], audit.spec.version) == ("fixed", "calibrated", 10, "2.0")
    refit = registry.get("audit", "j_access_refit")
    base = inspect.signature(registry.get("audit", "j_access").__init__).parameters
    mine = inspect.signature(refit.__init__).parameters
    assert [n for n in base if n != "decoder"] == list(mine)  # the variant differs in the decoder only
    assert all(base[n].default == mine[n].default for n in mine)
    s = taught
    tok = s["tokenizer"]
    probes = identity_probes(tok, build_identity_probes(pack).probes, pack, RAW, TINY_RULE)
    with pytest.raises(ConfigError, match="calibration probes") as err:
        registry.create("audit", "j_access", PARAMS).run(
            s["full"], s["full"], s["retain"], tok, probes, [[1] * 9]
        )
    assert err.value.requirement == "C-H7"
    with pytest.raises(ConfigError, match="not audited"):  # calibration about an audited entity
        registry.create("audit", "j_access", PARAMS).run(
            s["full"], s["full"], s["retain"], tok, probes, _lens_prompts(tok), calibration=probes[:2]
        )
    with pytest.raises(ConfigError, match="name no entity"):
        unnamed = [Probe("u", probes[0].prompt_ids + (5,), probes[0].concept_ids)]
        registry.create("audit", "j_access", PARAMS).run(
            s["full"], s["full"], s["retain"], tok, probes, _lens_prompts(tok), calibration=unnamed
        )
    with pytest.raises(ConfigError, match="band_rule"):
        registry.create("audit", "j_access", {"band_rule": "best"})
    lens = fit_lens(s["full"], _lens_prompts(tok), LensConfig(target_layer=1, skip_first=2))
    with pytest.raises(
        ConfigError, match="fixed decoder"
    ):  # refitting and a given lens contradict each other
        registry.create("audit", "j_access_refit", PARAMS).run(
            s["full"], s["full"], s["retain"], tok, probes, lens=lens
        )


def test_mcnemar_tail_by_hand() -> None:
    assert mcnemar_greater(5, 0) == pytest.approx(1 / 32)
    assert mcnemar_greater(3, 1) == pytest.approx((4 + 1) / 16)
    assert mcnemar_greater(0, 2) == 1.0 and mcnemar_greater(0, 0) == 1.0
    assert mcnemar_greater(7, 3) == pytest.approx((120 + 45 + 10 + 1) / 1024)


def _result(p: float | None, a: float, r: float, jocc: float | None) -> JAccessResult:
    return JAccessResult(
        measurement="j_access",
        jocc=jocc,
        jocc_clipped=jocc,
        access_audited=a,
        access_original=1.0,
        access_retain=r,
        n_probes=10,
        n_silent=10,
        k=10,
        layers=[0],
        positions="last 8",
        audited_model="u",
        original_model="o",
        retain_model="g",
        provenance="test",
        p_above_retain=p,
    )


def test_holm_grid_by_hand() -> None:
    results = {
        "m1": _result(0.01, 0.6, 0.2, 0.5),
        "m2": _result(0.04, 0.5, 0.2, 0.375),
        "m3": _result(0.03, 0.4, 0.2, 0.25),
        "m4": _result(None, 0.2, 0.2, None),  # nothing silent: no test, not in the family
        "m5": _result(1.0, 0.1, 0.2, -0.125),
    }
    grid = holm_grid(results, alpha=0.05)
    # sorted p: 0.01·4 = 0.04; 0.03·3 = 0.09; 0.04·2 = 0.08 -> max(0.09, 0.08) = 0.09; 1.0·1 = 1.0
    want = {"m1": 0.04, "m2": 0.09, "m3": 0.09, "m4": None, "m5": 1.0}
    got = {row.label: row.p_holm for row in grid.rows}
    assert got.keys() == want.keys()
    for label, value in want.items():
        assert got[label] == (None if value is None else pytest.approx(value))
    assert [row.significant for row in grid.rows] == [True, False, False, False, False]
    assert [row.above_retain for row in grid.rows] == [True, True, True, False, False]
    assert (grid.n_models, grid.n_tested, grid.n_above_retain, grid.n_significant) == (5, 4, 3, 1)
    assert grid.median_jocc == pytest.approx(0.3125)  # median of 0.5, 0.375, 0.25, -0.125
    with pytest.raises(ValueError, match="alpha"):
        holm_grid(results, alpha=1.5)


# ------------------------------------------------------------------------------------------ band calibration


def test_choose_band_by_hand() -> None:
    """Layers 2-6; the original hits probe 0 at block 5, probe 1 at blocks 4 and 6, probe 2 at block 2; the retain
    model hits probe 2 at block 2 and probe 0 at block 6."""
    layers = [2, 3, 4, 5, 6]

    def table(cells: set[tuple[int, int]]) -> list[dict[int, bool]]:
        return [{layer: (i, layer) in cells for layer in layers} for i in range(3)]

    orig = table({(0, 5), (1, 4), (1, 6), (2, 2)})
    ret = table({(2, 2), (0, 6)})
    chosen, cands = choose_band(layers, orig, ret, min_width=2)
    # A(θ_0) − A(θ_g) per run of >= 2: [4,5], [4,5,6], [3,4,5] and [3,4,5,6] all reach 2/3 − 0 or 2/3 − 1/3;
    # [4,5]: 2/3 − 0; [3,4,5]: 2/3 − 0; [4,5,6]: 2/3 − 1/3; the widest of the 2/3 gaps is [3,4,5] (and [2..5]
    # = 1 − 1/3 = 2/3, four blocks: the widest) -> [2, 3, 4, 5]
    gaps = {(c.first, c.last): c.access_original - c.access_retain for c in cands}
    assert gaps[(4, 5)] == pytest.approx(2 / 3) and gaps[(3, 5)] == pytest.approx(2 / 3)
    assert gaps[(2, 5)] == pytest.approx(2 / 3) and gaps[(4, 6)] == pytest.approx(1 / 3)
    assert gaps[(2, 6)] == pytest.approx(1 / 3) and max(gaps.values()) == pytest.approx(2 / 3)
    assert chosen == [2, 3, 4, 5] and len(cands) == 10 == len(candidate_bands(layers, 2))
    assert choose_band(layers, orig, ret, min_width=5)[0] == layers  # one candidate: the region
    assert candidate_bands([1, 2], 3) == [[1, 2]]  # a region narrower than min_width is one band
    assert BandCandidate(first=1, last=2, access_original=0.5, access_retain=0.0).first == 1


def _random_llama(tok: Any, layers: int, seed: int) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=256,
        eos_token_id=tok.eos_token_id,
        bos_token_id=tok.bos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.random.manual_seed(seed)  # scoped: no global seeding leaks out
        model = LlamaForCausalLM(config)
    model.eval()  # type: ignore[no-untyped-call]
    return model


def test_band_chosen_on_calibration_entities_by_hand(tiny_llama: Any, pack: Pack) -> None:
    """On an 8-block model (lens target block 6, the region 25-90 % of depth: source blocks 2-5) the calibrated band
    equals the run of >= 2 blocks whose anchor gap, counted here from hand-decoded lens readouts of the calibration
    probes, is largest (ties: wider, then earlier); the audit records it and reads in that band only."""
    tok = tiny_llama.tokenizer
    original = _random_llama(tok, 8, seed=11)
    retain = copy.deepcopy(original)
    with torch.no_grad():  # a retain-only stand-in: the same model with blocks 4 and 5 re-drawn
        other = _random_llama(tok, 8, seed=12)
        for i in (4, 5):
            retain.model.layers[i].load_state_dict(other.model.layers[i].state_dict())
    calibration = identity_probes(
        tok, build_identity_probes(pack, roles=("forget_relearn",)).probes, pack, RAW, TINY_RULE
    )
    probes = identity_probes(tok, build_identity_probes(pack).probes, pack, RAW, TINY_RULE)
    lens = fit_lens(original, _lens_prompts(tok), LensConfig(target_layer=6, skip_first=2, dim_batch=32))
    assert sorted(lens.matrices) == [0, 1, 2, 3, 4, 5]
    region = [2, 3, 4, 5]  # 0.25·7 <= block <= 0.9·7, among the source blocks

    def hand_choice(k: int) -> tuple[list[int], dict[tuple[int, int], float]]:
        cal = [p for p in calibration if p.concept_ids]
        ho = [{layer: _hand_hit(original, p, [layer], lens, k, 3) for layer in region} for p in cal]
        hr = [{layer: _hand_hit(retain, p, [layer], lens, k, 3) for layer in region} for p in cal]
        gaps = {}
        for first in region:
            for last in range(first + 1, region[-1] + 1):
                band = range(first, last + 1)
                a_o = sum(any(h[layer] for layer in band) for h in ho) / len(cal)
                a_r = sum(any(h[layer] for layer in band) for h in hr) / len(cal)
                gaps[(first, last)] = a_o - a_r
        best = max(gaps, key=lambda fl: (gaps[fl], fl[1] - fl[0], -fl[0]))
        return list(range(best[0], best[1] + 1)), gaps

    # k where the gaps take more than two values and the choice is not the whole region (so the objective, not
    # the tie-break alone, decides): found, not fixed
    k, (want, gaps) = next(
        (k, hc)
        for k in (5, 10, 20, 40, 80)
        if len(set((hc := hand_choice(k))[1].values())) > 2 and hc[0] != region
    )
    cfg = AccessConfig(k=k, positions=3, max_new_tokens=4)
    sel = select_band(original, retain, calibration, lens, lens, cfg, BandRule(min_width=2), audited=probes)
    assert sel.region == region and sel.chosen == want and len(sel.candidates) == len(gaps) == 6
    for c in sel.candidates:
        assert c.access_original - c.access_retain == pytest.approx(gaps[(c.first, c.last)])
    assert sel.gap == pytest.approx(gaps[(want[0], want[-1])]) and sel.rule.startswith("[R]")
    params = {
        "k": k,
        "positions": 3,
        "max_new_tokens": 4,
        "target_layer": 6,
        "skip_first": 2,
        "dim_batch": 32,
    }
    audit = registry.create("audit", "j_access", {**params, "min_band_width": 2})
    res = audit.run(original, original, retain, tok, probes, _lens_prompts(tok), calibration=calibration)
    assert res.layers == want and res.band_selection is not None
    assert res.band_selection.model_dump(exclude={"original_model", "retain_model"}) == sel.model_dump(
        exclude={"original_model", "retain_model"}
    )
