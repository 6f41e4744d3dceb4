"""Hostile records: a run folder whose records.jsonl was edited, forged, cut or corrupted, given to recompute (R23).

Each case edits a copy of one finished tiny assessment (``tmp/run``, copied from the session's ``chained_run``)
and runs ``remnant recompute``. Integrity failures — a line edited, inserted, deleted or reordered, a stripped
chain, counts that do not follow from the observations, a head that is not the pinned one — exit 1; input that
cannot be read at all — not JSON, duplicate keys, NaN, deep nesting, a folder, an unknown entry type or schema
version, a torn tail (repaired only by ``assess --resume``) — exits 2. Either way the output names records.jsonl
and the line, and cites R23: the manifest's per-cell table is rebuilt from these records.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from harness import Hostile, check, ids

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from records_fixtures import (  # noqa: E402
    copy_run,
    edited,
    entry,
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

#: An edit of the lines: the new lines, and the 1-based number of the line the output must name.
Edit = Callable[[list[bytes]], tuple[list[bytes], int]]


def _case(id: str, edit: Edit, exit_code: int = 1) -> Hostile:
    def build(tmp: Path) -> tuple[Sequence[str], str]:
        run = tmp / "run"
        lines, line = edit(read_lines(run))
        write_lines(run, lines)
        return ["recompute", str(run), "--no-reports"], f"{records_path(run)}: line {line}"

    return Hostile(id, build, requirement="R23", exit_code=exit_code)


def _at(test: Callable[[dict[str, Any]], bool], change: Callable[[list[bytes], int], int]) -> Edit:
    """Apply ``change(lines, i)`` at the first line passing ``test``; it returns the line to name."""

    def edit(lines: list[bytes]) -> tuple[list[bytes], int]:
        i = find(lines, test)
        return lines, change(lines, i)

    return edit


def _edit(change: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[list[bytes], int], int]:
    """Change the entry in place, link untouched (a naive edit): the next line's link is the first to fail."""

    def apply(lines: list[bytes], i: int) -> int:
        lines[i] = line_of(change(entry(lines[i])))
        return i + 2

    return apply


def _other_k(e: dict[str, Any]) -> dict[str, Any]:
    return {**e, "k": (e["k"] + 1) % (e["n"] + 1)}


def _replace(raw: bytes) -> Callable[[list[bytes], int], int]:
    """Overwrite the line with ``raw`` (kept in the chain's place): the line itself is the one named."""

    def change(lines: list[bytes], i: int) -> int:
        lines[i] = raw
        return i + 1

    return change


def _with_link(lines: list[bytes], i: int, e: dict[str, Any]) -> bytes:
    """``e`` as a line correctly linked to line i-1, so only its content is at fault."""
    prev = hashlib.sha256(lines[i - 1]).hexdigest()
    return line_of({**e, "prev": prev})


def _content(change: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[list[bytes], int], int]:
    def apply(lines: list[bytes], i: int) -> int:
        lines[i] = _with_link(lines, i, change(entry(lines[i])))
        return i + 1

    return apply


def _insert_copy(lines: list[bytes], i: int) -> int:
    lines.insert(i, line_of(_other_k(entry(lines[i]))))
    return i + 2


def _duplicate(lines: list[bytes], i: int) -> int:
    lines.insert(i + 1, lines[i])
    return i + 2


def _delete(lines: list[bytes], i: int) -> int:
    del lines[i]
    return i + 1


def _swap_with_previous(lines: list[bytes], i: int) -> int:
    lines[i - 1], lines[i] = lines[i], lines[i - 1]
    return i


def _rechained_k(lines: list[bytes]) -> tuple[list[bytes], int]:
    i = find(lines, is_run_cell)
    lines[i] = line_of(_other_k(entry(lines[i])))
    return rechain(lines), i + 1


def _rechained_n(lines: list[bytes]) -> tuple[list[bytes], int]:
    i = find(lines, is_run_cell)
    lines[i] = edited(lines[i], n=entry(lines[i])["n"] + 5)
    return rechain(lines), i + 1


def _rechained_without_observation(lines: list[bytes]) -> tuple[list[bytes], int]:
    i = find(lines, is_observation)
    del lines[i]
    return rechain(lines), find(lines, is_run_cell) + 1


def _last_line_edited(lines: list[bytes]) -> tuple[list[bytes], int]:
    lines[-1] = edited(lines[-1], message="edited")
    return lines, len(lines)


def _last_line_deleted(lines: list[bytes]) -> tuple[list[bytes], int]:
    return lines[:-1], len(lines)


def _appended(lines: list[bytes]) -> tuple[list[bytes], int]:
    i = find(lines, is_run_cell)
    forged = {**entry(lines[i]), "cell_key": "f" * 64, "k": 0, "rest": 0}
    return [*lines, _with_link([*lines, b""], len(lines), forged)], len(lines) + 1


def _spliced_from_another_run(lines: list[bytes]) -> tuple[list[bytes], int]:
    i = find(lines, is_run_cell)
    foreign = edited(lines[i], run_id="run-000000000000", prev="a" * 64)
    return lines[:i] + [foreign] + lines[i + 1 :], i + 1


