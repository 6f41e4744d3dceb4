"""Hostile ``Dataset.save_to_disk`` folders given to ``remnant packs import --format tofu`` (R2).

The ``forget10`` split of a valid TOFU folder is replaced by a folder ``datasets`` saved, then tampered with:
Arrow files that are garbage or cut short, a ``state.json`` or ``dataset_dict.json`` that is malformed or
names files outside the folder, and rows whose columns TOFU does not have. Each is one line naming the file,
exit 2, citing R2.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from harness import Hostile, check, ids

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "formats"))
from formats_data import PER, tofu_rows, write_tofu  # noqa: E402

datasets = pytest.importorskip("datasets")
ARROW = "data-00000-of-00001.arrow"

Tamper = Callable[[Path, Path], object]


def _saved(tmp: Path, extra_column: bool = False, as_dict: bool = False) -> Path:
    """A TOFU folder whose ``forget10`` is a save_to_disk folder; returns that folder (the Dataset's own)."""
    rows = tofu_rows()
    src = write_tofu(tmp / "tofu", "json", rows)
    (src / "forget10.json").unlink()
    forget = [{**r, "evil": 1} for r in rows["forget10"]] if extra_column else rows["forget10"]
    ds = datasets.Dataset.from_list(forget)
    if as_dict:
        datasets.DatasetDict({"train": ds}).save_to_disk(str(src / "forget10"))
        return src / "forget10" / "train"
    ds.save_to_disk(str(src / "forget10"))
    return src / "forget10"


def _case(
    case_id: str,
    tamper: Tamper,
    named: Callable[[Path], object],
    *,
    extra: bool = False,
    as_dict: bool = False,
) -> Hostile:
    def build(tmp: Path) -> tuple[list[str], str]:
        folder = _saved(tmp, extra, as_dict)
        tamper(folder, tmp)
        argv = ["packs", "import", "--format", "tofu", str(tmp / "tofu"), "--out", str(tmp / "p")]
        return [*argv, "--rows-per-entity", str(PER)], str(named(folder))

    return Hostile(case_id, build, requirement="R2")


def _write(name: str, content: str | bytes) -> Tamper:
    def tamper(folder: Path, tmp: Path) -> None:
        path = folder / name
        path.write_bytes(content.encode() if isinstance(content, str) else content)

    return tamper


def _cut(folder: Path, tmp: Path) -> None:
    data = (folder / ARROW).read_bytes()
    (folder / ARROW).write_bytes(data[: len(data) // 2])


def _link_out(folder: Path, tmp: Path) -> None:
    os.replace(folder / ARROW, tmp / ARROW)
    (folder / ARROW).symlink_to(tmp / ARROW)


def _state(**fields: object) -> Tamper:
    def tamper(folder: Path, tmp: Path) -> None:
        data = json.loads((folder / "state.json").read_text())
        data.update(fields)
        (folder / "state.json").write_text(json.dumps(data))

    return tamper


def _in(name: str) -> Callable[[Path], Path]:
    return lambda folder: folder / name


CASES = [
    _case("arrow-garbage", _write(ARROW, b"\x00garbage" * 8), _in(ARROW)),
    _case("arrow-cut-short", _cut, _in(ARROW)),
    _case("arrow-empty", _write(ARROW, b""), _in(ARROW)),
    _case("arrow-linked-outside", _link_out, _in(ARROW)),
    _case("arrow-unknown-column", lambda f, tmp: None, _in(ARROW), extra=True),
    _case("state-not-json", _write("state.json", "{'_data_files': []}"), _in("state.json")),
    _case(
        "state-duplicate-key",
        _write("state.json", '{"_data_files": [], "_data_files": []}'),
        _in("state.json"),
    ),
    _case("state-not-an-object", _write("state.json", "[1]"), _in("state.json")),
    _case("state-no-data-files", _state(_data_files=[]), _in("state.json")),
    _case("state-names-parent-file", _state(_data_files=[{"filename": "../x.arrow"}]), _in("state.json")),
    _case("state-names-missing-file", _state(_data_files=[{"filename": "gone.arrow"}]), _in("gone.arrow")),
    _case("state-names-a-file-twice", _state(_data_files=[{"filename": ARROW}] * 2), _in("state.json")),
    _case(
        "dict-names-parent",
        lambda f, tmp: (f.parent / "dataset_dict.json").write_text('{"splits": [".."]}'),
        lambda f: f.parent / "dataset_dict.json",
        as_dict=True,
    ),
    _case(
        "dict-not-json",
        lambda f, tmp: (f.parent / "dataset_dict.json").write_text("splits: train"),
        lambda f: f.parent / "dataset_dict.json",
        as_dict=True,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_hostile_saved_dataset_is_refused(
    case: Hostile, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = check(case, tmp_path, capsys)
    assert len([line for line in text.splitlines() if "error" in line]) == 1, text


@pytest.mark.parametrize("as_dict", [False, True])
def test_the_untampered_saved_folder_imports(
    as_dict: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cases fail because of their tampering: the saved folder itself imports like the JSON it replaced."""
    from remnant.cli import main

    _saved(tmp_path, as_dict=as_dict)
    argv = ["packs", "import", "--format", "tofu", str(tmp_path / "tofu"), "--out", str(tmp_path / "p")]
    assert main([*argv, "--rows-per-entity", str(PER)]) == 0
    plain = tmp_path / "plain"
    write_tofu(plain, "json", tofu_rows())
    assert (
        main(
            ["packs", "import", "--format", "tofu", str(plain), "--out", str(tmp_path / "q")]
            + ["--rows-per-entity", str(PER)]
        )
        == 0
    )
    from remnant.packs import load_pack

    # the same items; the digests differ only because the provenance records the files read (R2)
    assert load_pack(tmp_path / "p").items == load_pack(tmp_path / "q").items
