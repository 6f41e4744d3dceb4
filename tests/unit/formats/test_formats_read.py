"""Reading TOFU and MUSE folders: every layout gives the same typed rows, provenance names each file's bytes, and
every malformed input is one ConfigError naming the file, the line (or Parquet row) and the field (R2)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from formats_data import jsonl, muse_rows, tofu_rows, write_muse, write_parquet, write_split, write_tofu

from remnant.errors import ConfigError
from remnant.formats import KnowmemRow, TextRow, VerbmemRow, read_muse, read_tofu
from remnant.formats.muse import present_parts
from remnant.formats.tofu import present_splits

LAYOUTS = ("json", "jsonl", "parquet", "shards", "folder")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_reads_the_rows_written(tmp_path: Path, layout: str) -> None:
    rows = tofu_rows()
    data = read_tofu(write_tofu(tmp_path / "tofu", layout))
    assert list(data.splits) == [s for s in present_splits(tmp_path / "tofu")]
    for name, written in rows.items():
        assert [r.to_json() for r in data.rows(name)] == written, name
    perturbed = data.rows("forget10_perturbed")[5]
    assert isinstance(perturbed.perturbed_answer, list) and len(perturbed.perturbed_answer) == 3
    assert data.rows("forget10")[0].paraphrased_answer is None


@pytest.mark.parametrize(
    ("layout", "files", "fmt"), [("json", 1, "jsonl"), ("shards", 2, "parquet"), ("folder", 1, "parquet")]
)
def test_provenance_names_each_file_its_digest_and_rows(
    tmp_path: Path, layout: str, files: int, fmt: str
) -> None:
    root = write_tofu(tmp_path / "tofu", layout)
    source = read_tofu(root, ["forget10"]).provenance()["splits"]["forget10"]
    assert source["layout"] == layout and source["rows"] == 16 and len(source["files"]) == files
    for f in source["files"]:
        assert f["format"] == fmt
        assert f["sha256"] == _sha(root / f["path"])  # relative to the folder, sha256 of the bytes read
    assert sum(f["rows"] for f in source["files"]) == 16


def test_provenance_changes_with_one_byte(tmp_path: Path) -> None:
    root = write_tofu(tmp_path / "tofu")
    before = read_tofu(root, ["holdout10"]).provenance()
    path = root / "holdout10.json"
    path.write_text(path.read_text(encoding="utf-8").replace("Unseen", "Unsean", 1), encoding="utf-8")
    after = read_tofu(root, ["holdout10"]).provenance()
    assert (
        before["splits"]["holdout10"]["files"][0]["sha256"]
        != after["splits"]["holdout10"]["files"][0]["sha256"]
    )


def test_parquet_goes_before_json_and_the_json_is_recorded_as_ignored(tmp_path: Path) -> None:
    root = tmp_path / "tofu"
    write_split(root, "forget10", tofu_rows()["forget10"], "parquet")
    (root / "forget10.json").write_text(jsonl([{"question": "stale?", "answer": "stale"}]), encoding="utf-8")
    data = read_tofu(root, ["forget10"])
    assert len(data.rows("forget10")) == 16
    assert data.provenance()["splits"]["forget10"]["ignored"] == ["forget10.json"]


def test_an_index_column_is_dropped_and_a_bad_one_refused(tmp_path: Path) -> None:
    root = tmp_path / "tofu"
    rows = [{**r, "index": i} for i, r in enumerate(tofu_rows()["holdout10"])]
    write_split(root, "holdout10", rows, "parquet")
    assert read_tofu(root, ["holdout10"]).rows("holdout10")[3].to_json() == tofu_rows()["holdout10"][3]
    (root / "holdout10.parquet").unlink()
    (root / "holdout10.json").write_text(
        jsonl([{"question": "q", "answer": "a", "index": -1}]), encoding="utf-8"
    )
    with pytest.raises(ConfigError, match=r"holdout10\.json:1: field 'index'"):
        read_tofu(root, ["holdout10"])


def _one_line(tmp_path: Path, text: str, split: str = "forget10") -> Path:
    root = tmp_path / "tofu"
    root.mkdir(exist_ok=True)
    good = jsonl([{"question": "q0", "answer": "a0"}])
    (root / f"{split}.json").write_bytes(good.encode() + text.encode("utf-8", "surrogateescape"))
    return root


HOSTILE_LINES: list[tuple[str, str, str]] = [
    ("missing field", '{"question": "q"}\n', r"forget10\.json:2: field 'answer': Field required"),
    (
        "wrong type",
        '{"question": 5, "answer": "a"}\n',
        r"forget10\.json:2: field 'question': Input should be a valid string",
    ),
    (
        "duplicate key",
        '{"question": "q", "question": "r", "answer": "a"}\n',
        r"forget10\.json:2: duplicate key 'question'",
    ),
    ("NaN", '{"question": "q", "answer": NaN}\n', r"forget10\.json:2: NaN is not JSON"),
    ("Infinity", '{"question": "q", "answer": Infinity}\n', r"forget10\.json:2: Infinity is not JSON"),
    (
        "unknown column",
        '{"question": "q", "answer": "a", "author": "x"}\n',
        r"forget10\.json:2: field 'author': Extra inputs",
    ),
    (
        "empty text",
        '{"question": "", "answer": "a"}\n',
        r"forget10\.json:2: field 'question': String should have at least 1",
    ),
    ("not an object", '["q", "a"]\n', r"forget10\.json:2: a row is a JSON object, got list \(a JSON array\?"),
    ("not JSON", '{"question": "q", \n', r"forget10\.json:2: cannot read as JSON"),
    (
        "deep nesting",
        '{"question": ' + "[" * 70 + "]" * 70 + "}\n",
        r"forget10\.json:2: nested deeper than 64",
    ),
    (
        "null answer",
        '{"question": "q", "answer": null}\n',
        r"forget10\.json:2: field 'answer': Input should be a valid string",
    ),
]


@pytest.mark.parametrize(("case", "line", "message"), HOSTILE_LINES, ids=[c[0] for c in HOSTILE_LINES])
def test_a_malformed_line_names_file_line_and_field(
    tmp_path: Path, case: str, line: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        read_tofu(_one_line(tmp_path, line), ["forget10"])
    assert info.value.requirement == "R2" and str(info.value).endswith("(R2)")


def test_not_utf8_is_refused_with_the_line(tmp_path: Path) -> None:
    root = tmp_path / "tofu"
    root.mkdir()
    (root / "forget10.json").write_bytes(
        b'{"question": "q", "answer": "a"}\n{"question": "\xff", "answer": "a"}\n'
    )
    with pytest.raises(ConfigError, match=r"forget10\.json:2: not UTF-8"):
        read_tofu(root, ["forget10"])


PERTURBED_CASES: list[tuple[str, dict[str, Any], str]] = [
    (
        "perturbed not a list",
        {"perturbed_answer": "wrong"},
        r"field 'perturbed_answer': Input should be a valid list",
    ),
    (
        "perturbed holds a number",
        {"perturbed_answer": ["w", 3]},
        r"field 'perturbed_answer\.1': Input should be a valid string",
    ),
    ("perturbed empty", {"perturbed_answer": []}, r"field 'perturbed_answer': List should have at least 1"),
    (
        "paraphrase missing",
        {"paraphrased_answer": None},
        r"field 'paraphrased_answer': required in split 'forget10_perturbed'",
    ),
]


@pytest.mark.parametrize(("case", "change", "message"), PERTURBED_CASES, ids=[c[0] for c in PERTURBED_CASES])
def test_a_malformed_perturbed_row_is_refused(
    tmp_path: Path, case: str, change: dict[str, Any], message: str
) -> None:
    rows = tofu_rows()["forget10_perturbed"]
    rows[6] = {k: v for k, v in {**rows[6], **change}.items() if v is not None}
    root = tmp_path / "tofu"
    write_split(root, "forget10_perturbed", rows, "json")
    with pytest.raises(ConfigError, match=r"forget10_perturbed\.json:7: " + message):
        read_tofu(root, ["forget10_perturbed"])


def test_option_splits_need_perturbed_answers_not_paraphrases(tmp_path: Path) -> None:
    root = tmp_path / "tofu"
    write_split(root, "world_facts_perturbed", tofu_rows()["world_facts_perturbed"], "json")
    assert read_tofu(root).rows("world_facts_perturbed")[0].paraphrased_answer is None
    write_split(root, "world_facts_perturbed", [{"question": "q", "answer": "a"}], "json")
    with pytest.raises(
        ConfigError, match=r"world_facts_perturbed\.json:1: field 'perturbed_answer': required"
    ):
        read_tofu(root)


PARQUET_CASES: list[tuple[str, list[dict[str, Any]], str]] = [
    (
        "number question",
        [{"question": 5, "answer": "a"}],
        r"forget10\.parquet row 1: field 'question': Input should be a valid string",
    ),
    (
        "NaN question",
        [{"question": float("nan"), "answer": "a"}],
        r"forget10\.parquet row 1: field 'question': Input should be a valid string",
    ),
    (
        "perturbed string",
        [{"question": "q", "answer": "a", "perturbed_answer": "w"}],
        r"forget10\.parquet row 1: field 'perturbed_answer': Input should be a valid list",
    ),
    ("missing column", [{"question": "q"}], r"forget10\.parquet row 1: field 'answer': Field required"),
    (
        "null answer",
        [{"question": "q", "answer": "a"}, {"question": "q", "answer": None}],
        r"forget10\.parquet row 2: field 'answer'",
    ),
]


@pytest.mark.parametrize(("case", "rows", "message"), PARQUET_CASES, ids=[c[0] for c in PARQUET_CASES])
def test_a_malformed_parquet_row_names_file_row_and_field(
    tmp_path: Path, case: str, rows: list[dict[str, Any]], message: str
) -> None:
    root = tmp_path / "tofu"
    write_parquet(root / "forget10.parquet", rows)
    with pytest.raises(ConfigError, match=message):
        read_tofu(root, ["forget10"])


def test_parquet_with_a_column_twice_or_garbage_is_refused(tmp_path: Path) -> None:
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    root = tmp_path / "tofu"
    root.mkdir()
    table = pa.Table.from_arrays(
        [pa.array(["q"]), pa.array(["a"]), pa.array(["r"])], names=["question", "answer", "question"]
    )
    pq.write_table(table, root / "forget10.parquet")
    with pytest.raises(ConfigError, match=r"forget10\.parquet: column 'question' appears twice"):
        read_tofu(root, ["forget10"])
    (root / "forget10.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(ConfigError, match=r"forget10\.parquet: not a readable Parquet file"):
        read_tofu(root, ["forget10"])


def test_a_split_file_that_is_a_folder_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "tofu"
    (root / "forget10.json").mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"forget10\.json: is a folder, not a data file \(R2\)"):
        read_tofu(root, ["forget10"])
    (root / "forget10.json").rmdir()
    (root / "forget10" / "train.jsonl").mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"forget10/train\.jsonl: is a folder, not a data file"):
        read_tofu(root, ["forget10"])


def test_split_folders_that_are_empty_mixed_or_short_of_a_shard_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "tofu"
    (root / "forget10").mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"forget10: a split folder holds no \.parquet"):
        read_tofu(root, ["forget10"])
    write_parquet(root / "forget10" / "a.parquet", tofu_rows()["forget10"])
    (root / "forget10" / "b.jsonl").write_text(jsonl(tofu_rows()["forget10"]), encoding="utf-8")
    with pytest.raises(ConfigError, match="mixes Parquet and JSON"):
        read_tofu(root, ["forget10"])
    write_parquet(root / "retain90-00001-of-00002.parquet", tofu_rows()["retain90"])
    with pytest.raises(ConfigError, match="not one complete set"):
        read_tofu(root, ["retain90"])


def test_missing_folder_file_root_and_missing_split(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope: no such folder \(R2\)"):
        read_tofu(tmp_path / "nope")
    (tmp_path / "file").write_text("x", encoding="utf-8")
    with pytest.raises(ConfigError, match="is a file, not a dataset folder"):
        read_tofu(tmp_path / "file")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="holds no TOFU split"):
        read_tofu(tmp_path / "empty")
    with pytest.raises(ConfigError, match=r"split 'forget05' not found \(looked for forget05\.parquet"):
        read_tofu(write_tofu(tmp_path / "tofu"), ["forget05"])
    with pytest.raises(ConfigError, match="is not a plain name"):
        read_tofu(tmp_path / "tofu", ["../etc/passwd"])


def test_a_huge_file_stops_at_the_row_or_line_limit(tmp_path: Path) -> None:
    root = tmp_path / "tofu"
    root.mkdir()
    (root / "full.json").write_text(
        jsonl([{"question": f"q{i}", "answer": "a"} for i in range(5000)]), encoding="utf-8"
    )
    with pytest.raises(ConfigError, match=r"full\.json:11: split 'full' holds more than 10 rows"):
        read_tofu(root, ["full"], max_rows=10)
    (root / "full.json").write_text('{"question": "' + "x" * 5000 + '", "answer": "a"}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"full\.json:1: line longer than 1000 bytes"):
        read_tofu(root, ["full"], max_line_bytes=1000)
    assert len(read_tofu(root, ["full"]).rows("full")[0].question) == 5000
    write_parquet(root / "full.parquet", [{"question": f"q{i}", "answer": "a"} for i in range(50)])
    with pytest.raises(ConfigError, match=r"full\.parquet: 50 rows, more than the 10"):
        read_tofu(root, ["full"], max_rows=10)


def test_blank_lines_are_skipped_and_line_numbers_kept(tmp_path: Path) -> None:
    root = tmp_path / "tofu"
    root.mkdir()
    (root / "holdout10.json").write_text(
        '{"question":"q","answer":"a"}\n\n{"question":"r"}\n', encoding="utf-8"
    )
    with pytest.raises(ConfigError, match=r"holdout10\.json:3: field 'answer'"):
        read_tofu(root, ["holdout10"])


# --- MUSE ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ("shards", "jsonl", "parquet", "folder"))
def test_muse_every_layout_reads_typed_rows(tmp_path: Path, layout: str) -> None:
    root = write_muse(tmp_path / "muse", layout)
    data = read_muse(root)
    assert set(data.parts) == {f"{c}/{s}" for c, s in muse_rows()}
    assert present_parts(root) == [tuple(k.split("/")) for k in data.parts]
    verb = data.rows("verbmem", "forget")
    assert all(isinstance(r, VerbmemRow) for r in verb) and verb[2].gt == " voted to close pier 2."
    assert isinstance(data.rows("knowmem", "retain_qa")[0], KnowmemRow)
    assert isinstance(data.rows("privleak", "holdout")[0], TextRow)
    for key, source in data.provenance()["splits"].items():
        for f in source["files"]:
            assert f["path"].startswith(key.split("/")[0] + "/")
            assert f["sha256"] == _sha(root / f["path"])


def test_muse_hub_snapshot_prefers_parquet_over_the_stale_json(tmp_path: Path) -> None:
    root = write_muse(tmp_path / "muse", "shards")
    # a MUSE Hub snapshot keeps old .json files beside the Parquet ones datasets loads; here a JSON array
    (root / "privleak" / "forget.json").write_text(json.dumps([{"text": "old"}]), encoding="utf-8")
    data = read_muse(root, [("privleak", "forget")])
    assert [r.text for r in data.rows("privleak", "forget")] == [
        "Member document 0.",
        "Member document 1.",
        "Member document 2.",
    ]
    assert data.provenance()["splits"]["privleak/forget"]["ignored"] == ["privleak/forget.json"]


@pytest.mark.parametrize(
    ("part", "row", "message"),
    [
        (("verbmem", "forget"), {"prompt": "p"}, r"verbmem/forget\.jsonl:1: field 'gt': Field required"),
        (
            ("knowmem", "forget_qa"),
            {"question": "q", "answer": "a", "source": "x"},
            r"forget_qa\.jsonl:1: field 'source': Extra",
        ),
        (
            ("privleak", "holdout"),
            {"text": ["a"]},
            r"holdout\.jsonl:1: field 'text': Input should be a valid string",
        ),
    ],
)
def test_muse_malformed_rows_are_refused(
    tmp_path: Path, part: tuple[str, str], row: dict[str, Any], message: str
) -> None:
    root = tmp_path / "muse"
    write_split(root / part[0], part[1], [row], "jsonl")
    with pytest.raises(ConfigError, match=message):
        read_muse(root, [part])


def test_muse_unknown_config_and_missing_part(tmp_path: Path) -> None:
    root = write_muse(tmp_path / "muse", "jsonl")
    with pytest.raises(ConfigError, match="'wmdp' is not a MUSE config"):
        read_muse(root, [("wmdp", "forget")])
    with pytest.raises(ConfigError, match=r"muse/knowmem: split 'retain2_qa' not found"):
        read_muse(root, [("knowmem", "retain2_qa")])
    with pytest.raises(ConfigError, match="holds no MUSE part"):
        (tmp_path / "bare").mkdir()
        read_muse(tmp_path / "bare")