def _stripped(lines: list[bytes]) -> tuple[list[bytes], int]:
    return stripped(lines), 1


def _legacy_form(lines: list[bytes]) -> tuple[list[bytes], int]:
    return legacy(lines), 1


def _torn_tail(lines: list[bytes]) -> tuple[list[bytes], int]:
    return [*lines, lines[-1][:40]], len(lines) + 1


_NESTED = b'{"entry_type":"event","data":' + b"[" * 70 + b"]" * 70 + b"}\n"

CASES = [
    # Integrity: exit 1.
    _case("edited-cell-k", _at(is_run_cell, _edit(_other_k))),
    _case("edited-cell-n", _at(is_run_cell, _edit(lambda e: {**e, "n": e["n"] + 3}))),
    _case(
        "edited-cell-status",
        _at(is_run_cell, _edit(lambda e: {**e, "status": "not_applicable", "reason": "x", "k": 0, "n": 0})),
    ),
    _case("edited-observation-item-id", _at(is_observation, _edit(lambda e: {**e, "item_id": "forged"}))),
    _case(
        "edited-observation-state",
        _at(
            is_observation,
            _edit(lambda e: {**e, "model_state": "control" if e["model_state"] != "control" else "x"}),
        ),
    ),
    _case("edited-observation-seed", _at(is_observation, _edit(lambda e: {**e, "seed": e["seed"] + 1}))),
    _case("edited-observation-kappa", _at(is_observation, _edit(lambda e: {**e, "kappa": not e["kappa"]}))),
    _case("forged-cell-before-real", _at(is_run_cell, _insert_copy)),
    _case("duplicated-cell-line", _at(is_run_cell, _duplicate)),
    _case("deleted-cell-line", _at(is_run_cell, _delete)),
    _case("deleted-observation-line", _at(is_observation, _delete)),
    _case("deleted-first-line", _at(lambda e: True, _delete)),
    _case("reordered-lines", _at(is_run_cell, _swap_with_previous)),
    _case("line-from-another-run", _spliced_from_another_run),
    _case("rechained-edited-k", _rechained_k),
    _case("rechained-edited-n", _rechained_n),
    _case("rechained-deleted-observation", _rechained_without_observation),
    _case("last-line-edited", _last_line_edited),
    _case("last-line-deleted", _last_line_deleted),
    _case("forged-line-appended", _appended),
    _case("chain-stripped", _stripped),
    _case("chain-stripped-to-pre-chain-form", _legacy_form),
    # Unreadable: exit 2.
    _case("not-json-in-the-middle", _at(is_observation, _replace(b"{not json\n")), exit_code=2),
    _case("json-array-line", _at(is_observation, _replace(b"[1, 2]\n")), exit_code=2),
    _case(
        "duplicate-key",
        _at(is_run_cell, _replace(b'{"entry_type":"cell","k":1,"k":6,"schema_version":2}\n')),
        exit_code=2,
    ),
    _case(
        "nan-score", _at(is_observation, _replace(b'{"entry_type":"observation","score":NaN}\n')), exit_code=2
    ),
    _case("deep-nesting", _at(is_observation, _replace(_NESTED)), exit_code=2),
    _case(
        "unknown-entry-type",
        _at(is_observation, _content(lambda e: {**e, "entry_type": "verdict"})),
        exit_code=2,
    ),
    _case(
        "future-schema-version",
        _at(is_observation, _content(lambda e: {**e, "schema_version": 99})),
        exit_code=2,
    ),
    _case("k-above-n", _at(is_run_cell, _content(lambda e: {**e, "k": e["n"] + 1})), exit_code=2),
    _case("torn-tail-without-resume", _torn_tail, exit_code=2),
]


@pytest.fixture()
def run_copy(chained_run: Path, tmp_path: Path) -> Path:
    return copy_run(chained_run, tmp_path / "run")


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_hostile_records(
    case: Hostile, run_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (run_copy / "statement.json").read_bytes()
    text = check(case, tmp_path, capsys)
    assert text.count("\n") == 1, text  # one line
    assert (run_copy / "statement.json").read_bytes() == before  # nothing rebuilt, nothing re-signed


def _records_folder(tmp: Path) -> tuple[Sequence[str], str]:
    path = records_path(tmp / "run")
    path.unlink()
    path.mkdir()
    return ["recompute", str(tmp / "run"), "--no-reports"], f"{path}: is a folder"


def _malformed_pin(tmp: Path) -> tuple[Sequence[str], str]:
    path = tmp / "run" / "manifest.json"
    data = json.loads(path.read_text())
    data["records"]["head"] = "not a digest"
    path.write_text(json.dumps(data))
    return ["recompute", str(tmp / "run"), "--no-reports"], f"{path}: field records.head"


FOLDER_CASES = [
    Hostile("records-is-a-folder", _records_folder, requirement="R23"),
    Hostile("malformed-pin-in-manifest", _malformed_pin, requirement="R23"),
]


@pytest.mark.parametrize("case", FOLDER_CASES, ids=ids(FOLDER_CASES))
def test_hostile_run_files(
    case: Hostile, run_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    check(case, tmp_path, capsys)
