"""`remnant recompute` refuses records that were edited, and re-signs nothing (R23).

Every file of a run folder comes from the party being assessed. Before the chain, editing a cell's k in
records.jsonl, inserting a forged cell line before the real one (the first cell record of a key is the one that
counts, ``runfiles.cell_records``), or deleting a line was silently rebuilt into a new statement. Each case here
edits a copy of one finished tiny assessment (conftest ``chained_run``) and expects exit 1 with a one-line message
naming records.jsonl, the first bad line and R23, and the statement left as it was. A run folder written before
the chain still recomputes, to the same figures, and its statement says the records are not chained.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from remnant.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parent))
from records_fixtures import (  # noqa: E402
    as_written_before_the_chain,
    as_written_before_typed_fields,
    copy_run,
    edited,
    entry,
    figures,
    find,
    is_observation,
    is_run_cell,
    legacy,
    line_of,
    read_lines,
    rechain,
    records_path,
    stripped,
    write_lines,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture()
def run(chained_run: Path, tmp_path: Path) -> Path:
    return copy_run(chained_run, tmp_path / "run")


def recompute(run: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["recompute", str(run), "--no-reports"])
    out, err = capsys.readouterr()
    return code, err + out


def refused(run: Path, capsys: pytest.CaptureFixture[str], line: int, *phrases: str) -> str:
    """Recompute exits 1 naming records.jsonl's ``line`` and R23 in one line; statement and manifest untouched."""
    before = {name: (run / name).read_bytes() for name in ("statement.json", "manifest.json")}
    code, text = recompute(run, capsys)
    assert code == 1, text
    assert f"{records_path(run)}: line {line}:" in text, text
    assert "(R23)" in text and text.count("\n") == 1 and "Traceback" not in text, text
    assert text.startswith("remnant recompute: check failed: "), text
    for phrase in phrases:
        assert phrase in text, (phrase, text)
    for name, data in before.items():
        assert (run / name).read_bytes() == data, f"{name} was rewritten"
    return text


