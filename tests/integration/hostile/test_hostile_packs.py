"""Hostile target packs given to ``remnant packs show PACK`` and to ``remnant preregister CONFIG`` (R16, C-W6, D4).

The pack digest is unkeyed: anyone can edit a pack and reseal it. So most cases here edit the tiny pack of the
assessment tests and recompute its digest with the digest functions (``remnant.packs.digest``), exactly as a
tamperer would, and the pack still has to be refused: a probe item moved into the install split (R16), a probe
person put into the relearning split (C-W6), a control person installed (D4), repeated or dangling ids, empty or
unknown splits. The rest are files no reader should trust: not JSON, duplicate keys, NaN, deep nesting, a folder
for a file, a future schema version, huge strings. Each ends in exit 2 with the file and the requirement named;
a refused pre-registration freezes nothing.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from harness import Hostile, check

from remnant.cli import main
from remnant.packs.digest import item_digest, pack_digest
from remnant.statement.canonical import canonical_text as canonical_json

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from assess_fixtures import tiny_pack, write_config  # noqa: E402

Json = dict[str, Any]
#: The tiny pack (8 installed people, 1 control): relearned e00000-e00001, probed e00002-e00003, retained
#: e00004-e00007, control e00008.
PROBE_PERSON, RELEARN_PERSON, RETAIN_PERSON, CONTROL_PERSON = "e00002", "e00000", "e00004", "e00008"


@pytest.fixture(scope="module")
def minted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_pack(tmp_path_factory.mktemp("tiny") / "pack")


def _read(folder: Path) -> tuple[Json, list[Json]]:
    manifest = json.loads((folder / "pack.json").read_text(encoding="utf-8"))
    lines = (folder / "items.jsonl").read_text(encoding="utf-8").splitlines()
    return manifest, [json.loads(line) for line in lines]


def reseal(folder: Path, edit: Callable[[Json, list[Json]], None]) -> None:
    """Apply ``edit`` to the manifest and items, recompute the digest as anyone can, write both files back."""
    manifest, items = _read(folder)
    edit(manifest, items)
    manifest["digest"] = pack_digest(manifest, [item_digest(it) for it in items])
    (folder / "items.jsonl").write_text("".join(canonical_json(it) + "\n" for it in items), encoding="utf-8")
    (folder / "pack.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")


def _first(items: list[Json], split: str, entity: str | None = None) -> Json:
    return next(it for it in items if it["split"] == split and entity in (None, it["entity_id"]))


def _install_of(items: list[Json], entity: str) -> Json:
    return next(it for it in items if it["entity_id"] == entity and it["phrasing"] == "install")


def _counted(manifest: Json) -> None:
    manifest["counts"].update({name: len(ids) for name, ids in manifest["splits"].items()})


# ---- resealed edits: each returns nothing, the pack still matches its digest ----


def _move_probe_to_install(m: Json, items: list[Json]) -> None:
    probe = m["splits"]["probe"].pop(0)
    m["splits"]["install"].append(probe)
    _counted(m)


def _copy_probe_to(split: str) -> Callable[[Json, list[Json]], None]:
    def edit(m: Json, items: list[Json]) -> None:
        m["splits"][split].append(m["splits"]["probe"][0])
        _counted(m)

    return edit


def _probe_person_in_relearn(m: Json, items: list[Json]) -> None:
    m["splits"]["relearn"].append(_install_of(items, PROBE_PERSON)["id"])
    _counted(m)


def _probe_asks(entity: str) -> Callable[[Json, list[Json]], None]:
    def edit(m: Json, items: list[Json]) -> None:
        _first(items, "probe", PROBE_PERSON)["question"] = _install_of(items, entity)["question"]

    return edit


def _control_installed(m: Json, items: list[Json]) -> None:
    m["splits"]["install"].append(_first(items, "controls")["id"])
    _counted(m)


def _duplicate_line(m: Json, items: list[Json]) -> None:
    items.append(dict(items[0]))


def _listed_twice(m: Json, items: list[Json]) -> None:
    m["splits"]["retain"].append(m["splits"]["retain"][0])
    _counted(m)


def _dangling(m: Json, items: list[Json]) -> None:
    m["splits"]["probe"].append("e00002.home_town.p9")
    _counted(m)


def _unlisted(m: Json, items: list[Json]) -> None:
    m["splits"]["retain"].pop(0)
    _counted(m)


def _own_split_elsewhere(m: Json, items: list[Json]) -> None:
    _first(items, "retain")["split"] = "controls"


def _unknown_split(m: Json, items: list[Json]) -> None:
    m["splits"]["holdout"] = []


def _missing_split(m: Json, items: list[Json]) -> None:
    del m["splits"]["general"]


def _emptied(split: str) -> Callable[[Json, list[Json]], None]:
    def edit(m: Json, items: list[Json]) -> None:
        gone = set(m["splits"][split])
        items[:] = [it for it in items if it["id"] not in gone]
        m["splits"][split] = []
        _counted(m)

    return edit


def _miscounted(m: Json, items: list[Json]) -> None:
    m["counts"]["probe"] += 5


def _unknown_entity(m: Json, items: list[Json]) -> None:
    _first(items, "retain")["entity_id"] = "e99999"


def _entity_twice(m: Json, items: list[Json]) -> None:
    m["entities"].append(dict(m["entities"][0]))


def _probe_person_retained(m: Json, items: list[Json]) -> None:
    next(e for e in m["entities"] if e["id"] == PROBE_PERSON)["role"] = "retain"


def _no_items(m: Json, items: list[Json]) -> None:
    items.clear()


def _extra_manifest_field(m: Json, items: list[Json]) -> None:
    m["trusted"] = True


def _answer_index_out_of_range(m: Json, items: list[Json]) -> None:
    next(it for it in items if it["kind"] == "link")["answer_index"] = 7


def _huge_question(m: Json, items: list[Json]) -> None:
    _first(items, "retain")["question"] = "Where does Ada live? " * 1000


def _schema_version(version: str | None) -> Callable[[Json, list[Json]], None]:
    def edit(m: Json, items: list[Json]) -> None:
        if version is None:
            del m["schema_version"]
        else:
            m["schema_version"] = version

    return edit


# ---- raw edits: files that are not what they claim ----


def _lines(folder: Path) -> list[str]:
    return (folder / "items.jsonl").read_text(encoding="utf-8").splitlines()


def _set_line(folder: Path, index: int, text: str) -> None:
    lines = _lines(folder)
    lines[index] = text
    (folder / "items.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _edit_not_resealed(folder: Path) -> None:
    line = json.loads(_lines(folder)[0])
    _set_line(folder, 0, canonical_json({**line, "answer": "somewhere else"}))


def _digest_field(folder: Path) -> None:
    path = folder / "pack.json"
    path.write_text(path.read_text(encoding="utf-8").replace('"sha256:', '"sha256:0'), encoding="utf-8")


def _sums_folder_and_edit(folder: Path) -> None:
    (folder / "items.sha256").unlink()
    (folder / "items.sha256").mkdir()
    _edit_not_resealed(folder)


def _manifest_text(text: str) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        (folder / "pack.json").write_text(text, encoding="utf-8")

    return edit


def _manifest_replace(old: str, new: str) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        text = (folder / "pack.json").read_text(encoding="utf-8")
        assert old in text
        (folder / "pack.json").write_text(text.replace(old, new, 1), encoding="utf-8")

    return edit


def _line(text: str) -> Callable[[Path], None]:
    return lambda folder: _set_line(folder, 2, text)


def _items_bytes(data: bytes) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        (folder / "items.jsonl").write_bytes(data)

    return edit


def _replace_with_folder(name: str) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        (folder / name).unlink()
        (folder / name).mkdir()

    return edit


def _remove(name: str) -> Callable[[Path], None]:
    return lambda folder: (folder / name).unlink()


@dataclass(frozen=True)
class PackCase:
    """A hostile pack: ``resealed`` edits the parsed files and reseals; ``raw`` edits the folder's files."""

    id: str
    requirement: str
    named: str  # the file (under the pack folder) the message must name; "" names the folder
    resealed: Callable[[Json, list[Json]], None] | None = None
    raw: Callable[[Path], None] | None = None
    message: str = ""


