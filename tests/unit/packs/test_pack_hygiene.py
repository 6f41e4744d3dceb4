"""Pack hygiene: one definition of the split rules, run by mint (seal) and by every load (R16, C-W6, D4, Z1).

The pack digest is unkeyed, so each case here edits a pack, recomputes its digest with the public digest function
(``compute_digest``: what anyone can do) and checks that both ``seal`` and ``load_pack`` refuse it, citing the
requirement. Plus the item schema, the config fit checked at pre-registration (R10), ``with_general`` and the
contamination check's inputs (R17).
"""

from __future__ import annotations

import copy
import math
import random
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from remnant.config import AssessmentConfig, parse_config
from remnant.config.pack_fit import check_pack_fits
from remnant.errors import ConfigError, PackError
from remnant.packs import (
    ClassDSpec,
    Item,
    Pack,
    check_contamination,
    check_splits,
    compute_digest,
    load_pack,
    mint_class_c,
    mint_class_d,
    seal,
    shuffled_twin,
    write_pack,
)
from remnant.packs.collision import load_census_screen
from remnant.packs.general import general_items, with_general

SCREEN = load_census_screen()
PACK_D = mint_class_d(ClassDSpec(entities=8, controls=2, seed=3, general=False), SCREEN)
PACK_C = mint_class_c(substances=8, seed=2, screen=SCREEN)
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _edit(pack: Pack, splits: dict[str, list[str]] | None = None, items: list[Item] | None = None) -> Pack:
    """``pack`` with new splits and/or items and its counts kept in step, unsealed (digest not yet set)."""
    new_splits = splits if splits is not None else dict(pack.manifest.splits)
    counts = {**pack.manifest.counts, **{name: len(ids) for name, ids in new_splits.items()}}
    manifest = pack.manifest.model_copy(update={"splits": new_splits, "counts": counts, "digest": ""})
    return Pack(manifest, tuple(items if items is not None else pack.items))


def _resealed(pack: Pack, folder: Path) -> Path:
    """Write ``pack`` with a freshly computed digest, bypassing the split rules (what a tamperer can do)."""
    digest = compute_digest(pack.manifest, pack.items)
    write_pack(Pack(pack.manifest.model_copy(update={"digest": digest}), pack.items), folder)
    return folder


def _probe(pack: Pack) -> Item:
    return pack.split("probe")[0]


def _moved_to_install(p: Pack) -> Pack:
    probe = _probe(p).id
    s = p.manifest.splits
    return _edit(p, {**s, "probe": [i for i in s["probe"] if i != probe], "install": [*s["install"], probe]})


def _copied(split: str) -> Callable[[Pack], Pack]:
    def edit(p: Pack) -> Pack:
        return _edit(p, {**p.manifest.splits, split: [*p.manifest.splits[split], _probe(p).id]})

    return edit


def _probe_person_relearned(p: Pack) -> Pack:
    person = _probe(p).entity_id
    fact = next(it.id for it in p.split("install") if it.entity_id == person)
    return _edit(p, {**p.manifest.splits, "relearn": [*p.manifest.splits["relearn"], fact]})


def _probe_asks_relearn_question(p: Pack) -> Pack:
    probe, relearn = _probe(p), p.split("relearn")[0]
    items = [
        it.model_copy(update={"question": relearn.question}) if it.id == probe.id else it for it in p.items
    ]
    return _edit(p, items=items)


def _control_installed(p: Pack) -> Pack:
    control = p.split("controls")[0].id
    return _edit(p, {**p.manifest.splits, "install": [*p.manifest.splits["install"], control]})


def _repeated_id(p: Pack) -> Pack:
    return _edit(p, items=[*p.items, p.items[0]])


def _dangling(p: Pack) -> Pack:
    return _edit(p, {**p.manifest.splits, "retain": [*p.manifest.splits["retain"], "nobody.p0"]})


def _unlisted(p: Pack) -> Pack:
    gone = p.manifest.splits["retain"][0]
    return _edit(p, {**p.manifest.splits, "retain": p.manifest.splits["retain"][1:]}) if gone else p


def _unknown_split(p: Pack) -> Pack:
    return _edit(p, {**p.manifest.splits, "holdout": []})


def _empty_controls(p: Pack) -> Pack:
    gone = set(p.manifest.splits["controls"])
    return _edit(p, {**p.manifest.splits, "controls": []}, [it for it in p.items if it.id not in gone])


def _unknown_entity(p: Pack) -> Pack:
    first = p.split("retain")[0].id
    return _edit(
        p, items=[it.model_copy(update={"entity_id": "e99999"}) if it.id == first else it for it in p.items]
    )


