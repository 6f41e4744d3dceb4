"""TOFU and MUSE folders as target packs, and packs as TOFU folders: the split mapping (R16, C-W6, D4), the
provenance in the manifest, and the round trip pack -> TOFU -> pack."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from formats_data import PER, muse_rows, tofu_rows, write_muse, write_split, write_tofu

from remnant.errors import ConfigError, PackError
from remnant.formats import muse_to_pack, pack_to_tofu, read_tofu, tofu_to_pack
from remnant.packs import ClassDSpec, load_pack, mint_class_c, mint_class_d, write_pack
from remnant.packs.schema import Pack


def _pack(root: Path, **kw: Any) -> Pack:
    return tofu_to_pack(root, rows_per_entity=PER, **kw)


def _counts(pack: Pack) -> dict[str, int]:
    return {name: len(ids) for name, ids in pack.manifest.splits.items()}


@pytest.fixture
def tofu(tmp_path: Path) -> Path:
    return write_tofu(tmp_path / "tofu")


def test_tofu_splits_map_onto_the_pack(tofu: Path, tmp_path: Path) -> None:
    pack = _pack(tofu)
    # 4 forget authors (2 relearned, 2 probed), 6 retain authors, 2 held out, 4 rows each
    assert _counts(pack) == {
        "install": 40, "removal": 16, "probe": 8, "relearn": 8, "retain": 8, "controls": 8, "general": 6
    }  # fmt: skip
    roles = {e.id: e.role for e in pack.manifest.entities}
    assert (
        sorted(roles.values()).count("forget_relearn") == 2 and sorted(roles.values()).count("control") == 2
    )
    p_ent = {it.entity_id for it in pack.split("probe")}
    r_ent = {it.entity_id for it in pack.split("relearn")}
    assert p_ent == {"f0002", "f0003"} and r_ent == {"f0000", "f0001"}  # C-W6: author-level split
    install_q = {it.question for it in pack.split("install")}
    for it in pack.split("probe"):
        assert (
            it.question not in install_q and it.paraphrased_question in install_q
        )  # R16: the paraphrase is asked
        assert it.phrasing == "probe" and it.perturbed_answer is not None and len(it.perturbed_answer) == 3
    assert [it.question for it in pack.split("install")][:3] == [
        r["question"] for r in tofu_rows()["retain90"][:3]
    ]
    assert {it.kind for it in pack.split("general")} == {"general"}
    assert all(it.entity_id in {"h0000", "h0001"} for it in pack.split("controls"))
    write_pack(pack, tmp_path / "pack")
    assert load_pack(tmp_path / "pack").digest == pack.digest  # the split rules every load runs pass


def test_the_manifest_records_source_digests_and_split_choice(tofu: Path) -> None:
    design = _pack(tofu).manifest.design
    forget = design["source"]["splits"]["forget10"]
    assert forget["files"] == [
        {"path": "forget10.json", "sha256": hashlib.sha256((tofu / "forget10.json").read_bytes()).hexdigest(),
         "rows": 16, "format": "jsonl"}
    ]  # fmt: skip
    assert set(design["source"]["splits"]) == {
        "forget10", "forget10_perturbed", "retain90", "retain_perturbed", "holdout10",
        "real_authors_perturbed", "world_facts_perturbed",
    }  # fmt: skip
    assert design["import"]["forget"] == "forget10" and design["import"]["relearn_fraction"] == 0.5
    assert design["import"]["relearn_perturbed_rows_left_out"] == 8
    assert "R18" in design["public_fixture"]


def test_import_is_deterministic_and_the_digest_follows_the_source_bytes(tofu: Path, tmp_path: Path) -> None:
    first, second = _pack(tofu), _pack(tofu)
    assert first.digest == second.digest
    other = write_tofu(tmp_path / "parquet", "parquet")
    from_parquet = _pack(other)
    assert from_parquet.items == first.items and from_parquet.manifest.splits == first.manifest.splits
    assert from_parquet.digest != first.digest  # the source files (recorded) differ
    rows = tofu_rows()
    rows["holdout10"][0]["answer"] += "!"
    changed = _pack(write_tofu(tmp_path / "changed", rows=rows))
    assert changed.digest != first.digest


def test_options_leave_splits_empty_and_fractions_move_authors(tofu: Path) -> None:
    pack = _pack(tofu, holdout=None, retain_eval=None, general=(), relearn_fraction=0.0)
    assert _counts(pack) == {
        "install": 40, "removal": 16, "probe": 16, "relearn": 0, "retain": 0, "controls": 0, "general": 0
    }  # fmt: skip
    assert _counts(_pack(tofu, relearn_fraction=0.75))["relearn"] == 12
    with pytest.raises(PackError, match=r"split 'controls' is empty.*\(D4\)"):
        _pack(tofu, holdout=None, pack_class="D")
    assert _pack(tofu, pack_class="D").manifest.pack_class == "D"


def test_round_trip_pack_tofu_pack(tofu: Path, tmp_path: Path) -> None:
    pack = _pack(tofu)
    out = pack_to_tofu(pack, tmp_path / "out", forget="forget10", retain="retain90", holdout="holdout10")
    assert out.files == {
        "forget10.json": 16, "forget10_perturbed.json": 8, "retain90.json": 24, "retain_perturbed.json": 8,
        "holdout10.json": 8, "full.json": 40, "real_authors_perturbed.json": 3, "world_facts_perturbed.json": 3,
    }  # fmt: skip
    back = read_tofu(tmp_path / "out")
    source = tofu_rows()
    for name in ("forget10", "retain90", "holdout10", "retain_perturbed", "full", "world_facts_perturbed"):
        assert [r.to_json() for r in back.rows(name)] == source[name], name
    # P's rows come back as TOFU wrote them (question and paraphrase in their places); R's rows are not in P
    assert [r.to_json() for r in back.rows("forget10_perturbed")] == source["forget10_perturbed"][8:]
    again = _pack(tmp_path / "out")
    assert again.items == pack.items
    assert again.manifest.splits == pack.manifest.splits and again.manifest.entities == pack.manifest.entities


def test_export_of_a_minted_pack(tmp_path: Path) -> None:
    pack = mint_class_d(ClassDSpec(entities=8, controls=2, seed=5, truth_ratio_options=True))
    out = pack_to_tofu(pack, tmp_path / "out")
    p_facts = [it for it in pack.split("probe") if it.kind == "fact"]
    assert out.files["forget_perturbed.json"] == len(p_facts) == 2 * 5  # 2 P people (of 4 forgotten), 5 facts
    assert out.files["forget.json"] == len(pack.split("removal"))
    assert (
        out.left_out["probe: link items (no TOFU form)"]
        == out.left_out["probe: infer items (no TOFU form)"]
        == 2
    )
    assert out.left_out["general: items not imported from a TOFU split"] == len(pack.split("general"))
    rows = read_tofu(tmp_path / "out", ["forget_perturbed"]).rows("forget_perturbed")
    assert [r.question for r in rows] == [it.question for it in p_facts]
    assert [r.perturbed_answer for r in rows] == [it.perturbed_answer for it in p_facts]
    assert all(r.paraphrased_question is None for r in rows)
    plain = pack_to_tofu(mint_class_c(substances=4, seed=1), tmp_path / "plain")
    assert "forget_perturbed.json" not in plain.files  # nothing carries perturbed answers
    assert plain.left_out["probe: items without paraphrased and perturbed answers"] == 8


def test_export_replaces_the_folder_and_refuses_clashing_names(tofu: Path, tmp_path: Path) -> None:
    pack = _pack(tofu)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "stale.json").write_text("{}", encoding="utf-8")
    pack_to_tofu(pack, tmp_path / "out")
    assert not (tmp_path / "out" / "stale.json").exists()
    with pytest.raises(PackError, match="must differ"):
        pack_to_tofu(pack, tmp_path / "x", retain="full")
    with pytest.raises(ConfigError, match="not a plain name"):
        pack_to_tofu(pack, tmp_path / "x", forget="../f")


def _with(tofu: Path, tmp_path: Path, split: str, index: int, **change: Any) -> Path:
    rows = tofu_rows()
    rows[split][index] = {k: v for k, v in {**rows[split][index], **change}.items() if v is not None}
    return write_tofu(tmp_path / "bad", rows=rows)


def test_mapping_errors_name_the_row_and_requirement(tofu: Path, tmp_path: Path) -> None:
    bad = _with(tofu, tmp_path, "forget10_perturbed", 9, question="A question no forget row asks?")
    with pytest.raises(
        PackError, match=r"forget10_perturbed\.json row 10: its question is no row of 'forget10'.*\(C-W6\)"
    ):
        _pack(bad)
    bad = _with(tofu, tmp_path, "forget10_perturbed", 9, paraphrased_question=None)
    with pytest.raises(
        PackError, match=r"forget10_perturbed\.json row 10: field 'paraphrased_question' missing.*\(R16\)"
    ):
        _pack(bad)
    rows = tofu_rows()
    del rows["forget10_perturbed"][12]
    with pytest.raises(
        PackError, match=r"forget10\.json row 13: a row of P author f0003 has no row in.*\(R16\)"
    ):
        _pack(write_tofu(tmp_path / "short", rows=rows))
    forget_q = tofu_rows()["forget10"][0]["question"]
    bad = _with(tofu, tmp_path, "holdout10", 2, question=forget_q)
    with pytest.raises(PackError, match=r"holdout10\.json row 3: repeats an installed question.*\(D4\)"):
        _pack(bad)
    bad = _with(tofu, tmp_path, "retain_perturbed", 1, question=forget_q)
    with pytest.raises(
        PackError, match=r"retain_perturbed\.json row 2: asks a question of 'forget10'.*\(R16\)"
    ):
        _pack(bad)
    install_q = tofu_rows()["retain90"][5]["question"]
    bad = _with(tofu, tmp_path, "forget10_perturbed", 9, paraphrased_question=install_q)
    with pytest.raises(
        PackError, match=r"probe item 'forget10_perturbed\.00009' repeats the question.*\(R16\)"
    ):
        _pack(bad)
    bad = _with(tofu, tmp_path, "forget10", 0, answer="x" * 10_001)
    with pytest.raises(PackError, match=r"forget10\.json row 1: cannot be a pack item: field 'answer'"):
        _pack(bad)


def test_parameter_errors(tofu: Path) -> None:
    with pytest.raises(PackError, match="named for two parts"):
        _pack(tofu, holdout="retain90")
    with pytest.raises(PackError, match=r"relearn fraction 1\.0 is not in \[0, 1\)"):
        _pack(tofu, relearn_fraction=1.0)
    with pytest.raises(PackError, match="rows_per_entity is 0"):
        tofu_to_pack(tofu, rows_per_entity=0)
    with pytest.raises(ConfigError, match="split 'forget05' not found"):
        tofu_to_pack(tofu, "forget05", "retain95", "holdout05")


def test_a_retain_row_without_a_retain_author_is_kept_without_an_entity(tofu: Path, tmp_path: Path) -> None:
    bad = _with(tofu, tmp_path, "retain_perturbed", 3, question="Who edits the Quillonby letters?")
    pack = _pack(bad)
    assert [it.entity_id for it in pack.split("retain")].count(None) == 1
    assert pack.manifest.design["import"]["retain_eval_rows_without_author"] == 1


# --- MUSE ---------------------------------------------------------------------------------------------------


def test_muse_parts_map_onto_the_pack(tmp_path: Path) -> None:
    root = write_muse(tmp_path / "muse")
    pack = muse_to_pack(root)
    assert _counts(pack) == {
        "install": 6, "removal": 6, "probe": 5, "relearn": 3, "retain": 4, "controls": 0, "general": 0
    }  # fmt: skip
    first = pack.split("install")[0]
    assert (first.question, first.answer, first.attribute) == (
        "The harbour council met on day 0 and", " voted to close pier 0.", "verbmem"
    )  # fmt: skip
    assert [it.question for it in pack.split("probe")] == [
        r["question"] for r in muse_rows()[("knowmem", "forget_qa")]
    ]
    design = pack.manifest.design
    assert design["icl"]["forget_qa_icl"] == [{"question": "Which town?", "answer": "Orvelle"}]
    assert set(design["source"]["splits"]) == {
        "verbmem/forget", "knowmem/forget_qa", "knowmem/retain_qa", "knowmem/forget_qa_icl", "knowmem/retain_qa_icl"
    }  # fmt: skip
    write_pack(pack, tmp_path / "pack")
    assert load_pack(tmp_path / "pack").digest == pack.digest
    assert _counts(muse_to_pack(root, relearn_fraction=0.0))["relearn"] == 0


def test_muse_needs_verbmem_and_knowmem_forget(tmp_path: Path) -> None:
    rows = muse_rows()
    del rows[("knowmem", "forget_qa")]
    with pytest.raises(ConfigError, match=r"knowmem: split 'forget_qa' not found"):
        muse_to_pack(write_muse(tmp_path / "muse", rows=rows))
    only = {k: v for k, v in muse_rows().items() if k in {("verbmem", "forget"), ("knowmem", "forget_qa")}}
    pack = muse_to_pack(write_muse(tmp_path / "min", "jsonl", rows=only))
    assert _counts(pack)["retain"] == 0 and pack.manifest.design["icl"] == {}


def test_muse_a_knowmem_question_that_is_a_verbmem_prompt_breaks_r16(tmp_path: Path) -> None:
    rows = muse_rows()
    rows[("knowmem", "forget_qa")][1]["question"] = rows[("verbmem", "forget")][4]["prompt"]
    with pytest.raises(
        PackError, match=r"probe item 'knowmem\.forget_qa\.00001' repeats the question.*\(R16\)"
    ):
        muse_to_pack(write_muse(tmp_path / "muse", rows=rows))
    write_split(tmp_path / "m2" / "verbmem", "forget", [{"prompt": "p", "gt": "g" * 10_001}], "jsonl")
    write_split(tmp_path / "m2" / "knowmem", "forget_qa", [{"question": "q", "answer": "a"}], "jsonl")
    with pytest.raises(PackError, match=r"verbmem/forget\.jsonl row 1: cannot be a pack item"):
        muse_to_pack(tmp_path / "m2")