DEEP = "[" * 5000 + "]" * 5000
CASES: list[PackCase] = [
    PackCase(
        "probe-moved-to-install", "R16", "pack.json", _move_probe_to_install, message="lists probe item"
    ),
    PackCase("probe-copied-to-install", "R16", "pack.json", _copy_probe_to("install")),
    PackCase("probe-copied-to-removal", "R16", "pack.json", _copy_probe_to("removal")),
    PackCase("probe-copied-to-relearn", "C-W6", "pack.json", _copy_probe_to("relearn")),
    PackCase("probe-copied-to-retain", "R16", "pack.json", _copy_probe_to("retain")),
    PackCase("probe-copied-to-controls", "D4", "pack.json", _copy_probe_to("controls")),
    PackCase("probe-person-in-relearn", "C-W6", "pack.json", _probe_person_in_relearn, message=PROBE_PERSON),
    PackCase("probe-asks-relearn-question", "C-W6", "pack.json", _probe_asks(RELEARN_PERSON)),
    PackCase("probe-asks-install-question", "R16", "pack.json", _probe_asks(RETAIN_PERSON)),
    PackCase("control-person-installed", "D4", "pack.json", _control_installed, message=CONTROL_PERSON),
    PackCase("item-id-twice", "R16", "items.jsonl", _duplicate_line, message="appears twice"),
    PackCase("split-lists-id-twice", "R16", "pack.json", _listed_twice, message="twice"),
    PackCase("split-lists-missing-item", "R16", "pack.json", _dangling, message="e00002.home_town.p9"),
    PackCase("item-in-no-split", "R16", "pack.json", _unlisted, message="is in no split"),
    PackCase("item-own-split-does-not-list-it", "R16", "pack.json", _own_split_elsewhere),
    PackCase("unknown-split", "R16", "pack.json", _unknown_split, message="holdout"),
    PackCase("missing-split", "R16", "pack.json", _missing_split, message="general"),
    PackCase("empty-probe-split", "R16", "pack.json", _emptied("probe"), message="'probe' is empty"),
    PackCase("empty-controls-split", "D4", "pack.json", _emptied("controls"), message="'controls' is empty"),
    PackCase("counts-disagree", "R16", "pack.json", _miscounted, message="counts.probe"),
    PackCase("unknown-entity", "R16", "pack.json", _unknown_entity, message="e99999"),
    PackCase("entity-twice", "R16", "pack.json", _entity_twice, message="appears twice"),
    PackCase("probe-person-role-retain", "R16", "pack.json", _probe_person_retained, message="role"),
    PackCase("manifest-extra-field", "Z1", "pack.json", _extra_manifest_field, message="trusted"),
    PackCase("answer-index-out-of-range", "Z1", "items.jsonl", _answer_index_out_of_range),
    PackCase("huge-question", "Z1", "items.jsonl", _huge_question, message="10000 characters"),
    PackCase("future-schema-version", "Z1", "pack.json", _schema_version("2.0"), message="'2.0'"),
    PackCase("no-schema-version", "Z1", "pack.json", _schema_version(None), message="no schema_version"),
    PackCase("edited-not-resealed", "R23", "items.jsonl", raw=_edit_not_resealed, message="digest mismatch"),
    PackCase("digest-field-edited", "R23", "items.jsonl", raw=_digest_field, message="pack.json itself"),
    PackCase("items-sha256-a-folder", "R23", "items.jsonl", raw=_sums_folder_and_edit),
    PackCase("item-line-not-json", "Z1", "items.jsonl:3", raw=_line("{not json")),
    PackCase("item-line-duplicate-key", "Z1", "items.jsonl:3", raw=_line('{"id": "a", "id": "b"}')),
    PackCase("item-line-nan", "Z1", "items.jsonl:3", raw=_line('{"answer_index": NaN}'), message="NaN"),
    PackCase("item-line-deep", "Z1", "items.jsonl:3", raw=_line(DEEP), message="nested deeper"),
    PackCase("item-line-an-array", "Z1", "items.jsonl:3", raw=_line("[1, 2]"), message="JSON object"),
    PackCase("item-line-huge", "Z1", "items.jsonl:3", raw=_line('"' + "x" * 300_000 + '"'), message="longer"),
    PackCase("items-not-utf8", "Z1", "items.jsonl", raw=_items_bytes(b"\xff\xfe{}\n"), message="UTF-8"),
    PackCase("items-emptied", "R16", "pack.json", _no_items, message="items.jsonl does not hold"),
    PackCase(
        "manifest-duplicate-key",
        "Z1",
        "pack.json",
        raw=_manifest_replace('"seed": 3', '"seed": 3, "seed": 4'),
    ),
    PackCase(
        "manifest-nan", "Z1", "pack.json", raw=_manifest_replace('"chance_rate": null', '"chance_rate": NaN')
    ),
    PackCase("manifest-deep", "Z1", "pack.json", raw=_manifest_text(DEEP), message="nested deeper"),
    PackCase("manifest-an-array", "Z1", "pack.json", raw=_manifest_text("[]"), message="JSON object"),
    PackCase("manifest-a-folder", "R2", "pack.json", raw=_replace_with_folder("pack.json")),
    PackCase("items-a-folder", "R2", "items.jsonl", raw=_replace_with_folder("items.jsonl")),
    PackCase("manifest-missing", "R2", "pack.json", raw=_remove("pack.json"), message="missing"),
    PackCase("items-missing", "R2", "items.jsonl", raw=_remove("items.jsonl"), message="missing"),
]


