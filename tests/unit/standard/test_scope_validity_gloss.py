"""The scope qualifier (V4, V3), the validity period (V5), the customer gloss (V6) and the requirement ids."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remnant.standard.gloss import GLOSSES, gloss
from remnant.standard.rules import GENERAL_REQUIREMENTS, Rule
from remnant.standard.scope import VERDICTS, scope_qualifier
from remnant.standard.validity import VALIDITY_MONTHS, add_months, validity_problem, validity_until


def test_scope_qualifier_is_v4_phrasing() -> None:
    phrase = scope_qualifier(
        verdict="removed", track="W", target="pack example-c", tau=0.70, model_version="v1.2"
    )
    assert phrase == "removed, under W-track assessment against pack example-c at τ = 0.7, as of v1.2"
    # The validator's V4 check looks for exactly these parts.
    for part in ("removed", "W-track", f"{0.70:g}", "v1.2"):
        assert part in phrase
    hidden = scope_qualifier(verdict="hidden", track="Q", target="t", tau=0.5, model_version="m")
    assert hidden.startswith("hidden, under Q-track assessment against t at τ = 0.5")


@pytest.mark.parametrize(
    "bad",
    [
        {"verdict": "gone"},
        {"track": "X"},
        {"target": "  "},
        {"tau": 1.5},
        {"model_version": ""},
    ],
)
def test_scope_qualifier_refuses_bad_parts(bad: dict[str, object]) -> None:
    args: dict[str, object] = {
        "verdict": "removed",
        "track": "W",
        "target": "t",
        "tau": 0.5,
        "model_version": "m",
    }
    args.update(bad)
    with pytest.raises(ValueError):
        scope_qualifier(**args)  # type: ignore[arg-type]


def test_add_months_clamps() -> None:
    assert add_months(dt.date(2026, 1, 31), 1) == dt.date(2026, 2, 28)
    assert add_months(dt.date(2024, 1, 31), 1) == dt.date(2024, 2, 29)
    assert add_months(dt.date(2024, 2, 29), 12) == dt.date(2025, 2, 28)
    assert add_months(dt.date(2026, 6, 1), 12) == dt.date(2027, 6, 1)
    assert add_months(dt.date(2026, 12, 15), 1) == dt.date(2027, 1, 15)
    assert add_months(dt.date(2026, 8, 31), 1) == dt.date(2026, 9, 30)


@given(st.dates(min_value=dt.date(1990, 1, 1), max_value=dt.date(2200, 1, 1)), st.integers(0, 120))
def test_add_months_properties(day: dt.date, months: int) -> None:
    later = add_months(day, months)
    assert (later.year * 12 + later.month) - (day.year * 12 + day.month) == months
    assert later.day == day.day or (later.day < day.day and (later + dt.timedelta(days=1)).day == 1)
    assert later >= day


def test_validity_until_and_problem() -> None:
    day = dt.date(2026, 6, 1)
    assert validity_until(day) == dt.date(2027, 6, 1)
    assert validity_problem(day, dt.date(2027, 6, 1)) is None
    assert "more than 12 months" in str(validity_problem(day, dt.date(2027, 6, 2)))
    assert "not after" in str(validity_problem(day, day))
    assert VALIDITY_MONTHS == 12


def test_glosses_follow_v6() -> None:
    assert tuple(GLOSSES) == VERDICTS
    assert gloss("removed").plain == "held up under attack"
    assert gloss("hidden").plain == "suppressed, not removed"
    assert gloss("utility-collapsed").plain == "broke the model"
    assert not gloss("partial").from_standard  # the Standard offers no gloss for partial
    assert gloss("utility-collapsed").licenses.startswith("Nothing.")
    assert any("V4" in item for item in gloss("removed").does_not_license)
    assert any("V1a" in item for item in gloss("partial").does_not_license)
    for verdict in VERDICTS:
        g = gloss(verdict)
        # V6: the normative term appears alongside the gloss.
        assert g.with_term.endswith(f"({verdict})")
    with pytest.raises(ValueError, match="not a verdict"):
        gloss("gone")


def test_rules() -> None:
    assert Rule("C-W5") is Rule.C_W5 and Rule.V1a.value == "V1a"
    assert [str(r) for r in GENERAL_REQUIREMENTS] == [f"R{i}" for i in range(1, 26)]
