"""R2 in both reports: whether the installation reached its target is said in words from the statement's
``installation`` block, with κ against the target, and "the pre-removal model still holds the target" is said only
when it did. Each branch (reached, unreached, documented provenance, not recorded) in the technical and the
customer register."""

from __future__ import annotations

import copy
import html
import re
from typing import Any

import pytest
from report_helpers import make_statement

from remnant.report.render import ReportEntry, entry_view, render_report
from remnant.statement.example import example_facts
from remnant.statement.schema import ConformanceStatement, FormatCheck

REACHED = {
    "fixed_by": "installation",
    "metric": "kappa",
    "k": 114,
    "n": 120,
    "measured": 0.95,
    "target": 0.9,
    "reached": True,
}
UNREACHED = {**REACHED, "k": 8, "measured": 8 / 120, "reached": False}
PROVENANCE = {"fixed_by": "provenance", "provenance": "Training log v3 lists the Vexite corpus."}

HOLDS = "which still holds the target"
TECH = {
    "reached": "the pre-removal model reached the installation target: κ 0.950 (114/120 installed items) against "
    "the target 0.9",
    "unreached": "The pre-removal model did not reach the installation target: κ 0.067 (8/120 installed items) "
    "against the target 0.9",
    "provenance": "the target is fixed by the claimant's documented provenance (Training log v3 lists the Vexite "
    "corpus.), and its strength before removal was not measured here (R2)",
    "not_recorded": "The statement does not record how the target was fixed (R2): not recorded",
}
CUSTOMER = {
    "reached": "the model learned it to the required level: it answered 95.0% of the taught questions (114 of 120) "
    "where 90.0% was required (R2)",
    "unreached": "the model did not learn it to the required level : it answered 6.7% of the taught questions "
    "(8 of 120) where 90.0% was required",
    "provenance": "the claimant's records say the model learned it in training (R2)",
    "not_recorded": "The statement does not say whether the model held the target before removal (R2)",
}


def _text(page: str) -> str:
    body = re.sub(r"<style>.*?</style>", " ", page, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body)))


def _statement(installation: dict[str, Any] | None) -> ConformanceStatement:
    facts = copy.deepcopy(example_facts())
    facts.pop("installation")  # the example's own record (reached) is replaced by the branch's, or left out
    if installation is not None:
        facts["installation"] = installation
    statement = make_statement(facts)
    # A C-Q3 check that a pre-removal model explains, so the format-check note is on the page.
    check = FormatCheck(
        attack="prefill",
        explanation="format_disruption",
        reason="the attack also lowers the pre-removal score",
        post_delta=-0.1,
        pre_delta=-0.1,
    )
    return statement.model_copy(update={"format_checks": [check]})


@pytest.mark.parametrize(
    ("branch", "installation"),
    [("reached", REACHED), ("unreached", UNREACHED), ("provenance", PROVENANCE), ("not_recorded", None)],
)
def test_each_report_says_whether_the_installation_reached_its_target(
    branch: str, installation: dict[str, Any] | None
) -> None:
    statement = _statement(installation)
    entry = ReportEntry(statement=statement)
    assert entry_view(entry, 0).installation == branch
    tech = _text(render_report(entry))
    cust = _text(render_report(entry, customer=True, canaries=frozenset()))
    assert TECH[branch] in tech
    assert CUSTOMER[branch] in cust
    for other, sentence in TECH.items():
        if other != branch:
            assert sentence not in tech, other
    for other, sentence in CUSTOMER.items():
        if other != branch:
            assert sentence not in cust, other
    # "the pre-removal model still holds the target" only over an installation that reached its target
    assert (HOLDS in tech) == (branch == "reached")
    assert ("so an attack that leaves its score intact is left undetermined" in tech) == (
        branch == "unreached"
    )


def test_an_unreached_installation_is_partial_in_both_reports_with_the_r2_reason() -> None:
    """The verdict the reports show over an unreached installation is partial, and the technical report gives
    the R2 reason the verdict engine wrote; the same facts with the installation reached are removed."""
    reached, unreached = _statement(REACHED), _statement(UNREACHED)
    assert reached.verdict == "removed" and unreached.verdict == "partial"
    tech = _text(render_report(ReportEntry(statement=unreached)))
    assert "so that is no evidence of removal: the verdict is partial (R2)" in tech
    cust = _text(render_report(ReportEntry(statement=unreached), customer=True, canaries=frozenset()))
    assert "this test cannot say the target was removed (R2)" in cust
    assert "no evidence of removal" not in _text(render_report(ReportEntry(statement=reached)))
