"""The sweep page's placeholders say why a section is empty from the plan and the table (no perturbation
declared, or none measured), never one for the other (C-H6 research output; R23 the table the records gave)."""

from __future__ import annotations

from typing import Any

import pytest

from remnant.sweep.html import render_page


def _rows(value: float | None) -> list[dict[str, Any]]:
    rows = []
    for i, pool in enumerate(("target", "never_saw", "unlearned")):
        for perturbation in ("none", "nf4"):
            rows.append(
                {
                    "model": f"m{i}",
                    "pool": pool,
                    "method": "npo" if pool == "unlearned" else None,
                    "strength": None,
                    "status": "ok",
                    "perturbation": perturbation,
                    "utility": None if value is None else value + i / 10,
                    "kappa": None if value is None else value * i,
                }
            )
    return rows


@pytest.mark.parametrize(
    ("value", "perturbations", "placeholder"),
    [
        (0.5, ["none", "nf4"], None),
        (None, ["none", "nf4"], "no measured column to compare before and after nf4"),
        (0.5, ["none"], "no perturbation declared"),
    ],
)
def test_the_perturbation_section_says_why_it_is_empty(
    value: float | None, perturbations: list[str], placeholder: str | None
) -> None:
    page = render_page("p", _rows(value), ["kappa"], perturbations, "note")
    section = page.split("<h2>Before and after perturbation</h2>")[1]
    if placeholder is None:
        assert "<svg" in section and "<p>" not in section
    else:
        assert f"<p>{placeholder}</p>" in section
    others = {"no perturbation declared", "no measured column to compare before and after nf4"} - {
        placeholder
    }
    assert not any(o in section for o in others)


def test_spread_and_metric_sections_say_when_nothing_was_measured() -> None:
    empty = render_page("p", _rows(None), ["kappa"], ["none"], "note")
    assert "<p>no measured column</p>" in empty and "<p>fewer than two measured columns</p>" in empty
    full = render_page("p", _rows(0.5), ["kappa"], ["none"], "note")
    assert "<p>no measured column</p>" not in full and "fewer than two measured columns" not in full
