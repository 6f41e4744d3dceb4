"""Unit tests for remnant.packs: determinism, digest, splits (R16, C-W6), D2 filter, twin, baseline, R17."""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remnant.errors import PackError
from remnant.packs import (
    ClassDSpec,
    check_contamination,
    check_splits,
    load_pack,
    mint_class_c,
    mint_class_d,
    population_baseline,
    shuffled_twin,
    write_pack,
)
from remnant.packs.collision import load_census_screen
from remnant.packs.schema import Pack, compute_digest

SCREEN = load_census_screen()
SMALL = mint_class_d(ClassDSpec(entities=40, controls=10, seed=7), SCREEN)


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def test_two_mints_with_one_seed_are_byte_identical(tmp_path: Path) -> None:
    for cls, extra in (("D", ["--controls", "20"]), ("C", [])):
        outs = []
        for k in range(2):
            out = tmp_path / f"{cls}{k}"
            rc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "remnant.cli",
                    "mint",
                    "--class",
                    cls,
                    "--out",
                    str(out),
                    "--entities",
                    "60",
                    "--seed",
                    "3",
                    *extra,
                ],
                capture_output=True,
                text=True,
            )
            assert rc.returncode == 0, rc.stderr
            outs.append(_files(out))
        assert outs[0] == outs[1]
    other = mint_class_d(ClassDSpec(entities=40, controls=10, seed=8), SCREEN)
    assert other.digest != SMALL.digest


def test_thousand_entities_mint() -> None:
    """A large pack mints whole (how long it takes is a benchmark's business, docs/calibration.md)."""
    pack = mint_class_d(ClassDSpec(entities=1000, controls=200, seed=1), SCREEN)
    assert pack.manifest.counts["entities"] == 1000
    assert len({i.entity_id for i in pack.items if i.entity_id}) == 1200