def _wrong_count(p: Pack) -> Pack:
    return Pack(p.manifest.model_copy(update={"counts": {**p.manifest.counts, "probe": 1}}), p.items)


LEAKS: list[tuple[str, Callable[[Pack], Pack], str, str]] = [
    ("probe-moved-to-install", _moved_to_install, "R16", "split 'install' lists probe item"),
    ("probe-in-install", _copied("install"), "R16", "split 'install' lists probe item"),
    ("probe-in-removal", _copied("removal"), "R16", "split 'removal' lists probe item"),
    ("probe-in-relearn", _copied("relearn"), "C-W6", "split 'relearn' lists probe item"),
    ("probe-in-retain", _copied("retain"), "R16", "split 'retain' lists probe item"),
    ("probe-in-controls", _copied("controls"), "D4", "split 'controls' lists probe item"),
    ("probe-person-relearned", _probe_person_relearned, "C-W6", "is in both P (split 'probe') and R"),
    (
        "probe-asks-relearn-question",
        _probe_asks_relearn_question,
        "C-W6",
        "repeats the question of 'relearn'",
    ),
    ("control-installed", _control_installed, "D4", "controls are never installed"),
    ("repeated-id", _repeated_id, "R16", "appears twice in items.jsonl"),
    ("dangling-id", _dangling, "R16", "lists item 'nobody.p0', which items.jsonl does not hold"),
    ("unlisted-item", _unlisted, "R16", "is in no split"),
    ("unknown-split", _unknown_split, "R16", "split 'holdout' is not a pack split"),
    ("empty-controls", _empty_controls, "D4", "split 'controls' is empty"),
    ("unknown-entity", _unknown_entity, "R16", "entity 'e99999', which the entity table lacks"),
    ("wrong-count", _wrong_count, "R16", "counts.probe is 1"),
]


@pytest.mark.parametrize(
    ("edit", "requirement", "message"), [c[1:] for c in LEAKS], ids=[c[0] for c in LEAKS]
)
def test_mint_and_load_refuse_the_same_split_breaks(
    edit: Callable[[Pack], Pack], requirement: str, message: str, tmp_path: Path
) -> None:
    broken = edit(PACK_D)
    with pytest.raises(PackError, match=re.escape(message)) as minted:
        seal(broken.manifest, list(broken.items))
    assert minted.value.requirement == requirement
    folder = _resealed(broken, tmp_path / "pack")
    with pytest.raises(PackError, match=re.escape(message)) as loaded:
        load_pack(folder)
    assert loaded.value.requirement == requirement
    assert str(folder / ("items.jsonl" if edit is _repeated_id else "pack.json")) in str(loaded.value)


def test_every_minted_pack_keeps_the_rules(tmp_path: Path) -> None:
    from remnant.demo import restrict_attributes

    packs = [
        PACK_D,
        PACK_C,
        with_general(PACK_C),
        mint_class_d(ClassDSpec(entities=12, controls=3, seed=5, distinct_towns=True), SCREEN),
        restrict_attributes(mint_class_d(ClassDSpec(entities=12, controls=3), SCREEN), ("home_town",)),
    ]
    for k, pack in enumerate(packs):
        check_splits(pack)
        assert load_pack(write_pack(pack, tmp_path / str(k))).digest == pack.digest


def test_the_twin_needs_only_its_install_split() -> None:
    twin = shuffled_twin(PACK_D, random.Random(0))
    assert not twin.manifest.splits["probe"]
    check_splits(twin, required=("install",))
    with pytest.raises(PackError, match="split '(removal|probe|controls)' is empty"):
        check_splits(twin)


def test_class_c_needs_probe_items_but_not_controls() -> None:
    check_splits(PACK_C)  # no controls split items: D4 is Class D's
    gone = set(PACK_C.manifest.splits["probe"])
    empty = _edit(
        PACK_C, {**PACK_C.manifest.splits, "probe": []}, [it for it in PACK_C.items if it.id not in gone]
    )
    with pytest.raises(PackError, match="split 'probe' is empty; a class C pack needs items in it"):
        check_splits(empty)


def test_a_question_holding_a_unicode_line_separator_round_trips(tmp_path: Path) -> None:
    """items.jsonl is split on newlines only: str.splitlines() would cut this item in two."""
    first = PACK_D.split("retain")[0]
    odd = first.model_copy(update={"question": first.question + "\u2028(again)"})
    pack = seal(PACK_D.manifest, [odd if it.id == first.id else it for it in PACK_D.items])
    loaded = load_pack(write_pack(pack, tmp_path))
    assert loaded.item(first.id).question.endswith("\u2028(again)")


def _item(**update: Any) -> dict[str, Any]:
    base = PACK_C.split("probe")[0].model_dump(mode="json")
    return {**base, **update}


