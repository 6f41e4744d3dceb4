"""Minted packs with truth-ratio answers (opt-in): a paraphrased answer and perturbed answers drawn from the
attribute's own pool, each item from a generator of its own, and packs minted without the option unchanged."""

from __future__ import annotations

import hashlib
import random
import re
from pathlib import Path

import pytest

from remnant.cli import main
from remnant.errors import PackError
from remnant.packs import ClassDSpec, load_pack, mint_class_c, mint_class_d, write_pack
from remnant.packs.classc import PARAPHRASE_FORMS as C_FORMS
from remnant.packs.classc import PROPERTIES
from remnant.packs.classd import PARAPHRASE_FORMS, truth_ratio_rng, wrong_values
from remnant.packs.collision import load_census_screen
from remnant.packs.population import BIRTH_YEARS, OCCUPATIONS, build_vocabulary
from remnant.packs.schema import Item, Pack, item_dict

SCREEN = load_census_screen()
SPEC = ClassDSpec(entities=6, controls=2, seed=3)
#: Computed with the code as it was before truth-ratio answers existed (a pack minted without them must keep
#: its digest and its file bytes).
GOLDEN_D = "sha256:435f6991db0a72381951b5a48ee50e6dd2f4e964387c554728cdf963416b0b3d"
GOLDEN_C = "sha256:dc104df3cb5d250dc99314ad915e7696e7ff78cf04229c8affb2069b3bad43b2"
GOLDEN_FILES = {
    "D": {
        "items.jsonl": "f528eb9427405efdf4be7ae3d69c83f9304fb30d7a6dee07280482b9a7fde07d",
        "pack.json": "9749717162338a323d3aa54e17836ca120dd4ee7795ae70b7a13447fd688bb40",
    },
    "C": {
        "items.jsonl": "99d03174dd739fb56caa73554ba682d1eeefed62de947bc747f9d2d41a3b0d07",
        "pack.json": "98577ae2baa428ecaf1b0dd3c1315e80ab71b8636279197fe5b5e1b5acf8531c",
    },
}
TRUTH_FIELDS = ("paraphrased_answer", "perturbed_answer", "paraphrased_question")


def _plain() -> dict[str, Pack]:
    return {"D": mint_class_d(SPEC, SCREEN), "C": mint_class_c(substances=4, seed=3, screen=SCREEN)}


def test_packs_minted_without_the_option_keep_their_digest_and_bytes(tmp_path: Path) -> None:
    packs = _plain()
    assert packs["D"].digest == GOLDEN_D and packs["C"].digest == GOLDEN_C
    for cls, pack in packs.items():
        write_pack(pack, tmp_path / cls)
        for name, sha in GOLDEN_FILES[cls].items():
            assert hashlib.sha256((tmp_path / cls / name).read_bytes()).hexdigest() == sha, (cls, name)
        assert all(not set(TRUTH_FIELDS) & set(item_dict(it)) for it in pack.items)


def _without_truth(it: Item) -> dict[str, object]:
    return {k: v for k, v in item_dict(it).items() if k not in TRUTH_FIELDS}


def test_the_option_changes_nothing_else() -> None:
    plain = _plain()
    with_d = mint_class_d(ClassDSpec(entities=6, controls=2, seed=3, truth_ratio_options=True), SCREEN)
    with_c = mint_class_c(substances=4, seed=3, screen=SCREEN, truth_ratio_options=True)
    for before, after in ((plain["D"], with_d), (plain["C"], with_c)):
        assert after.digest != before.digest
        assert [_without_truth(it) for it in after.items] == [_without_truth(it) for it in before.items]
        assert (
            after.manifest.splits == before.manifest.splits
            and after.manifest.entities == before.manifest.entities
        )
        design = dict(after.manifest.design)
        assert design.pop("truth_ratio_options")["perturbed_answers"] == 5
        assert design == before.manifest.design


def _values(form: str, name: str, sentence: str) -> str:
    """The value a template sentence holds (the inverse of ``form.format(name=..., value=...)``)."""
    pattern = (
        re.escape(form).replace(re.escape("{name}"), re.escape(name)).replace(re.escape("{value}"), "(.+)")
    )
    m = re.fullmatch(pattern, sentence)
    assert m is not None, (form, sentence)
    return m.group(1)


