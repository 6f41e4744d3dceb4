"""Every factual sentence of the technical and customer reports is chosen from the statement, with both branches:
signed or not (K5), removal-stage utility not measured or measured over a zero reference (R11), every attack on
the control or not (R3, R4, V1a), and a test run as pre-registered only when a pre-registration is cited (R14)."""

from __future__ import annotations

import copy
import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from report_helpers import make_statement

from remnant.report.render import ReportEntry, render_comparison, render_report
from remnant.report.runs import ENVELOPE_FILE, STATEMENT_FILE, envelope_carries, load_entry
from remnant.standard.derive import UNDEFINED_UTILITY, utility_stages
from remnant.statement.absent import Absent
from remnant.statement.dsse import sign_statement
from remnant.statement.example import example_facts, example_statement
from remnant.statement.keys import generate_keypair, load_private_key
from remnant.statement.schema import ConformanceStatement


def _text(page: str) -> str:
    """Visible text: tags stripped, entities decoded, whitespace collapsed."""
    body = re.sub(r"<style>.*?</style>", " ", page, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body)))


def _both(entry: ReportEntry) -> tuple[str, str]:
    """(technical, customer) visible text of one entry."""
    return _text(render_report(entry)), _text(render_report(entry, customer=True, canaries=frozenset()))


# ---- signed (K5) -------------------------------------------------------------------------------------------------

SIGNED_CUSTOMER = "comes with a digital signature (statement.dsse.json) over exactly this statement"
UNSIGNED_CUSTOMER = "The full technical statement is not signed (K5)"
OTHER_CUSTOMER = "does not sign this statement, so the statement is not signed (K5)"


@pytest.mark.parametrize(
    ("envelope", "matches", "technical", "customer", "command"),
    [
        (None, None, "Unsigned (K5): no DSSE envelope accompanies", UNSIGNED_CUSTOMER, "remnant validate"),
        (ENVELOPE_FILE, True, "carries exactly this statement", SIGNED_CUSTOMER, "remnant verify"),
        (ENVELOPE_FILE, False, "does not carry this statement", OTHER_CUSTOMER, "remnant validate"),
    ],
)
def test_a_report_says_signed_only_over_an_envelope_that_carries_the_statement(
    envelope: str | None, matches: bool | None, technical: str, customer: str, command: str
) -> None:
    entry = ReportEntry(statement=example_statement(), envelope_file=envelope, envelope_matches=matches)
    tech, cust = _both(entry)
    assert technical in tech
    assert customer in cust
    assert "How to check this result" in cust and command in cust.split("How to check this result")[1]
    # the old unconditional sentence is gone from every branch
    assert "is signed by the assessor" not in cust
    others = {UNSIGNED_CUSTOMER, SIGNED_CUSTOMER, OTHER_CUSTOMER} - {customer}
    assert not any(o in cust for o in others)


def _run_folder(folder: Path, statement: ConformanceStatement) -> Path:
    folder.mkdir()
    raw = statement.model_dump(mode="json", by_alias=True)
    (folder / STATEMENT_FILE).write_text(json.dumps(raw, indent=2))
    return folder


def _sign(folder: Path, statement: ConformanceStatement, key_dir: Path) -> None:
    private, _ = generate_keypair(key_dir)
    envelope = sign_statement(
        statement.model_dump(mode="json", by_alias=True), load_private_key(private), name=STATEMENT_FILE
    )
    (folder / ENVELOPE_FILE).write_text(json.dumps(envelope))


def test_a_run_folder_is_signed_only_when_its_envelope_carries_its_statement(tmp_path: Path) -> None:
    statement = example_statement()
    unsigned = _run_folder(tmp_path / "unsigned", statement)
    assert load_entry(unsigned).envelope_matches is None and load_entry(unsigned).envelope_file is None

    signed = _run_folder(tmp_path / "signed", statement)
    _sign(signed, statement, tmp_path / "k1")
    assert load_entry(signed).envelope_matches is True
    assert SIGNED_CUSTOMER in _text(render_report(load_entry(signed), customer=True, canaries=frozenset()))

    # an envelope left from an earlier statement: the statement beside it is not the one signed
    stale = _run_folder(tmp_path / "stale", make_statement(copy.deepcopy(example_facts()), claim="Another."))
    _sign(stale, statement, tmp_path / "k2")
    entry = load_entry(stale)
    assert entry.envelope_file == ENVELOPE_FILE and entry.envelope_matches is False
    assert OTHER_CUSTOMER in _text(render_report(entry, customer=True, canaries=frozenset()))


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        json.dumps([1, 2]),
        json.dumps({"payloadType": "application/vnd.in-toto+json", "payload": "!!", "signatures": []}),
        json.dumps({"payloadType": "text/plain", "payload": "e30=", "signatures": [{"sig": "AA=="}]}),
    ],
)
def test_an_unreadable_or_foreign_envelope_signs_nothing(tmp_path: Path, content: str) -> None:
    folder = _run_folder(tmp_path / "run", example_statement())
    (folder / ENVELOPE_FILE).write_text(content)
    assert envelope_carries(folder / ENVELOPE_FILE, folder / STATEMENT_FILE) is False


# ---- utility: not measured, or measured over a zero reference (R11) ----------------------------------------------


