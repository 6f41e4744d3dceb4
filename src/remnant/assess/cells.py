"""What an assessment reads back from its own cells while it runs: the control's general-utility set and a
finished cell's item outcomes (the cells themselves: :mod:`remnant.engine.measurement`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from remnant.engine.attack import AttackMeasurement
from remnant.engine.measurement import run_measurement
from remnant.engine.runner import CellRunner
from remnant.records import Observation

#: The attack name of the control's general-question cell (R10: the binding's kept set).
BINDING = "binding"


def kept_general_ids(
    runner: CellRunner, *, control: Any, ctx: Any, general: Sequence[Any], key_inputs: dict[str, object]
) -> list[str]:
    """The general questions the never-modified control answers (R10: u measurable on the control)."""
    measurement = AttackMeasurement(
        BINDING, None, ctx, general, {**key_inputs, "purpose": "general_utility_set"}, roles=("control",)
    )
    records = run_measurement(runner, measurement, control)
    key = records[0].cell_key
    hits = {
        r.item_id for r in runner.store.read() if isinstance(r, Observation) and r.cell_key == key and r.kappa
    }
    return [p.item_id for p in general if p.item_id in hits]


def outcomes_of(runner: CellRunner, key: str, probes: Sequence[Any]) -> list[Any] | None:
    """A finished cell's item outcomes, rebuilt from its observations in probe order (None if incomplete)."""
    from remnant.attacks.base import ItemOutcome

    found = {
        r.item_id: ItemOutcome(r.item_id, r.output_excerpt, bool(r.kappa), r.willing)
        for r in runner.store.read()
        if isinstance(r, Observation) and r.cell_key == key and r.kappa is not None
    }
    if any(p.item_id not in found for p in probes):
        return None
    return [found[p.item_id] for p in probes]


__all__ = ["BINDING", "kept_general_ids", "outcomes_of"]