def test_class_d_perturbed_answers_come_from_the_attributes_pool() -> None:
    pack = mint_class_d(ClassDSpec(entities=6, controls=2, seed=3, truth_ratio_options=True), SCREEN)
    vocab = build_vocabulary(random.Random(3), SCREEN)  # the mint's first draws: its towns and companies
    codes = {e.attributes["staff_code"] for e in pack.manifest.entities}
    pools = {
        "home_town": set(vocab.towns),
        "employer": set(vocab.companies),
        "occupation": set(OCCUPATIONS),
        "birth_year": set(BIRTH_YEARS),
        "staff_code": codes,
    }
    names = {e.id: e.name for e in pack.manifest.entities}
    carrying = [it for it in pack.items if it.perturbed_answer is not None]
    expected = [it for it in pack.items if it.kind == "fact" and it.phrasing == "probe"]
    assert carrying == expected and len(carrying) == 5 * (1 + 3 + 2)  # P (1 person), retain (3), controls (2)
    assert {it.split for it in carrying} == {"probe", "retain", "controls"}
    for it in carrying:
        assert it.attribute is not None and it.entity_id is not None and it.perturbed_answer is not None
        form, name = PARAPHRASE_FORMS[it.attribute], names[it.entity_id]
        assert it.paraphrased_answer == form.format(name=name, value=it.answer)
        wrong = [_values(form, name, p) for p in it.perturbed_answer]
        assert len(wrong) == len(set(wrong)) == 5
        assert it.answer not in wrong and set(wrong) <= pools[it.attribute], it.id
        assert it.paraphrased_answer not in it.perturbed_answer


def test_perturbed_answers_are_deterministic_per_seed_and_item() -> None:
    spec = ClassDSpec(entities=6, controls=2, seed=3, truth_ratio_options=True)
    one, two = mint_class_d(spec, SCREEN), mint_class_d(spec, SCREEN)
    assert one.digest == two.digest
    other = mint_class_d(ClassDSpec(entities=6, controls=2, seed=4, truth_ratio_options=True), SCREEN)
    assert other.digest != one.digest
    it = one.split("probe")[0]
    assert it.attribute == "home_town" and it.entity_id is not None
    name = one.entity(it.entity_id).name
    # the item's own generator, from the seed and its id alone, redraws its wrong towns
    redrawn = wrong_values(
        truth_ratio_rng(3, it.id), build_vocabulary(random.Random(3), SCREEN).towns, it.answer, 5
    )
    assert it.perturbed_answer == [PARAPHRASE_FORMS["home_town"].format(name=name, value=w) for w in redrawn]


def test_fewer_perturbed_answers_when_asked_or_when_the_pool_is_small() -> None:
    pack = mint_class_d(
        ClassDSpec(entities=6, controls=2, seed=3, truth_ratio_options=True, perturbed_answers=2), SCREEN
    )
    assert {len(it.perturbed_answer or []) for it in pack.split("probe") if it.kind == "fact"} == {2}
    assert sorted(wrong_values(random.Random(0), ["a", "b", "c", "b"], "b", 5)) == [
        "a",
        "c",
    ]  # the pool's all
    with pytest.raises(PackError, match=r"perturbed_answers = 0.*\(D5\)"):
        mint_class_d(
            ClassDSpec(entities=6, controls=2, seed=3, truth_ratio_options=True, perturbed_answers=0), SCREEN
        )


def test_class_c_mcq_items_get_the_propertys_other_values() -> None:
    pack = mint_class_c(substances=4, seed=3, screen=SCREEN, truth_ratio_options=True)
    names = {e.id: e.name for e in pack.manifest.entities}
    mcq = pack.split("probe")
    assert len(mcq) == 2 * 4 and all(it.kind == "mcq" for it in mcq)
    for it in mcq:
        assert it.attribute is not None and it.entity_id is not None and it.perturbed_answer is not None
        form = C_FORMS[it.attribute].replace("{x}", "{name}")
        assert it.paraphrased_answer == form.format(name=names[it.entity_id], value=it.answer)
        wrong = [_values(form, names[it.entity_id], p) for p in it.perturbed_answer]
        assert sorted(wrong) == sorted(
            v for v in PROPERTIES[it.attribute][2] if v != it.answer
        )  # all 5 others
    assert all(it.perturbed_answer is None for it in pack.split("install"))


def test_mint_perturbed_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "mint",
                "--class",
                "D",
                "--entities",
                "6",
                "--controls",
                "2",
                "--seed",
                "3",
                "--out",
                str(tmp_path / "p"),
            ]
        )
        == 0
    )
    assert load_pack(tmp_path / "p").digest == GOLDEN_D
    argv = [
        "mint",
        "--class",
        "C",
        "--entities",
        "4",
        "--seed",
        "3",
        "--perturbed",
        "--out",
        str(tmp_path / "c"),
    ]
    assert main(argv) == 0
    pack = load_pack(tmp_path / "c")
    assert pack.digest == mint_class_c(substances=4, seed=3, screen=SCREEN, truth_ratio_options=True).digest
    assert all(it.perturbed_answer for it in pack.split("probe"))
    capsys.readouterr()
