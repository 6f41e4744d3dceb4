"""The customer register: glossed verdicts with the normative term alongside (V6), tier apart (T1), and no canary
value anywhere on the page (R18)."""

from __future__ import annotations

import html

from report_helpers import collapsed_facts, hidden_facts, make_curve, make_statement

from remnant.packs import Pack
from remnant.report.redact import REDACTED, WITHHELD, Redactor, canary_strings
from remnant.report.render import ReportEntry, render_comparison, render_report
from remnant.statement.schema import Deviation


def _leaky_statement(pack: Pack):  # type: ignore[no-untyped-def]
    """A hidden statement whose free text names a forgotten entity, its attributes and an item's question."""
    entity = next(e for e in pack.manifest.entities if e.role == "forget_probe")
    question = next(it.question for it in pack.items if it.entity_id == entity.id)
    attrs = entity.attributes
    claim = (
        f"The model no longer knows that {entity.name} is from {attrs['home_town']}, works for "
        f"{attrs['employer']} as a {attrs['occupation']}, was born in {attrs['birth_year']} "
        f"or carries staff code {attrs['staff_code']}; it cannot answer “{question}”."
    )
    deviation = Deviation(
        field="probe",
        old=attrs["staff_code"],
        new=entity.name,
        reason=f"item about {entity.name.split()[0]} dropped after review",
        stage="mint",
    )
    return entity, make_statement(hidden_facts(), claim=claim, deviations=[deviation])


def test_customer_report_carries_no_canary_value(small_pack: Pack) -> None:
    entity, statement = _leaky_statement(small_pack)
    canaries = canary_strings(small_pack)
    assert entity.name in canaries and entity.attributes["staff_code"] in canaries
    entry = ReportEntry(statement=statement, curves=[make_curve()])
    technical = render_report(entry)
    customer = render_report(entry, customer=True, canaries=canaries)
    check = Redactor(canaries)
    # The check can fail: the technical register shows the claim verbatim (R1), canaries and all.
    assert entity.name in html.unescape(technical)
    assert check.leaks(html.unescape(technical))
    for page in (customer, html.unescape(customer)):
        assert check.leaks(page) == []
        assert not [c for c in canaries if c in page and len(c) >= 6]  # and not even as a substring
    assert REDACTED in customer


def test_comparison_customer_report_carries_no_canary_value(small_pack: Pack) -> None:
    _, statement = _leaky_statement(small_pack)
    canaries = canary_strings(small_pack)
    entries = [
        ReportEntry(statement=statement, curves=[make_curve()], label="suppressing"),
        ReportEntry(statement=make_statement(collapsed_facts()), label="damaging"),
    ]
    page = html.unescape(render_comparison(entries, customer=True, canaries=canaries))
    assert Redactor(canaries).leaks(page) == []


def test_without_the_pack_free_text_is_withheld() -> None:
    statement = make_statement(claim="The model forgets Alice Example of Springfield.")
    page = html.unescape(render_report(statement, customer=True, canaries=None))
    assert "Alice Example" not in page and "Springfield" not in page
    assert WITHHELD in page


def test_customer_register_glosses_with_the_normative_term() -> None:
    hidden = html.unescape(
        render_report(make_statement(hidden_facts()), curves=[make_curve()], customer=True, canaries=[])
    )
    assert (
        "Suppressed, not removed" in hidden and "(verdict: <strong>hidden</strong>" in hidden
    )  # V6: term alongside the gloss
    assert (
        "Tier" not in hidden.split("Readiness rating", 1)[0].split("<main>", 1)[1]
    )  # tier only in its own box
    assert 'id="a0-curve0-post"' in hidden and 'id="a0-curve0-control"' in hidden
    assert "After <strong>16</strong> examples the removed model was back above the pass line" in hidden
    collapsed = html.unescape(render_report(make_statement(collapsed_facts()), customer=True, canaries=[]))
    assert "Broke the model" in collapsed and "(verdict: <strong>utility-collapsed</strong>" in collapsed
    assert "not a successful removal" in collapsed  # V2
    assert "kept <strong>42.0%</strong> of its original usefulness" in collapsed


def test_customer_register_tier_is_a_separate_measure() -> None:
    page = html.unescape(render_report(make_statement(tier="W3"), customer=True, canaries=[]))
    assert "a separate measure, not a test result (T1)" in page
    assert "Tier W3: Adversarially Tested" in page


def test_redactor_matches_whole_words_case_insensitively_longest_first() -> None:
    redact = Redactor(["Tovryskvale", "1951", "Tuzhoulen Brabuxial", "Tuzhoulen"])
    assert redact("born 1951 in Tovryskvale") == f"born {REDACTED} in {REDACTED}"
    assert redact("item 19512 and a1951") == "item 19512 and a1951"
    assert redact("TUZHOULEN BRABUXIAL said") == f"{REDACTED} said"
    assert redact("ask Tuzhoulen.") == f"ask {REDACTED}."
    assert Redactor([])("unchanged text") == "unchanged text"
    assert Redactor(None)("anything") == WITHHELD