@pytest.mark.parametrize(
    ("update", "problem"),
    [
        ({"answer_index": 4}, "not the index of one of its options"),
        ({"answer_index": -1}, "not the index of one of its options"),
        ({"options": None}, "needs options and answer_index"),
        ({"accepted": []}, "at least 1 item"),
        ({"question": "x" * 10_001}, "at most 10000 characters"),
        ({"id": ""}, "at least 1 character"),
        ({"kind": "fact", "options": None}, "not the index of one of its options"),
    ],
)
def test_item_schema_refuses(update: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        Item.model_validate(_item(**update))


def _config(example: str, tmp_path: Path, **sections: Any) -> AssessmentConfig:
    raw = tomllib.loads((EXAMPLES / example).read_text(encoding="utf-8"))
    raw = copy.deepcopy(raw)
    raw["target"] = {k: v for k, v in raw["target"].items() if k != "mint"} | {"pack": "pack"}
    for key, value in sections.items():
        raw[key] = {**raw.get(key, {}), **value}
    return parse_config(raw, source=str(tmp_path / "c.toml"), base_dir=tmp_path)


def test_config_fit_general_utility_needs_a_general_split(tmp_path: Path) -> None:
    cfg = _config("classc-claimant.toml", tmp_path)
    with pytest.raises(ConfigError, match=r"utility general_qa_kappa is measured on split 'general'") as info:
        check_pack_fits(cfg, PACK_C, tmp_path / "pack")
    assert info.value.requirement == "R10"
    assert str(tmp_path / "pack" / "pack.json") in str(info.value)
    check_pack_fits(cfg, with_general(PACK_C), tmp_path / "pack")
    kept = {"general_qa_kappa": {"kept_ids": ["g0000", "s00000.glow.i"]}}
    with pytest.raises(ConfigError, match=r"kept_ids': 's00000.glow.i' is not an item of split 'general'"):
        check_pack_fits(
            _config("classc-claimant.toml", tmp_path, utility={"params": kept}),
            with_general(PACK_C),
            tmp_path,
        )


def test_config_fit_class_probe_retain_and_relearn(tmp_path: Path) -> None:
    cfg = _config("classd-smollm2-npo.toml", tmp_path)
    check_pack_fits(cfg, PACK_D, tmp_path)
    with pytest.raises(ConfigError, match="is a class C pack but the claim is class D") as info:
        check_pack_fits(cfg, PACK_C, tmp_path)
    assert info.value.requirement == "R2"
    no_retain = _edit(
        PACK_D, {**PACK_D.manifest.splits, "retain": []}, [it for it in PACK_D.items if it.split != "retain"]
    )
    with pytest.raises(
        ConfigError, match="utility retain_kappa is measured on split 'retain', which is empty"
    ):
        check_pack_fits(cfg, no_retain, tmp_path)
    with pytest.raises(ConfigError, match=r"field 'probe.splits'.*hold no scorable item") as info:
        check_pack_fits(
            _config("classd-smollm2-npo.toml", tmp_path, probe={"attributes": ["no_such"]}), PACK_D, tmp_path
        )
    assert info.value.requirement == "R16"
    relearn = set(PACK_D.manifest.splits["relearn"])
    no_relearn = _edit(PACK_D, {**PACK_D.manifest.splits, "relearn": []})
    assert relearn and not no_relearn.manifest.splits["relearn"]
    with pytest.raises(ConfigError, match="split 'relearn' .* holds no item to relearn on") as info:
        check_pack_fits(cfg, no_relearn, tmp_path)
    assert info.value.requirement == "C-W6"


def test_with_general_adds_the_shipped_questions_once() -> None:
    pack = with_general(PACK_C)
    assert pack.manifest.splits["general"] == [it.id for it in general_items()]
    assert pack.manifest.counts["general"] == len(general_items()) > 100
    assert pack.digest != PACK_C.digest
    with pytest.raises(PackError, match="already has a general split"):
        with_general(pack)


def test_contamination_inputs_are_checked(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("nothing to see", encoding="utf-8")
    for bad, problem in ((tmp_path / "missing.txt", "cannot read"), (tmp_path, "is a folder")):
        with pytest.raises(ConfigError, match=problem) as info:
            check_contamination(PACK_D, [corpus, bad])
        assert info.value.requirement == "R17" and str(bad) in str(info.value)
    for n, threshold in ((0, 0.0), (8, math.nan), (8, 1.5), (8, -0.1)):
        with pytest.raises(ConfigError) as info:
            check_contamination(PACK_D, [corpus], n=n, threshold=threshold)
        assert info.value.requirement == "R17"
    assert check_contamination(PACK_D, [corpus]).passed