def _utility(undefined: bool) -> ConformanceStatement:
    facts: dict[str, Any] = copy.deepcopy(example_facts())
    facts["utility"] = {"removal_stage": None, "attack_stage": None}
    if undefined:
        facts["utility"][UNDEFINED_UTILITY] = ["retain_kappa"]
    return make_statement(facts)


def test_zero_pre_removal_utility_is_undefined_not_unmeasured() -> None:
    unmeasured, undefined = _utility(False), _utility(True)
    assert isinstance(undefined.utility.removal_stage, Absent)
    assert "undefined" in undefined.utility.removal_stage.reason
    assert unmeasured.utility.removal_stage == Absent(reason="removal-stage utility not measured")
    assert undefined.verdict == unmeasured.verdict == "partial"  # neither can support removed (R13)
    assert any("measured at zero on retain_kappa" in r for r in undefined.verdict_reasons)
    assert not any("was not measured" in r for r in undefined.verdict_reasons)
    assert any("was not measured" in r for r in unmeasured.verdict_reasons)

    tech, cust = _both(ReportEntry(statement=undefined))
    assert "undefined: measured, but the pre-removal model scored 0 on retain_kappa" in tech
    assert "Usefulness was measured, but the original model scored zero" in cust
    assert "not measured" not in cust

    tech, cust = _both(ReportEntry(statement=unmeasured))
    assert "absent (removal-stage utility not measured)" in tech and "scored 0 on" not in tech
    assert "Usefulness after removal was not measured." in cust and "scored zero" not in cust


def test_the_comparison_rows_tell_undefined_from_unmeasured() -> None:
    entries = [
        ReportEntry(statement=_utility(True), label="zero"),
        ReportEntry(statement=_utility(False), label="none"),
    ]
    tech = _text(render_comparison(entries))
    cust = _text(render_comparison(entries, customer=True, canaries=frozenset()))
    assert re.search(r"zero partial \(inconclusive\) undefined \(u\(θ\) = 0\)", tech)
    assert re.search(r"none partial \(inconclusive\) absent", tech)
    glance = cust.split("At a glance")[1].split("Each removal was tested on its own")[0]
    assert glance.count("cannot be worked out") == 1 and glance.count("not measured") == 1


def test_the_facts_name_a_zero_reference_only_when_every_metric_was_measured() -> None:
    zero = {
        ("none", "removal_stage", "post_removal", "a"): 0.0,
        ("none", "removal_stage", "pre_removal", "a"): 0.0,
    }
    assert utility_stages(zero, ["a"]) == {
        "removal_stage": None,
        "attack_stage": None,
        UNDEFINED_UTILITY: ["a"],
    }
    # metric b lacks its readings: not measured, whatever a says
    assert UNDEFINED_UTILITY not in utility_stages(zero, ["a", "b"])
    measured = dict(zero) | {("none", "removal_stage", "pre_removal", "a"): 0.5}
    assert utility_stages(measured, ["a"]) == {"removal_stage": 0.0, "attack_stage": None}


def test_facts_cannot_call_a_measured_utility_undefined() -> None:
    from pydantic import ValidationError

    from remnant.standard.facts import UtilityFacts

    with pytest.raises(ValidationError, match="removal_stage_undefined"):
        UtilityFacts.model_validate({"removal_stage": 0.5, "attack_stage": None, UNDEFINED_UTILITY: ["a"]})
    # the key is written only when it applies, so other statements keep their bytes
    plain = UtilityFacts.model_validate({"removal_stage": 0.5, "attack_stage": None})
    assert plain.model_dump(mode="json") == {"removal_stage": 0.5, "attack_stage": None}


# ---- every attack on the control (R3, R4, V1a) ---------------------------------------------------------------------


def test_a_report_says_every_attack_ran_on_the_control_only_when_it_did() -> None:
    tech, cust = _both(ReportEntry(statement=example_statement()))
    assert "Every attack that ran was run with identical inputs on the post-removal model and on the" in tech
    assert "Each attack that ran was run on the model after removal and, in the same way, on a copy" in cust

    facts = copy.deepcopy(example_facts())
    facts["attacks"][1].update(control_k=None, control_n=None)  # prefill: no control result
    tech, cust = _both(ReportEntry(statement=make_statement(facts)))
    assert "for every one except prefill: it has no control result and cannot support hidden (V1a)" in tech
    assert "Every attack that ran was run with identical inputs" not in tech
    assert "for prefill that copy has no result" in cust
    assert "in the same way, on a copy" not in cust


# ---- ran as pre-registered (R14) -----------------------------------------------------------------------------------


def test_no_deviation_reads_as_registered_only_with_a_preregistration() -> None:
    statement = example_statement()
    tech, cust = _both(ReportEntry(statement=statement))
    assert "None: every pre-registered value was used as frozen." in tech
    assert "None: the test ran as registered in advance (R14)." in cust

    bare = statement.model_copy(
        update={
            "pre_registration": statement.pre_registration.model_copy(
                update={"digest": Absent(reason="not pre-registered")}
            )
        }
    )
    tech, cust = _both(ReportEntry(statement=bare))
    assert "no pre-registration digest is stated" in tech and "used as frozen" not in tech
    assert "the plan was not frozen in advance" in cust and "registered in advance (R14)" not in cust
