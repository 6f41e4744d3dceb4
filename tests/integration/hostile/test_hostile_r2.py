"""Hostile inputs about R2: statements and verdict facts that claim more than the installation they record.

A target fixed by installation is only known to be present if the pre-removal model reached the installation
target; *removed* over an installation that did not is a sentence the records do not support (R2). Here the
Annex D.2 example (a *removed* statement) is given, the way a hand-made statement would, an installation that
did not reach its target, or an installation record that contradicts itself, and handed to ``remnant validate``
and ``remnant sign`` (exit 1, the file and R2 named); verdict-facts files with such records are handed to
``remnant verdict`` (exit 2, the file, the field and R2 named). An unreached installation that is recorded
honestly gives a *partial* verdict with an R2 reason (exit 0), and the tiny real assessment (the session's
``chained_run``, whose 1-epoch installation reaches κ 0/120 against its target 0.9) says so in its statement and
both reports.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from harness import Hostile, check, ids

from remnant.cli import main
from remnant.statement.build import installation_block
from remnant.statement.example import example_statement
from remnant.statement.keys import generate_keypair

Edit = Callable[[dict[str, Any]], None]

UNREACHED = {
    "fixed_by": "installation",
    "metric": "kappa",
    "k": 8,
    "n": 120,
    "measured": 8 / 120,
    "target": 0.9,
    "reached": False,
}


def example() -> dict[str, Any]:
    return example_statement().model_dump(mode="json", by_alias=True)


def _install(d: dict[str, Any], installation: dict[str, Any], *, block: bool = True) -> None:
    """Record ``installation`` in the facts and, with ``block``, the statement's own block as the builder would."""
    d["facts"]["installation"] = installation
    if block:
        d["installation"] = installation_block(d["facts"]).model_dump(mode="json")


def _statement(edit: Edit, *, command: str = "validate") -> Callable[[Path], tuple[list[str], str]]:
    def build(tmp: Path) -> tuple[list[str], str]:
        data = example()
        edit(data)
        path = tmp / "statement.json"
        path.write_text(json.dumps(data, indent=2), encoding="utf-8")
        if command == "sign":
            generate_keypair(tmp / "keys")
            return ["sign", str(path), "--key", str(tmp / "keys" / "remnant.key")], str(path)
        return ["validate", str(path)], str(path)

    return build


def _removed_over_unreached(d: dict[str, Any]) -> None:  # verdict, scope and reasons left as removed
    _install(d, UNREACHED)


def _unreached_block_only(d: dict[str, Any]) -> None:  # the facts say nothing, so they still give removed
    d["installation"] = dict(UNREACHED)


def _removed_with_no_installation_record(d: dict[str, Any]) -> None:  # neither installed nor provenance
    d["facts"].pop("installation")
    d["installation"] = {"absent": True, "reason": "not recorded"}


def _reached_below_target(d: dict[str, Any]) -> None:  # the record claims reached against its own numbers
    _install(d, {**UNREACHED, "reached": True}, block=False)
    d["installation"] = {**UNREACHED, "reached": True}


def _measured_not_k_over_n(d: dict[str, Any]) -> None:  # 0.95 written beside 8/120
    _install(d, {**UNREACHED, "measured": 0.95, "reached": True}, block=False)


def _block_dropped(d: dict[str, Any]) -> None:  # facts unreached, the block that reports read made absent
    _install(d, UNREACHED)
    d["installation"] = {"absent": True, "reason": "not recorded"}


def _block_says_reached(
    d: dict[str, Any],
) -> None:  # facts unreached, the block rewritten to a reached install
    _install(d, UNREACHED)
    d["installation"] = {**UNREACHED, "k": 114, "measured": 0.95, "reached": True}


def _provenance_with_measurement(d: dict[str, Any]) -> None:
    _install(d, {"fixed_by": "provenance", "provenance": "training log v3", "reached": True}, block=False)


def _unknown_way(d: dict[str, Any]) -> None:
    _install(d, {**UNREACHED, "fixed_by": "hearsay"}, block=False)


def _facts_file(installation: dict[str, Any]) -> Callable[[Path], tuple[list[str], str]]:
    def build(tmp: Path) -> tuple[list[str], str]:
        facts = copy.deepcopy(example()["facts"])
        facts["installation"] = installation
        path = tmp / "facts.json"
        path.write_text(json.dumps(facts), encoding="utf-8")
        return ["verdict", str(path)], str(path)

    return build


