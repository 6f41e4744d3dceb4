"""The validator flags one deliberately broken statement per requirement with that id, and passes the example.

The broken statements live in ``broken/`` (one file each, named ``<REQUIREMENT>__<what>.json``); they are the
Annex D.2 example with exactly one defect, produced by ``MUTATIONS`` below (run this file as a script to rewrite
them).
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from remnant.cli import main
from remnant.statement.example import example_statement
from remnant.statement.validate import validate_statement

BROKEN = Path(__file__).parent / "broken"
Mutation = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Mutation:
    def apply(d: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = d
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if value is _DELETE:
            del target[last]
        else:
            target[int(last) if isinstance(target, list) else last] = value

    return apply


_DELETE = object()

MUTATIONS: dict[str, tuple[str, Mutation]] = {
    "V1__verdict_not_from_facts": ("V1", _set("verdict", "hidden")),
    "V1__facts_tau_differs": ("V1", _set("facts.tau", 0.01)),
    "V4__removed_unqualified": ("V4", _set("verdict_scope", "removed")),
    "V4__scope_absent": ("V4", _set("verdict_scope", {"absent": True, "reason": "forgot"})),
    "V5__validity_13_months": ("V5", _set("validity_until", "2027-07-01")),
    "V5__validity_before_assessment": ("V5", _set("validity_until", "2026-05-01")),
    "K6__manifest_ref_omitted": ("K6", _set("manifest_ref", _DELETE)),
    "K6__pack_null": ("K6", _set("pack", None)),
    "C-H6__latent_adjudicating": ("C-H6", _set("latent.adjudicating", True)),
    "T1__tier_in_verdict_field": ("T1", _set("verdict", "W4")),
    "T1__verdict_only_instrument_with_tier": ("T1", _set("instrument", ["verdict"])),
    "K7__tier4_unverified": ("K7", _set("verification", {"absent": True, "reason": "not verified"})),
    "K7__tier4_verifier_not_accredited": ("K7", _set("verification.accredited", False)),
    "T1__tier_5_is_not_a_tier": ("T1", _set("tier", "W5")),
    "R0.3__tier_without_track": ("R0.3", _set("tier", "4")),
    "R0.3__q_letter_on_w_track": ("R0.3", _set("tier", "Q3")),
    "R19__cell_without_interval": ("R19", _set("cells.0.ci95", _DELETE)),
    "R19__interval_not_wilson": ("R19", _set("cells.0.ci95", [0.0, 0.9])),
    "R22__aggregate_without_cells": ("R22", _set("surfaces.relearning.cells", [])),
    "R22__aggregate_not_max_of_cells": ("R22", _set("surfaces.inference_time.g_star", 0.045)),
    "Z1__harness_version_missing": ("Z1", _set("versions.harness", _DELETE)),
}


def example_dict() -> dict[str, Any]:
    return example_statement().model_dump(mode="json", by_alias=True)


def broken(name: str) -> dict[str, Any]:
    data = copy.deepcopy(example_dict())
    MUTATIONS[name][1](data)
    return data


def test_example_is_conformant() -> None:
    statement = example_statement()
    assert statement.verdict == "removed" and statement.tier == "W4"
    assert {c.n for c in statement.cells} == {300}
    report = validate_statement(example_dict())
    assert report.conformant, report.violations


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_broken_statement_flagged_with_its_id(name: str) -> None:
    requirement = MUTATIONS[name][0]
    report = validate_statement(broken(name))
    assert not report.conformant
    # Exactly the broken requirement: one defect must not spill into violations of others.
    assert {v.requirement for v in report.violations} == {requirement}, report.violations


def test_broken_folder_matches_mutations() -> None:
    files = sorted(p.stem for p in BROKEN.glob("*.json"))
    assert files == sorted(MUTATIONS)
    for path in BROKEN.glob("*.json"):
        requirement = path.stem.split("__")[0]
        report = validate_statement(json.loads(path.read_text()))
        assert requirement in {v.requirement for v in report.violations}, (path.name, report.violations)


def test_garbage_is_violation_not_crash() -> None:
    for data in ([], {}, {"verdict": 3}, {"cells": "x", "latent": 5}):
        report = validate_statement(data)
        assert not report.conformant and report.violations


def test_cli_validate_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "example.json"
    assert main(["statement", "example", "--out", str(good)]) == 0
    capsys.readouterr()
    assert main(["validate", str(good)]) == 0
    assert json.loads(capsys.readouterr().out) == {"conformant": True, "violations": []}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(broken("V5__validity_13_months")))
    assert main(["validate", str(bad)]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["conformant"] is False and out["violations"][0]["requirement"] == "V5"
    (tmp_path / "torn.json").write_text("{")
    assert main(["validate", str(tmp_path / "torn.json")]) == 2
    assert main(["validate", str(tmp_path / "missing.json")]) == 2


if __name__ == "__main__":
    BROKEN.mkdir(exist_ok=True)
    for stale in BROKEN.glob("*.json"):
        stale.unlink()
    for key in MUTATIONS:
        (BROKEN / f"{key}.json").write_text(json.dumps(broken(key), indent=2, ensure_ascii=False) + "\n")
    sys.exit(0)
