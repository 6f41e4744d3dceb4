"""Hostile TOFU and MUSE folders given to ``remnant packs import`` and packs to ``remnant packs export`` (R2).

A malformed row is exit 2 naming the file (and line or row) and R2; a folder whose splits cannot map onto a
pack's without breaking a split rule names the row and that rule (R16, C-W6, D4).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from harness import Hostile, check, ids

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "formats"))
from formats_data import PER, muse_rows, tofu_rows, write_muse, write_split, write_tofu  # noqa: E402

Rows = dict[str, list[dict[str, Any]]]


def _tofu(
    change: Callable[[Rows], None], name: str, layout: str = "json"
) -> Callable[[Path], tuple[list[str], str]]:
    def build(tmp: Path) -> tuple[list[str], str]:
        rows = tofu_rows()
        change(rows)
        src = write_tofu(tmp / "tofu", layout, rows)
        return [
            "packs",
            "import",
            "--format",
            "tofu",
            str(src),
            "--out",
            str(tmp / "p"),
            "--rows-per-entity",
            str(PER),
        ], name

    return build


def _raw_line(split: str, line: str) -> Callable[[Path], tuple[list[str], str]]:
    def build(tmp: Path) -> tuple[list[str], str]:
        src = write_tofu(tmp / "tofu")
        with (src / f"{split}.json").open("a", encoding="utf-8") as handle:
            handle.write(line)
        return [
            "packs",
            "import",
            "--format",
            "tofu",
            str(src),
            "--out",
            str(tmp / "p"),
            "--rows-per-entity",
            str(PER),
        ], f"{split}.json:"

    return build


def _set(split: str, i: int, **change: Any) -> Callable[[Rows], None]:
    def apply(rows: Rows) -> None:
        rows[split][i] = {k: v for k, v in {**rows[split][i], **change}.items() if v is not None}

    return apply


def _folder_for_file(tmp: Path) -> tuple[list[str], str]:
    src = write_tofu(tmp / "tofu")
    (src / "retain90.json").unlink()
    (src / "retain90.json").mkdir()
    return ["packs", "import", "--format", "tofu", str(src), "--out", str(tmp / "p")], "retain90.json"


def _muse_missing_gt(tmp: Path) -> tuple[list[str], str]:
    rows = muse_rows()
    rows[("verbmem", "forget")][3] = {"prompt": "only a prompt"}
    src = write_muse(tmp / "muse", "jsonl", rows)
    return [
        "packs",
        "import",
        "--format",
        "muse",
        str(src),
        "--out",
        str(tmp / "p"),
    ], "verbmem/forget.jsonl:4"


def _parquet_number(tmp: Path) -> tuple[list[str], str]:
    src = write_tofu(tmp / "tofu", "parquet")
    write_split(src, "holdout10", [{"question": 7, "answer": "a"}], "parquet")
    return [
        "packs",
        "import",
        "--format",
        "tofu",
        str(src),
        "--out",
        str(tmp / "p"),
    ], "holdout10.parquet row 1"


def _export_missing(tmp: Path) -> tuple[list[str], str]:
    return ["packs", "export", "--format", "tofu", str(tmp / "nopack"), "--out", str(tmp / "o")], "nopack"


def _out_is_a_file(tmp: Path) -> tuple[list[str], str]:
    src = write_tofu(tmp / "tofu")
    (tmp / "taken").write_text("x", encoding="utf-8")
    return ["packs", "import", "--format", "tofu", str(src), "--out", str(tmp / "taken")], "taken"


def _perturbed_not_list(rows: Rows) -> None:
    rows["forget10_perturbed"][2]["perturbed_answer"] = "one wrong answer"


CASES = [
    Hostile("nan", _raw_line("forget10", '{"question": "q", "answer": NaN}\n'), requirement="R2"),
    Hostile(
        "duplicate-key",
        _raw_line("holdout10", '{"question": "q", "question": "r", "answer": "a"}\n'),
        requirement="R2",
    ),
    Hostile("not-an-object", _raw_line("retain90", '"just a string"\n'), requirement="R2"),
    Hostile("missing-field", _tofu(_set("retain90", 5, answer=None), "retain90.json:6"), requirement="R2"),
    Hostile("wrong-type", _tofu(_set("forget10", 1, question=12), "forget10.json:2"), requirement="R2"),
    Hostile(
        "perturbed-not-a-list", _tofu(_perturbed_not_list, "forget10_perturbed.json:3"), requirement="R2"
    ),
    Hostile("split-file-is-a-folder", _folder_for_file, requirement="R2"),
    Hostile("parquet-wrong-type", _parquet_number, requirement="R2"),
    Hostile("muse-missing-gt", _muse_missing_gt, requirement="R2"),
    Hostile(
        "perturbed-row-of-no-author",
        _tofu(
            _set("forget10_perturbed", 9, question="Whose question is this?"),
            "forget10_perturbed.json row 10",
        ),
        requirement="C-W6",
    ),
    Hostile(
        "probe-without-paraphrase",
        _tofu(_set("forget10_perturbed", 12, paraphrased_question=None), "forget10_perturbed.json row 13"),
        requirement="R16",
    ),
    Hostile(
        "holdout-installed",
        _tofu(_set("holdout10", 0, question=tofu_rows()["retain90"][0]["question"]), "holdout10.json row 1"),
        requirement="D4",
    ),
    Hostile("export-missing-pack", _export_missing, requirement="R2"),
    Hostile("out-is-a-file", _out_is_a_file, requirement="R2"),
]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_hostile_formats(case: Hostile, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    check(case, tmp_path, capsys)
