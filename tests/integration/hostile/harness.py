"""The hostile-input harness: a crafted input, the command it is given to, and what must come back.

Every file a claimant supplies (model folders, configs, packs, statements, envelopes, records) may be hostile.
Each :class:`Hostile` case writes its input under a fresh folder and returns the ``remnant`` argv to run on it;
:func:`check` runs the command in-process and asserts that:

- it exits with the expected code (2 bad input, 1 a failed check) and never raises (no traceback);
- its output (stderr, and stdout for checks that report on stdout) names the file the problem is in;
- its output names the Standard's requirement the input breaks, as an id (``R2``, ``K5``, ``C-W6``…).

The case files (``test_hostile_<category>.py``) each hold a list of cases; ``CATEGORIES`` counts them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from remnant.cli import main

#: A requirement id of the Standard as it appears in messages: R14, K5, C-W6, C-H7, D-5.1, V1a, T1…
REQUIREMENT_ID = re.compile(r"\b(?:R\d+|[KVTZD]\d+[a-z]?|C-[WQH]\d+|D-\d(?:\.\d)?|Annex [A-Z](?:\.\d)?)\b")


@dataclass(frozen=True)
class Hostile:
    """One crafted input.

    ``build(tmp)`` writes the input under ``tmp`` and returns ``(argv, named)``: the command line and the path
    (or file name) the output must name. ``requirement`` is the id the output must cite; None accepts any id.
    """

    id: str
    build: Callable[[Path], tuple[Sequence[str], str]]
    requirement: str | None = None
    exit_code: int = 2


def check(case: Hostile, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``case`` and assert the contract above; returns the combined output for further assertions."""
    argv, named = case.build(tmp_path)
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse usage errors exit 2 themselves
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    text = err + out
    assert "Traceback" not in text, text
    assert code == case.exit_code, f"exit {code}, expected {case.exit_code}: {text}"
    assert str(named) in text, f"output does not name {named!r}: {text}"
    if case.requirement is None:
        assert REQUIREMENT_ID.search(text), f"output names no requirement id: {text}"
    else:
        assert re.search(rf"(?<![\w-]){re.escape(case.requirement)}(?![\w])", text), (
            f"output does not cite {case.requirement}: {text}"
        )
    return text


def ids(cases: Sequence[Hostile]) -> list[str]:
    """Test ids of ``cases`` (refusing duplicates, so the case count is honest)."""
    names = [c.id for c in cases]
    assert len(names) == len(set(names)), "duplicate hostile case ids"
    return names