def test_untouched_records_recompute_and_pin_the_chain_head(
    run: Path, chained_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text = recompute(run, capsys)
    assert code == 0, text
    assert (run / "statement.json").read_bytes() == (chained_run / "statement.json").read_bytes()
    head = "sha256:" + hashlib.sha256(read_lines(run)[-1]).hexdigest()
    statement = json.loads((run / "statement.json").read_text())
    manifest = json.loads((run / "manifest.json").read_text())
    assert statement["records_head"] == manifest["records"]["head"] == head
    assert manifest["records"] == {
        "file": "records.jsonl",
        "lines": len(read_lines(run)),
        "head": head,
        "chained": True,
        "unchained_lines": 0,
    }


Edit = Callable[[list[bytes]], tuple[list[bytes], int]]


def _edit_k(lines: list[bytes]) -> tuple[list[bytes], int]:
    i = find(lines, is_run_cell)
    e = entry(lines[i])
    lines[i] = edited(lines[i], k=(e["k"] + 1) % (e["n"] + 1))
    return lines, i + 2  # the next line's link is the first that fails


def _forged_before_real(lines: list[bytes]) -> tuple[list[bytes], int]:
    i = find(lines, is_run_cell)
    e = entry(lines[i])
    lines.insert(i, edited(lines[i], k=(e["k"] + 1) % (e["n"] + 1)))
    return lines, i + 2  # the forged copy links fine (same prev); the real line after it does not


def _delete_cell(lines: list[bytes]) -> tuple[list[bytes], int]:
    i = find(lines, is_run_cell)
    del lines[i]
    return lines, i + 1


def _delete_observation(lines: list[bytes]) -> tuple[list[bytes], int]:
    i = find(lines, is_observation)
    del lines[i]
    return lines, i + 1


def _reorder(lines: list[bytes]) -> tuple[list[bytes], int]:
    i = find(lines, is_run_cell)
    lines[i - 1], lines[i] = lines[i], lines[i - 1]
    return lines, i


@pytest.mark.parametrize(
    "edit",
    [_edit_k, _forged_before_real, _delete_cell, _delete_observation, _reorder],
    ids=["edited-cell-k", "forged-cell-before-real", "deleted-cell", "deleted-observation", "reordered"],
)
def test_an_edit_is_refused_at_the_first_bad_line(
    run: Path, edit: Edit, capsys: pytest.CaptureFixture[str]
) -> None:
    lines, first_bad = edit(read_lines(run))
    write_lines(run, lines)
    refused(run, capsys, first_bad, "chain broken")


def test_an_edited_cell_rechained_is_caught_by_its_observations(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A forger who recomputes every link: the cell's k no longer follows from the observations written with it."""
    lines = read_lines(run)
    i = find(lines, is_run_cell)
    e = entry(lines[i])
    lines[i] = edited(lines[i], k=(e["k"] + 1) % (e["n"] + 1))
    write_lines(run, rechain(lines))
    refused(
        run, capsys, i + 1, "cell prefill/post_removal/kappa at final", f"k={(e['k'] + 1) % (e['n'] + 1)}"
    )


def test_a_rechained_file_is_caught_by_the_pinned_head(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Consistent edits that recompute every link (here: the last line's timestamp) differ from the pinned head."""
    lines = read_lines(run)
    lines[-1] = edited(lines[-1], at="2030-01-01T00:00:00Z")
    write_lines(run, rechain(lines))
    refused(run, capsys, len(lines), "is not the sha256:", "that manifest.json pins")


def test_a_rewritten_run_folder_is_caught_by_the_head_the_assessor_holds(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A party that re-chains edited records and replaces manifest.json and statement.json passes the folder's own
    pins; the records_head of the statement the assessor was given (--expect-head) still refuses it."""
    signed_head = json.loads((run / "statement.json").read_text())["records_head"]
    lines = read_lines(run)
    lines[-1] = edited(lines[-1], at="2030-01-01T00:00:00Z")
    write_lines(run, rechain(lines))
    (run / "manifest.json").unlink()
    (run / "statement.json").unlink()
    capsys.readouterr()
    code = main(["recompute", str(run), "--no-reports", "--expect-head", signed_head])
    text = "".join(capsys.readouterr())
    assert code == 1 and "that --expect-head pins" in text and "(R23)" in text, text
    assert main(["recompute", str(run), "--no-reports", "--expect-head", "sha256:xyz"]) == 2
    # the untampered head of the rewritten file is accepted: the option pins, it does not block
    head = "sha256:" + hashlib.sha256(lines[-1]).hexdigest()
    assert main(["recompute", str(run), "--no-reports", "--expect-head", head]) == 0


def test_lines_cut_off_the_end_or_appended_are_caught_by_the_pin(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = read_lines(run)
    write_lines(run, lines[:-1])
    refused(run, capsys, len(lines), "missing", f"pins {len(lines)} lines")
    forged = line_of({**entry(lines[-1]), "prev": hashlib.sha256(lines[-1]).hexdigest(), "message": "forged"})
    write_lines(run, [*lines, forged])
    refused(run, capsys, len(lines) + 1, f"appended after manifest.json pinned line {len(lines)}")


def test_a_stripped_chain_is_refused(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = read_lines(run)
    write_lines(run, stripped(lines))
    refused(run, capsys, 1, "carries no chain link")
    # Stripped and downgraded to the pre-chain form: reads, but the manifest pinned a chained file.
    write_lines(run, legacy(lines))
    refused(run, capsys, 1, "manifest.json pins these records as chained")
    # ... and the statement pins it too, when the manifest's pin is gone as well.
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["records"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    refused(run, capsys, 1, "statement.json pins these records as chained")


def test_a_run_written_before_the_chain_recomputes_to_the_same_figures(
    run: Path, chained_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    as_written_before_the_chain(run)
    code, text = recompute(run, capsys)
    assert code == 0, text
    assert figures(run) == figures(chained_run)  # verdict, cells, surfaces, facts, tier: byte for byte
    statement = json.loads((run / "statement.json").read_text())
    assert statement["records_head"]["absent"] is True
    assert statement["records_head"]["reason"].startswith("records not chained: lines 1-")
    records = json.loads((run / "manifest.json").read_text())["records"]
    assert records["chained"] is False and records["unchained_lines"] == records["lines"] == len(
        read_lines(run)
    )
    again = (run / "statement.json").read_bytes()
    assert recompute(run, capsys)[0] == 0 and (run / "statement.json").read_bytes() == again
    # Chaining it afterwards (here: the very lines, with their links) does not make it chained: what was pinned
    # was not chained.
    write_lines(run, read_lines(chained_run))
    refused(run, capsys, 1, "manifest.json pins these records as not chained")


def test_a_run_written_before_typed_fields_recomputes_to_the_same_figures(
    run: Path, chained_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Cell records at schema_version 2 held budget, step, risk, value... in ``params``: such a run folder, its
    chain over those bytes, reads (upgraded on read, the chain verified on the bytes as written) and recomputes
    to the same verdict, cells and figures; its records are still the ones pinned."""
    as_written_before_typed_fields(run)
    lines = read_lines(run)
    cells = [entry(x) for x in lines if entry(x)["entry_type"] == "cell"]
    assert cells and all(c["schema_version"] == 2 and "budget" not in c for c in cells)
    assert any("budget" in c["params"] for c in cells) and any("value" in c["params"] for c in cells)
    head = json.loads((run / "manifest.json").read_text())["records"]["head"]
    code, text = recompute(run, capsys)
    assert code == 0, text
    assert figures(run) == figures(chained_run)  # verdict, cells, surfaces, facts, tier: byte for byte
    assert read_lines(run) == lines  # recompute reads; it never rewrites the records
    statement = json.loads((run / "statement.json").read_text())
    assert statement["records_head"] == head == "sha256:" + hashlib.sha256(lines[-1]).hexdigest()
    assert json.loads((run / "manifest.json").read_text())["records"]["chained"] is True


def test_a_torn_tail_is_repaired_on_resume_and_the_chain_continues(
    chained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """R23 with crash recovery: recompute refuses a torn tail (exit 2); `assess --resume` moves it to the side file,
    chains what it appends to the last good line and pins the new head, which recompute then accepts."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(chained_run, run)  # with the trained states: the resume computes nothing
    good = read_lines(run)
    torn = good[-1][:50]
    write_lines(run, [*good, torn])
    code, text = recompute(run, capsys)
    assert code == 2 and f"line {len(good) + 1} (the last) is torn" in text, text
    assert main(["assess", str(run / "config.toml"), "--out", str(run), "--resume", "--quiet"]) == 0
    assert (run / "records.jsonl.torn").read_bytes() == torn + b"\n"
    lines = read_lines(run)
    assert lines[: len(good)] == good and len(lines) > len(good)
    assert entry(lines[len(good)])["prev"] == hashlib.sha256(good[-1]).hexdigest()
    head = "sha256:" + hashlib.sha256(lines[-1]).hexdigest()
    assert json.loads((run / "statement.json").read_text())["records_head"] == head
    code, text = recompute(run, capsys)
    assert code == 0, text
