"""The harness itself: a case that breaks its contract fails the check (so the case files can be trusted)."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import REQUIREMENT_ID, Hostile, check, ids


def _facts_with_duplicate_key(tmp: Path) -> tuple[list[str], str]:
    path = tmp / "facts.json"
    path.write_text('{"tau": 0.5, "tau": 0.9}', encoding="utf-8")
    return ["verdict", str(path)], str(path)


def test_a_refused_input_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = check(Hostile("dup", _facts_with_duplicate_key, requirement="V1"), tmp_path, capsys)
    assert "duplicate key 'tau'" in text


def test_wrong_exit_code_or_requirement_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(AssertionError, match="exit 2, expected 1"):
        check(Hostile("dup", _facts_with_duplicate_key, exit_code=1), tmp_path, capsys)
    with pytest.raises(AssertionError, match="does not cite R14"):
        check(Hostile("dup", _facts_with_duplicate_key, requirement="R14"), tmp_path, capsys)


def test_requirement_pattern() -> None:
    for text in ("(R14)", "C-W6", "K5", "D-5.1", "V1a", "T1", "C-H7"):
        assert REQUIREMENT_ID.search(text), text
    for text in ("R", "schema", "line 12", "CW6"):
        assert not REQUIREMENT_ID.search(text), text
    with pytest.raises(AssertionError):
        ids([Hostile("a", _facts_with_duplicate_key), Hostile("a", _facts_with_duplicate_key)])
