"""Where a cell's records go, and the one way a cell record is written (R6, R19, R22). Pure: no torch.

A cell is one measurement on one state (one attack × state × checkpoint group). Every record it writes carries
the same run, key, state, record name and surface (:class:`CellTarget`); :func:`cell_record` and
:func:`status_record` build its cell records, :func:`observation_record` its per-item observations. What a cell
measured beyond its counts goes in the record's typed fields (:class:`CellFields`, the
:class:`~remnant.records.CellRecord` fields of schema_version 3), never in a loose ``params`` dict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from remnant.records import CellRecord, Entities, Observation
from remnant.standard.vocabulary import Risk, Status

#: How much of a model output an observation keeps (redacted in customer reports, R18).
EXCERPT = 160


class CellFields(TypedDict, total=False):
    """The typed fields of a cell record beyond identity and counts (:data:`remnant.records.CELL_DETAIL_FIELDS`;
    their descriptions are on :class:`~remnant.records.CellRecord`). A writer sets those that apply."""

    budget: int
    step: int
    epoch: float
    examples: int
    risk: Risk
    method: str
    baseline: float | None
    entities: Entities
    expected_k: float
    component: dict[str, object]
    attack_component: dict[str, object]
    utility_metric: str
    value: float
    proportion: bool
    adjudicating: bool
    reused_step0: bool


@dataclass(frozen=True)
class CellTarget:
    """The fields every observation and cell record of one cell carries."""

    run_id: str
    key: str
    state: str
    attack: str
    surface: str

    def retarget(self, **changes: str) -> CellTarget:
        """The same cell writing under another name or surface (e.g. a relearned copy's utility reading)."""
        from dataclasses import replace

        return replace(self, **changes)


def cell_record(
    target: CellTarget,
    *,
    checkpoint: str,
    elapsed: float,
    metric: str = "kappa",
    k: int = 0,
    n: int = 0,
    fields: CellFields | None = None,
    params: dict[str, object] | None = None,
    status: Status = "run",
    reason: str | None = None,
) -> CellRecord:
    """One cell record of ``target`` with ``fields`` set, and in ``params`` only what no typed field holds;
    ``k = n = 0`` with a status and reason for a cell that did not run (R19)."""
    return CellRecord(
        run_id=target.run_id,
        cell_key=target.key,
        attack=target.attack,
        surface=target.surface,
        model_state=target.state,
        metric=metric,
        k=k,
        n=n,
        checkpoint=checkpoint,
        **(fields or {}),
        params={} if params is None else params,
        elapsed_s=elapsed,
        status=status,
        reason=reason,
    )


def status_record(
    target: CellTarget,
    *,
    status: Status,
    reason: str,
    elapsed: float = 0.0,
    checkpoint: str = "final",
    fields: CellFields | None = None,
) -> CellRecord:
    """The record of a cell that did not run: not applicable (C-Q2), not run, failed or diverged."""
    return cell_record(
        target, checkpoint=checkpoint, elapsed=elapsed, status=status, reason=reason, fields=fields
    )


def observation_record(
    target: CellTarget,
    *,
    checkpoint: str,
    seed: int,
    item_id: str,
    value: bool | float | None,
    willing: bool | None,
    output: str | None,
) -> Observation:
    """One scored item; an analytic probability or a graded metric value goes to ``score`` with κ left null (R6);
    ``None``: an item the metric gave no value."""
    analytic = not isinstance(value, bool)
    return Observation(
        run_id=target.run_id,
        cell_key=target.key,
        model_state=target.state,
        attack=target.attack,
        surface=target.surface,
        item_id=item_id,
        checkpoint=checkpoint,
        kappa=None if analytic else bool(value),
        willing=willing,
        score=float(value) if analytic and value is not None else None,
        output_excerpt=(output or "")[:EXCERPT],
        seed=seed,
    )


__all__ = ["EXCERPT", "CellFields", "CellTarget", "cell_record", "observation_record", "status_record"]
