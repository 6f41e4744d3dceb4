"""Bad run files given to ``remnant report`` end with exit 2 and a message naming file, field and requirement.

Statement and manifest go through the one run-file loader (``remnant.run_manifest.load_json_model``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remnant.cli import main


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        pytest.param(
            "statement.json", "{not json", ("statement.json: cannot read as JSON", "(K4)"), id="statement"
        ),
        pytest.param(
            "statement.json", json.dumps({"verdict": 3}), ("statement.json: field ", "(K4)"), id="schema"
        ),
    ],
)
def test_report_refuses_a_bad_statement(
    tmp_path: Path, name: str, text: str, expected: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / name).write_text(text, encoding="utf-8")
    capsys.readouterr()
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert all(part in err for part in expected), err
    assert not (tmp_path / "report.html").exists()


def test_report_module_stays_torch_free() -> None:
    import subprocess
    import sys

    code = "import remnant.report.runs, sys; assert 'torch' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
