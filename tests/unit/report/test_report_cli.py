"""``remnant report RUN [RUN ...] [--customer]``: reads statement.json and manifest.json, writes the HTML (exit 0),
and refuses a missing or malformed statement with exit 2."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest
from report_helpers import hidden_facts, make_curve, make_manifest, make_statement

from remnant.cli import main
from remnant.packs import Pack, write_pack
from remnant.report.redact import Redactor, canary_strings
from remnant.run_manifest import pack_record, write_manifest


def make_run(folder: Path, pack: Pack, pack_dir: Path) -> Path:
    """A run folder as `remnant assess` leaves it: manifest.json, then statement.json citing it."""
    entity = next(e for e in pack.manifest.entities if e.role == "forget_probe")
    facts = hidden_facts()
    manifest = make_manifest(
        facts,
        claim=f"The model forgets {entity.name}.",
        pack=pack_record(pack.manifest, location=pack_dir),
        curves=[make_curve()],
        run_id=folder.name,
    )
    ref = write_manifest(manifest, folder)
    statement = make_statement(facts, claim=manifest.claim).model_copy(update={"manifest_ref": ref})
    (folder / "statement.json").write_text(json.dumps(statement.model_dump(mode="json", by_alias=True)))
    return folder


@pytest.fixture
def run(tmp_path: Path, small_pack: Pack) -> Path:
    pack_dir = tmp_path / "pack"
    write_pack(small_pack, pack_dir)
    return make_run(tmp_path / "npo", small_pack, pack_dir)


def test_report_writes_technical_html_with_curves_from_the_manifest(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(run)]) == 0
    written = run / "report.html"
    assert capsys.readouterr().out.strip() == str(written)
    page = written.read_text()
    assert 'id="a0-curve0-post"' in page and 'id="a0-curve0-control"' in page
    assert "matches manifest.json" in page
    assert "# this statement is unsigned" in page


def test_report_customer_redacts_against_the_manifest_pack(run: Path, small_pack: Pack) -> None:
    assert main(["report", str(run), "--customer"]) == 0
    page = html.unescape((run / "report-customer.html").read_text())
    assert Redactor(canary_strings(small_pack)).leaks(page) == []
    assert "The model forgets [redacted]." in page


def test_report_compares_several_runs(run: Path, tmp_path: Path, small_pack: Pack) -> None:
    second = make_run(tmp_path / "retrain", small_pack, tmp_path / "pack")
    out = tmp_path / "compare.html"
    assert (
        main(["report", str(run), str(second), "--out", str(out), "--label", "NPO", "--label", "Retrain"])
        == 0
    )
    assert "Comparison of 2 removal assessments" in out.read_text()
    assert main(["report", str(run), str(second)]) == 2  # a comparison needs --out


def test_report_refuses_missing_or_malformed_statement(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(tmp_path)]) == 2
    assert "no statement.json" in capsys.readouterr().err
    (tmp_path / "statement.json").write_text(json.dumps({"standard_version": "0.3"}))
    assert main(["report", str(tmp_path)]) == 2
    assert "statement.json: field" in capsys.readouterr().err
    assert not (tmp_path / "report.html").exists()