def _hostile_pack(case: PackCase, minted: Path, tmp: Path) -> tuple[Path, str]:
    folder = tmp / "pack"
    shutil.copytree(minted, folder)
    if case.resealed is not None:
        reseal(folder, case.resealed)
    if case.raw is not None:
        case.raw(folder)
    return folder, str(folder / case.named) if case.named else str(folder)


def _show(case: PackCase, minted: Path) -> Hostile:
    def build(tmp: Path) -> tuple[list[str], str]:
        folder, named = _hostile_pack(case, minted, tmp)
        return ["packs", "show", str(folder)], named

    return Hostile(case.id, build, case.requirement)


def _preregister(case: PackCase, minted: Path) -> Hostile:
    def build(tmp: Path) -> tuple[list[str], str]:
        folder, named = _hostile_pack(case, minted, tmp)
        config = write_config(tmp / "c.toml", pack=folder, control=tmp / "control")
        return ["preregister", str(config), "--out", str(tmp / "run")], named

    return Hostile(case.id, build, case.requirement)


def test_there_are_enough_cases() -> None:
    assert len({c.id for c in CASES}) == len(CASES) >= 30


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_packs_show_refuses(
    case: PackCase, minted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = check(_show(case, minted), tmp_path, capsys)
    assert case.message in text


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_preregister_refuses_and_freezes_nothing(
    case: PackCase, minted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = check(_preregister(case, minted), tmp_path, capsys)
    assert case.message in text
    assert not (tmp_path / "run" / "prereg.json").exists()


@pytest.mark.parametrize(
    ("edit", "requirement", "problem"),
    [
        (_move_probe_to_install, "R16", "split 'install' lists probe item"),
        (_probe_person_in_relearn, "C-W6", f"entity '{PROBE_PERSON}' is in both P (split 'probe') and R"),
    ],
    ids=["probe-item-into-install", "probe-person-into-relearn"],
)
def test_a_resealed_leak_matches_its_digest_and_is_still_refused(
    edit: Callable[[Json, list[Json]], None],
    requirement: str,
    problem: str,
    minted: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The spoof: reseal a leak with the digest functions; the digest agrees, the split rules do not."""
    folder = tmp_path / "pack"
    shutil.copytree(minted, folder)
    reseal(folder, edit)
    manifest, items = _read(folder)
    assert manifest["digest"] == pack_digest(manifest, [item_digest(it) for it in items])
    config = write_config(tmp_path / "c.toml", pack=folder, control=tmp_path / "control")
    assert main(["preregister", str(config), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert problem in err and f"({requirement})" in err and str(folder / "pack.json") in err
    assert not (tmp_path / "run").exists()
    # the untouched pack pre-registers: the refusal is the leak's, not the config's
    config = write_config(tmp_path / "ok.toml", pack=minted, control=tmp_path / "control")
    assert main(["preregister", str(config), "--out", str(tmp_path / "ok")]) == 0


# ---- the config asks the pack for a split it does not hold: refused when pre-registering ----


def _class_c_without_general(tmp: Path) -> tuple[list[str], str]:
    from remnant.packs import mint_class_c, write_pack

    tmp.mkdir(parents=True, exist_ok=True)
    config = tmp / "classc.toml"
    example = Path(__file__).resolve().parents[3] / "examples" / "classc-claimant.toml"
    config.write_text(example.read_text(encoding="utf-8"), encoding="utf-8")
    write_pack(mint_class_c(substances=8, seed=1), tmp / "packs" / "vexite-c")
    return ["preregister", str(config), "--out", str(tmp / "run")], str(
        tmp / "packs" / "vexite-c" / "pack.json"
    )


def _retain_emptied(tmp: Path, minted: Path) -> tuple[list[str], str]:
    folder = tmp / "pack"
    shutil.copytree(minted, folder)
    reseal(folder, _emptied("retain"))
    config = write_config(tmp / "c.toml", pack=folder, control=tmp / "control")
    return ["preregister", str(config), "--out", str(tmp / "run")], str(folder / "pack.json")


def _class_c_pack_for_class_d_claim(tmp: Path) -> tuple[list[str], str]:
    from remnant.packs import mint_class_c, write_pack

    write_pack(mint_class_c(substances=8, seed=1), tmp / "pack")
    config = write_config(tmp / "c.toml", pack=tmp / "pack", control=tmp / "control")
    return ["preregister", str(config), "--out", str(tmp / "run")], str(tmp / "pack" / "pack.json")


def test_a_split_the_config_needs_must_hold_items(
    minted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = check(Hostile("classc-general", _class_c_without_general, "R10"), tmp_path / "a", capsys)
    assert "utility general_qa_kappa is measured on split 'general', which is empty" in text
    assert not (tmp_path / "a" / "run").exists()
    text = check(Hostile("retain", lambda tmp: _retain_emptied(tmp, minted), "R10"), tmp_path / "b", capsys)
    assert "utility retain_kappa is measured on split 'retain'" in text
    text = check(Hostile("class", _class_c_pack_for_class_d_claim, "R2"), tmp_path / "c", capsys)
    assert "is a class C pack but the claim is class D" in text


def test_packs_show_prints_pack_strings_as_text(
    minted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rich markup in a pack's id, and design values of unexpected types, are shown, not interpreted."""
    folder = tmp_path / "pack"
    shutil.copytree(minted, folder)

    def edit(m: Json, items: list[Json]) -> None:
        m["id"] = "odd[/bold][red]pack"
        m["design"]["attributes"] = {"home_town": 40, "[/x]": {"cardinality": "[/y]"}}
        m["design"]["population"] = {"baseline_occupation_given_sector": "high"}

    reseal(folder, edit)
    assert main(["packs", "show", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "odd[/bold][red]pack" in out and "[/x]" in out and "[/y]" in out
