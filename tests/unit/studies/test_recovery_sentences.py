"""The recovery study's sentences are chosen from the pool: why there is no never-saw level (none in the pool, none
relearned, relearned with no eligible item), and *excess* only when a never-saw level was subtracted (C-H6 study
output; R14 pre-registered config)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from _study_pools import PLANTED_ORIENTATION

from remnant.results import PoolTable
from remnant.studies.config import RecoveryConfig
from remnant.studies.document import to_markdown
from remnant.studies.recovery import RecoveryResult, recovery
from remnant.studies.report import recovery_document, summary_document

CFG = RecoveryConfig(orientation=PLANTED_ORIENTATION)
NOT_NET = "recovery is not net of fresh learning"

Pool = tuple[PoolTable, dict[str, Any], Path]


def _without_never_saw_relearning(table: PoolTable) -> PoolTable:
    rows = tuple(r for r in table.rows if not (r.pool == "never_saw" and r.perturbation == "relearn"))
    never = set(table.models("never_saw"))
    items = tuple(i for i in table.items or () if not (i.model in never and i.perturbation == "relearn"))
    return dataclasses.replace(table, rows=rows, items=items)


def _never_saw_already_holding(table: PoolTable) -> PoolTable:
    """Never-saw models relearned, but every item already at the target level before the attack: none eligible."""
    never = set(table.models("never_saw"))
    items = tuple(
        dataclasses.replace(i, value=1.0) if i.model in never and i.perturbation == "none" else i
        for i in table.items or ()
    )
    return dataclasses.replace(table, items=items)


def _no_never_saw(table: PoolTable) -> PoolTable:
    rows = tuple(r for r in table.rows if r.pool != "never_saw")
    return dataclasses.replace(table, rows=rows)


def _markdown(result: RecoveryResult) -> str:
    return to_markdown(recovery_document(result))


def test_a_never_saw_level_makes_the_outcome_excess(pool: Pool) -> None:
    result = recovery(pool[0], CFG)
    assert result.gold_rate == pytest.approx(pool[1]["gold"])
    assert not any(NOT_NET in n for n in result.notes)
    text = _markdown(result)
    assert (
        "Outcome: excess revival of 'kappa'" in text and "net of the never-saw models' level (0.048)" in text
    )
    assert "not net of fresh learning" not in text and "compare with the j_access row above" in text


def test_no_never_saw_model_relearned(pool: Pool) -> None:
    result = recovery(_without_never_saw_relearning(pool[0]), CFG)
    assert result.gold_rate is None
    assert (
        f"no never-saw model was relearned (8 in the pool, no finished relearn row): {NOT_NET}"
        in result.notes
    )
    text = _markdown(result)
    assert "Outcome: revival (not net of fresh learning) of 'kappa'" in text
    ours, published = text.split("## Published")
    assert "excess revival" not in ours and "so the j_access row above is not its like" in published
    # the per-model outcome is the raw rate, as the label now says
    assert all(o.recovery == o.rate for o in result.outcomes)


def test_relearned_but_no_eligible_item_is_not_blamed_on_relearning(pool: Pool) -> None:
    result = recovery(_never_saw_already_holding(pool[0]), CFG)
    assert result.gold_rate is None
    (note,) = [n for n in result.notes if NOT_NET in n]
    assert note.startswith("8 never-saw models were relearned, but none had an eligible item")
    assert "was relearned" not in note and "no never-saw model was relearned" not in note
    assert "revival (not net of fresh learning)" in _markdown(result)


def test_a_pool_without_never_saw_models(pool: Pool) -> None:
    result = recovery(_no_never_saw(pool[0]), CFG)
    assert f"the pool has no never-saw model: {NOT_NET}" in result.notes


@pytest.mark.parametrize(("relearned", "label"), [(True, "excess shift"), (False, "shift (not net")])
def test_the_shift_outcome_is_labelled_the_same_way(pool: Pool, relearned: bool, label: str) -> None:
    table = pool[0] if relearned else _without_never_saw_relearning(pool[0])
    result = recovery(table, CFG.model_copy(update={"outcome_kind": "shift"}))
    text = _markdown(result)
    assert f"Outcome: {label}" in text
    summary = to_markdown(summary_document(None, result))
    assert f"(ρ with {label}" in summary