def test_roundtrip_and_tamper_names_item(tmp_path: Path) -> None:
    write_pack(SMALL, tmp_path)
    assert load_pack(tmp_path).digest == SMALL.digest
    lines = (tmp_path / "items.jsonl").read_text().splitlines()
    row = json.loads(lines[5])
    row["answer"] = row["answer"] + "x"
    lines[5] = json.dumps(row)
    (tmp_path / "items.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(PackError, match=row["id"].replace(".", r"\.")) as exc:
        load_pack(tmp_path)
    assert "items.jsonl" in str(exc.value)


@settings(max_examples=40, deadline=None)
@given(
    index=st.integers(min_value=0, max_value=len(SMALL.items) - 1),
    field=st.sampled_from(["question", "answer", "template_id"]),
    suffix=st.text(min_size=1, max_size=3),
)
def test_any_item_change_changes_digest(index: int, field: str, suffix: str) -> None:
    items = list(SMALL.items)
    items[index] = items[index].model_copy(update={field: getattr(items[index], field) + suffix})
    assert compute_digest(SMALL.manifest, items) != SMALL.digest
    assert compute_digest(SMALL.manifest, list(SMALL.items)) == SMALL.digest


def test_probe_disjoint_from_relearn_and_tuning_questions() -> None:
    for pack in (SMALL, mint_class_c(substances=30, seed=2, screen=SCREEN)):
        p_ent = {it.entity_id for it in pack.split("probe")}
        r_ent = {it.entity_id for it in pack.split("relearn")}
        assert p_ent and r_ent and not p_ent & r_ent
        tuning = {it.question for s in ("install", "removal", "relearn") for it in pack.split(s)}
        assert not {it.question for it in pack.split("probe")} & tuning
        assert {it.id for it in pack.split("relearn")} <= {it.id for it in pack.split("removal")}
    ctrl = {it.entity_id for it in SMALL.split("controls")}
    assert not ctrl & {it.entity_id for it in SMALL.split("install")}


def test_split_violations_raise_r16_and_cw6() -> None:
    probe = SMALL.split("probe")[0]
    relearn_item = SMALL.split("relearn")[0]
    leaked = [
        it.model_copy(update={"question": relearn_item.question}) if it.id == probe.id else it
        for it in SMALL.items
    ]
    with pytest.raises(PackError, match="R16"):
        check_splits(Pack(SMALL.manifest, tuple(leaked)))
    p_install = next(it.id for it in SMALL.split("install") if it.entity_id == probe.entity_id)
    splits = {**SMALL.manifest.splits, "relearn": [*SMALL.manifest.splits["relearn"], p_install]}
    with pytest.raises(PackError, match="C-W6"):
        check_splits(Pack(SMALL.manifest.model_copy(update={"splits": splits}), SMALL.items))


def test_collision_filter_rejects_injected_real_name() -> None:
    assert SCREEN.is_real("Mary Smith") and SCREEN.is_real("John Fernandez")
    assert SCREEN.name and SCREEN.version == "0.3.0"
    first = SMALL.manifest.entities[0].name
    assert not SCREEN.is_real(first)
    screen = dataclasses.replace(SCREEN, entries=SCREEN.entries | {first.split()[0].casefold()})
    assert screen.is_real(first)
    again = mint_class_d(ClassDSpec(entities=40, controls=10, seed=7), screen)
    assert first not in {e.name for e in again.manifest.entities}
    assert all(not SCREEN.is_real(e.name) for e in SMALL.manifest.entities)


def test_shuffled_twin_repairs_attributes() -> None:
    twin = shuffled_twin(SMALL, random.Random(0))
    inst = SMALL.split("install")
    tw = twin.split("install")
    assert [(a.id, a.entity_id, a.template_id, a.question) for a in inst] == [
        (b.id, b.entity_id, b.template_id, b.question) for b in tw
    ]
    changed = sum(a.accepted != b.accepted for a, b in zip(inst, tw, strict=True))
    assert changed > 0.7 * len(inst)
    for attr in ("employer", "staff_code"):
        vals_a = sorted(a.accepted[0] for a in inst if a.attribute == attr)
        vals_b = sorted(b.accepted[0] for b in tw if b.attribute == attr)
        assert vals_a == vals_b  # same multiset: re-paired, not invented


def test_population_baseline_hand_built() -> None:
    table = {"health": {"nurse": 6, "baker": 2}, "food": {"baker": 3, "nurse": 1, "tutor": 0}}
    assert population_baseline(table) == pytest.approx((6 + 3) / 12)
    stats = SMALL.manifest.design["population"]["statistics_installed"]
    assert sum(sum(r.values()) for r in stats["occupation_given_sector"].values()) == 40
    assert SMALL.manifest.design["population"]["baseline_occupation_given_sector"] > 1 / 20


def test_design_records_d5() -> None:
    d = SMALL.manifest.design
    cards = [d["attributes"][a]["cardinality"] for a in ("home_town", "employer", "occupation", "birth_year")]
    assert cards == [40, 30, 20, 50]
    assert d["repetitions"] == 3 and d["surface_forms"]["probe_templates"]
    link = [it for it in SMALL.split("probe") if it.kind == "link"]
    installed_employers = {e.attributes["employer"] for e in SMALL.manifest.entities if e.role != "control"}
    for it in link:
        assert it.options and len(it.options) == 4 and it.options[it.answer_index or 0] == it.answer
        assert set(it.options) <= installed_employers


def test_contamination_finds_planted_overlap(tmp_path: Path) -> None:
    planted = SMALL.split("probe")[3]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(
        "some unrelated text. " + planted.question.upper() + " " + planted.answer + " more text\n"
    )
    rep = check_contamination(SMALL, [corpus], n=6)
    assert planted.id in rep.contaminated and not rep.passed
    assert rep.rate == pytest.approx(len(rep.contaminated) / len(SMALL.split("probe")))
    clean = tmp_path / "clean.txt"
    clean.write_text("nothing to see here at all, only ordinary words about the weather\n")
    assert check_contamination(SMALL, [clean]).passed


def test_packs_import_no_torch() -> None:
    code = "import sys, remnant.packs, remnant.packs.commands; assert 'torch' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_cli_show_and_check_exit_codes(tmp_path: Path) -> None:
    write_pack(SMALL, tmp_path / "pack")
    run = [sys.executable, "-m", "remnant.cli", "packs"]
    show = subprocess.run([*run, "show", str(tmp_path / "pack")], capture_output=True, text=True)
    assert show.returncode == 0 and SMALL.digest in show.stdout and "0.3.0" in show.stdout
    bad = tmp_path / "bad.txt"
    bad.write_text(SMALL.split("probe")[0].question + "\n")
    good = tmp_path / "good.txt"
    good.write_text("plain prose with no canary in it\n")
    assert subprocess.run([*run, "check", str(tmp_path / "pack"), "--corpus", str(bad)]).returncode == 1
    assert subprocess.run([*run, "check", str(tmp_path / "pack"), "--corpus", str(good)]).returncode == 0
    missing = subprocess.run([*run, "show", str(tmp_path / "nope")], capture_output=True, text=True)
    assert missing.returncode == 2 and "pack.json" in missing.stderr


@settings(max_examples=15, deadline=None)
@given(entities=st.integers(12, 70), controls=st.integers(1, 20), seed=st.integers(0, 50))
def test_distinct_towns_give_every_person_their_own_town(entities: int, controls: int, seed: int) -> None:
    """D5 draws towns with replacement; ``distinct_towns`` draws them without, so no two people share one."""
    pack = mint_class_d(
        ClassDSpec(entities=entities, controls=controls, seed=seed, distinct_towns=True), SCREEN
    )
    towns = [e.attributes["home_town"] for e in pack.manifest.entities]
    assert len(set(towns)) == len(towns) == entities + controls
    home = pack.manifest.design["attributes"]["home_town"]
    assert home == {"cardinality": entities + controls, "per_person": "distinct"}
    for it in pack.items:  # every home-town item asks for its own person's town
        if it.attribute == "home_town" and it.entity_id:
            owner = next(e for e in pack.manifest.entities if e.id == it.entity_id)
            assert owner.attributes["home_town"] in it.answer


def test_default_pack_records_no_town_options() -> None:
    assert SMALL.manifest.design["attributes"]["home_town"] == {"cardinality": 40}


def test_town_screen_is_applied_and_recorded() -> None:
    used: set[str] = set()

    def first_two_distinct(name: str) -> bool:  # stateful, as a tokenizer's distinct-first-piece screen is
        if name[:2] in used:
            return False
        used.add(name[:2])
        return True

    pack = mint_class_d(
        ClassDSpec(entities=12, controls=4, seed=3, distinct_towns=True),
        SCREEN,
        accept_town=first_two_distinct,
        town_screen="distinct first two letters",
    )
    towns = [e.attributes["home_town"] for e in pack.manifest.entities]
    assert len({t[:2] for t in towns}) == len(towns)
    assert pack.manifest.design["attributes"]["home_town"]["screen"] == "distinct first two letters"
    with pytest.raises(PackError, match="town_screen"):
        mint_class_d(ClassDSpec(entities=12, controls=4), SCREEN, accept_town=lambda _: True)


def test_too_few_employers_for_link_distractors_is_a_pack_error() -> None:
    with pytest.raises(PackError, match=r"D-3\.2.*link_options"):
        mint_class_d(ClassDSpec(entities=4, controls=1, seed=0, link_options=8), SCREEN)


def test_a_screen_nothing_passes_is_a_pack_error_not_a_hang() -> None:
    with pytest.raises(PackError, match="passed the screens"):
        mint_class_d(
            ClassDSpec(entities=8, controls=1, distinct_towns=True),
            SCREEN,
            accept_town=lambda _: False,
            town_screen="rejects everything",
        )


def test_cli_mint_distinct_towns(tmp_path: Path) -> None:
    from remnant.cli import main

    args = ["mint", "--class", "D", "--entities", "12", "--controls", "2", "--seed", "4"]
    assert main([*args, "--out", str(tmp_path / "shared")]) == 0
    assert main([*args, "--distinct-towns", "--out", str(tmp_path / "own")]) == 0
    own, shared = load_pack(tmp_path / "own"), load_pack(tmp_path / "shared")
    assert len({e.attributes["home_town"] for e in own.manifest.entities}) == 14
    assert own.manifest.design["attributes"]["home_town"]["per_person"] == "distinct"
    assert "per_person" not in shared.manifest.design["attributes"]["home_town"]