CASES = [
    Hostile("removed-over-unreached", _statement(_removed_over_unreached), requirement="R2", exit_code=1),
    Hostile(
        "sign-removed-over-unreached",
        _statement(_removed_over_unreached, command="sign"),
        requirement="R2",
        exit_code=1,
    ),
    Hostile("unreached-block-only", _statement(_unreached_block_only), requirement="R2", exit_code=1),
    Hostile(
        "removed-with-no-installation-record",
        _statement(_removed_with_no_installation_record),
        requirement="R2",
        exit_code=1,
    ),
    Hostile("reached-below-target", _statement(_reached_below_target), requirement="R2", exit_code=1),
    Hostile("measured-not-k-over-n", _statement(_measured_not_k_over_n), requirement="R2", exit_code=1),
    Hostile("installation-block-dropped", _statement(_block_dropped), requirement="R2", exit_code=1),
    Hostile(
        "installation-block-says-reached", _statement(_block_says_reached), requirement="R2", exit_code=1
    ),
    Hostile(
        "provenance-with-measurement", _statement(_provenance_with_measurement), requirement="R2", exit_code=1
    ),
    Hostile("unknown-way-of-fixing", _statement(_unknown_way), requirement="R2", exit_code=1),
    Hostile(
        "verdict-facts-reached-below-target", _facts_file({**UNREACHED, "reached": True}), requirement="R2"
    ),
    Hostile(
        "verdict-facts-installation-without-counts",
        _facts_file({"fixed_by": "installation", "target": 0.9, "reached": True}),
        requirement="R2",
    ),
    Hostile(
        "verdict-facts-provenance-reached",
        _facts_file({"fixed_by": "provenance", "provenance": "training log v3", "reached": True}),
        requirement="R2",
    ),
    Hostile("verdict-facts-unknown-way", _facts_file({**UNREACHED, "fixed_by": "hearsay"}), requirement="R2"),
]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_hostile_r2(case: Hostile, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    check(case, tmp_path, capsys)
    if case.id.startswith("sign-"):
        assert not (tmp_path / "statement.dsse.json").exists()


def test_removed_over_unreached_names_the_installation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """validate's R2 violation says what the installation measured against its target, beside V1's recount."""
    text = check(CASES[0], tmp_path, capsys)
    report = json.loads(text[text.index("{") :])
    r2 = [v["message"] for v in report["violations"] if v["requirement"] == "R2"]
    assert r2 == [
        "removed stated over an installation that did not reach its target (measured 0.0666667, 8/120, against 0.9)"
    ]
    assert any(v["requirement"] == "V1" and "'partial'" in v["message"] for v in report["violations"])


def test_an_honest_unreached_installation_is_partial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same facts recorded honestly: `remnant verdict` draws partial with the R2 reason (exit 0), where
    without the installation record they are removed."""
    _facts_file(UNREACHED)(tmp_path)
    assert main(["verdict", str(tmp_path / "facts.json")]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["verdict"] == "partial" and printed["decisive_attacks"] == []
    assert "R2" in printed["rule_ids"]
    assert any("did not reach its installation target" in r for r in printed["reasons"])
    assert any("no evidence of removal" in r for r in printed["reasons"])
    facts = tmp_path / "plain.json"
    facts.write_text(json.dumps(example()["facts"]), encoding="utf-8")
    assert main(["verdict", str(facts)]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "removed"


def test_the_tiny_run_states_its_unreached_installation(chained_run: Path) -> None:
    """The tiny assessment installs for one epoch and reaches κ 0/120 against 0.9: its statement records that in
    the facts and the installation block, its verdict is not removed and cites R2, and both reports say the
    installation did not reach its target (and never that the pre-removal model still holds the target)."""
    statement = json.loads((chained_run / "statement.json").read_text(encoding="utf-8"))
    expected = {**UNREACHED, "k": 0, "measured": 0.0, "provenance": None}
    assert statement["facts"]["installation"] == expected
    assert statement["installation"] == expected
    assert statement["verdict"] != "removed" and "R2" in " ".join(statement["verdict_reasons"])
    technical = (chained_run / "report.html").read_text(encoding="utf-8")
    customer = (chained_run / "report-customer.html").read_text(encoding="utf-8")
    assert "The pre-removal model did not reach the installation target" in technical
    assert "which still holds the target" not in technical
    assert "did not learn it to the required level" in customer
    for check_ in statement["format_checks"]:
        assert check_["explanation"] != "specific_to_post_removal", (
            check_
        )  # R2: an intact score excludes nothing
