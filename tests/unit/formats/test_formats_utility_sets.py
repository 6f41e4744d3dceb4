"""remnant's shipped general-utility sets (``real_authors_perturbed``, ``world_facts_perturbed``; R10): the data
files validate, a pack without its own rows of those TOFU splits exports them, and ``remnant eval`` then
computes TOFU's ``model_utility`` on a minted pack's export."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from formats_data import PER, tofu_rows, write_tofu

from remnant.cli import main
from remnant.errors import PackError
from remnant.formats import pack_to_tofu, read_tofu, tofu_to_pack
from remnant.packs import ClassDSpec, mint_class_c, mint_class_d, write_pack
from remnant.packs.schema import Pack
from remnant.packs.utility_sets import UTILITY_FILES, UtilitySet, load_utility_set, utility_sets

SPLITS = ("real_authors_perturbed", "world_facts_perturbed")


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


@pytest.fixture(scope="module")
def shipped() -> dict[str, UtilitySet]:
    return utility_sets()


@pytest.fixture(scope="module")
def minted() -> Pack:
    return mint_class_d(ClassDSpec(entities=8, controls=2, seed=5, truth_ratio_options=True))


def test_the_shipped_sets_validate(shipped: dict[str, UtilitySet]) -> None:
    assert list(shipped) == list(SPLITS)
    assert {s: len(u.rows) for s, u in shipped.items()} == {
        "real_authors_perturbed": 48,
        "world_facts_perturbed": 47,
    }
    for split, used in shipped.items():
        raw = resources.files("remnant.packs").joinpath(f"data/{UTILITY_FILES[split]}").read_bytes()
        assert used.sha256 == hashlib.sha256(raw).hexdigest() and used.version == 1
        assert used.provenance() == {
            "file": UTILITY_FILES[split], "version": 1, "sha256": used.sha256, "rows": len(used.rows)
        }  # fmt: skip
        # checked here independently of the loader's own checks
        items = json.loads(raw)["items"]
        assert len({_key(r["question"]) for r in items}) == len(items), split
        for r in items:
            options = [_key(o) for o in r["perturbed_answer"]]
            assert len(options) == len(set(options)) == 3, r
            assert _key(r["answer"]) not in options, r
            assert all(o.strip() for o in [r["answer"], *r["perturbed_answer"]]), r


def test_a_minted_pack_exports_the_shipped_sets(
    minted: Pack, shipped: dict[str, UtilitySet], tmp_path: Path
) -> None:
    out = pack_to_tofu(minted, tmp_path / "out", forget="forget10", holdout="holdout10")
    assert out.files["real_authors_perturbed.json"] == 48 and out.files["world_facts_perturbed.json"] == 47
    assert {name: u.split for name, u in out.shipped.items()} == {f"{s}.json": s for s in SPLITS}
    # the pack's own general items (no wrong options) are still left out, not mixed in
    assert out.left_out["general: items not imported from a TOFU split"] == len(minted.split("general"))
    back = read_tofu(tmp_path / "out")
    for split in SPLITS:
        assert [r.to_json() for r in back.rows(split)] == [r.to_json() for r in shipped[split].rows]
    assert back.rows("world_facts_perturbed")[0].to_json() == {
        "question": "In which city is the Eiffel Tower?",
        "answer": "Paris",
        "perturbed_answer": ["London", "Rome", "Berlin"],
    }
    # a Class C pack minted without any general split gets them too
    plain = pack_to_tofu(mint_class_c(substances=4, seed=1), tmp_path / "plain")
    assert set(plain.shipped) == {f"{s}.json" for s in SPLITS}


def test_without_utility_sets_neither_file_is_written(minted: Pack, tmp_path: Path) -> None:
    out = pack_to_tofu(minted, tmp_path / "out", utility_sets=False)
    assert out.shipped == {}
    assert not {f"{s}.json" for s in SPLITS} & set(out.files)
    assert not any((tmp_path / "out" / f"{s}.json").exists() for s in SPLITS)


def test_a_tofu_import_exports_its_own_rows(tmp_path: Path) -> None:
    src = write_tofu(tmp_path / "tofu")
    pack = tofu_to_pack(src, rows_per_entity=PER)
    out = pack_to_tofu(pack, tmp_path / "out")
    assert out.shipped == {} and out.files["real_authors_perturbed.json"] == 3
    back = read_tofu(tmp_path / "out")
    for split in SPLITS:
        assert [r.to_json() for r in back.rows(split)] == tofu_rows()[split]
    # a split the import left out is filled from the shipped set, and only that one
    only_ra = tofu_to_pack(src, rows_per_entity=PER, general=("real_authors_perturbed",))
    mixed = pack_to_tofu(only_ra, tmp_path / "mixed")
    assert list(mixed.shipped) == ["world_facts_perturbed.json"]
    assert mixed.files["real_authors_perturbed.json"] == 3 and mixed.files["world_facts_perturbed.json"] == 47


def test_export_names_may_not_take_the_utility_splits(minted: Pack, tmp_path: Path) -> None:
    with pytest.raises(PackError, match=r"must differ.*'world_facts_perturbed'.*\(R16\)"):
        pack_to_tofu(minted, tmp_path / "x", holdout="world_facts_perturbed")
    with pytest.raises(PackError, match=r"'real_authors_perturbed' from"):
        pack_to_tofu(minted, tmp_path / "x", forget="real_authors")


def test_the_cli_says_which_files_are_not_from_the_pack(
    minted: Pack, shipped: dict[str, UtilitySet], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_pack(minted, tmp_path / "pack")
    argv = ["packs", "export", "--format", "tofu", str(tmp_path / "pack"), "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "real_authors_perturbed.json: 48 rows" in out
    for split in SPLITS:
        used = shipped[split]
        assert f"{split}.json: not from the pack: remnant's shipped general-utility set {used.file} v1" in out
        assert f"sha256 {used.sha256}" in out
    assert main([*argv[:-1], str(tmp_path / "bare"), "--no-utility-sets"]) == 0
    out = capsys.readouterr().out
    assert "not from the pack" not in out and "real_authors_perturbed" not in out
    assert not (tmp_path / "bare" / "real_authors_perturbed.json").exists()


def _edit(change: Callable[[dict[str, Any]], None]) -> Callable[[bytes], bytes]:
    def apply(raw: bytes) -> bytes:
        data = json.loads(raw)
        change(data)
        return json.dumps(data).encode()

    return apply


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = data
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[int(last) if last.isdigit() else last] = value

    return change


def _repeat_question(data: dict[str, Any]) -> None:
    data["items"][5]["question"] = " " + data["items"][2]["question"].upper()


# corruption of a copy of real_authors.json -> what the one-line error must name
CORRUPT: dict[str, tuple[Callable[[bytes], bytes], str]] = {
    "an option is the answer": (
        _edit(_set("items.4.perturbed_answer.1", "mark twain")),  # items.4 is Mark Twain's, any case
        r"field 'items\.4\.perturbed_answer': holds the answer",
    ),
    "a repeated option": (
        _edit(_set("items.0.perturbed_answer.2", "Charlotte  Brontë")),
        r"field 'items\.0\.perturbed_answer': repeats an option",
    ),
    "two options": (
        _edit(_set("items.7.perturbed_answer", ["Thomas Hardy", "Anthony Trollope"])),
        r"field 'items\.7\.perturbed_answer': List should have at least 3 items",
    ),
    "a repeated question": (_edit(_repeat_question), r"field 'items\.5\.question': repeats items\.2's"),
    "an unknown field": (_edit(_set("items.1.topic", "novel")), r"field 'items\.1\.topic': Extra inputs"),
    "a number as answer": (_edit(_set("items.2.answer", 7)), r"field 'items\.2\.answer': Input should be"),
    "version 0": (_edit(_set("version", 0)), r"field 'version'"),
    "no items": (_edit(_set("items", [])), r"field 'items'"),
    "a duplicate key": (
        lambda raw: raw.replace(b'"version": 1', b'"version": 1, "version": 2', 1),
        "duplicate key 'version'",
    ),
    "not JSON": (lambda raw: raw[:-40], "cannot read as JSON"),
}


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_a_corrupted_set_names_the_file_and_field(case: str, tmp_path: Path) -> None:
    corrupt, expected = CORRUPT[case]
    raw = resources.files("remnant.packs").joinpath("data/real_authors.json").read_bytes()
    bad = tmp_path / "real_authors.json"
    bad.write_bytes(corrupt(raw))
    with pytest.raises(PackError, match=expected) as info:
        load_utility_set("real_authors_perturbed", bad)
    assert str(bad) in str(info.value) and info.value.requirement == "R10"


def test_an_intact_copy_loads_with_its_own_digest(tmp_path: Path) -> None:
    raw = resources.files("remnant.packs").joinpath("data/world_facts.json").read_bytes()
    copy = tmp_path / "wf.json"
    copy.write_bytes(raw)
    got = load_utility_set("world_facts_perturbed", copy)
    assert got.file == "wf.json" and got.sha256 == hashlib.sha256(raw).hexdigest() and len(got.rows) == 47
    with pytest.raises(PackError, match=r"no shipped utility set for split 'full'.*\(R10\)"):
        load_utility_set("full")
    with pytest.raises(PackError, match=r"missing\.json: cannot read"):
        load_utility_set("world_facts_perturbed", tmp_path / "missing.json")


def test_eval_computes_model_utility_on_a_minted_export(
    minted: Pack, tiny_llama_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scipy.stats import hmean  # type: ignore[import-untyped]

    from remnant.metrics.utility import MODEL_UTILITY_PARTS

    bare = pack_to_tofu(minted, tmp_path / "bare", forget="forget10", holdout="holdout10", utility_sets=False)
    base = [
        "eval",
        str(tiny_llama_dir),
        "--metrics",
        "model_utility",
        "--no-progress",
        "--max-new-tokens",
        "3",
    ]
    assert main([*base, "--data", str(bare.out), "--out", str(tmp_path / "bare-eval")]) == 2
    assert "real_authors_perturbed" in capsys.readouterr().err  # before: refused, naming the split

    data = pack_to_tofu(minted, tmp_path / "tofu", forget="forget10", holdout="holdout10").out
    out = tmp_path / "eval"
    assert main([*base, "--data", str(data), "--out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    log = json.loads((out / "TOFU_EVAL.json").read_text())
    parts = [log[name]["agg_value"] for name in MODEL_UTILITY_PARTS]
    assert len(parts) == 9 and all(p is not None and p >= 0 for p in parts)
    assert log["model_utility"]["agg_value"] == pytest.approx(float(hmean(parts)), abs=1e-12)
    # not any average: on a model never trained on the pack the retain ROUGE is ~0, which the harmonic mean
    # propagates and the arithmetic mean would not
    assert abs(log["model_utility"]["agg_value"] - sum(parts) / 9) > 1e-3
    assert printed["model_utility"] == pytest.approx(log["model_utility"]["agg_value"], abs=1e-12)
    # the ra and wf parts were computed on the shipped rows, one value per row
    assert len(log["ra_Q_A_Prob_normalised"]["value_by_index"]) == 48
    assert len(log["wf_Truth_Ratio"]["value_by_index"]) == 47
    assert log["wf_Q_A_ROUGE"]["value_by_index"]["0"]["ground_truth"] == "Paris"
    assert 0.0 < log["ra_Q_A_Prob_normalised"]["agg_value"] < 1.0
