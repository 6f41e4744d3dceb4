"""White-box audit measurements: one registered audit on one audited state, written as readings (C-H6, C-H7).

An audit compares the audited state with fixed anchor states (the model with the target, a model that never saw
it, the never-modified control; Annex B.3 for direction survival). So a cell is (audit, audited state); the anchors'
weights digests, the audit's registered name, version and parameters and its inputs (examples, probes, prompts)
are all in its cell key, and the same cell runs unchanged on the post-removal model and on each Annex B control
state (C-H7c: the same statistic on identical inputs). How a state is read is the audit's own
(:meth:`remnant.engine.audit_base.Audit.read`, given the references its class declares); this one measurement
serves an assessment (:mod:`remnant.assess.audits`) and a sweep (:func:`remnant.sweep.suite.audit_measurement`).

A cell writes :class:`~remnant.records.Reading` records, one per figure, each with the C-H7(b) fields worded by
:mod:`remnant.latent.block` at measurement time — reference, states compared, layer, position — so the statement's
``latent`` block is rebuilt from records alone. It never writes a cell record: nothing the verdict or the tier
reads can hold a latent figure (C-H6). An audit that raises is a *failed* reading, never a crashed run; a state
that could not be built is a *not run* reading (:class:`AuditNotRun`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from remnant.engine.audit_base import Audit, AuditInputs, Keep, Keeper, blank_fields
from remnant.engine.cell import CellTarget
from remnant.engine.measurement import Measurement, NotRun, Record, State, loaded
from remnant.records import Reading
from remnant.standard.vocabulary import Status

#: What the reading of a figure on an Annex B control state calls its role; the audited model is "removed".
REMOVED = "removed"

#: The anchor a declared reference reads (:data:`remnant.engine.audit_base.REFERENCES`): a plan keeps the model
#: that never saw the target under ``reference``, the name its cell key has always hashed.
ANCHOR_OF = {"retain": "reference"}


@dataclass(frozen=True)
class AuditPlan:
    """One declared audit, ready to run on any audited state (C-H7b: its anchors and inputs are fixed).

    ``anchors`` maps ``full`` (the model with the target), ``reference`` (the model that never saw it) and
    ``control`` (the never-modified control) to states (``.model``, ``.digest``; the model may be None where only
    the cell key is wanted); the audit reads those its class declares (``Audit.references``, :data:`ANCHOR_OF`).
    ``labels`` says how figures name them (:class:`remnant.latent.block.Anchors`); ``data`` holds the audit's
    runtime inputs and ``inputs`` what of them goes in the cell key; ``roles`` maps each audited state's role to
    the role its readings carry.
    """

    table: str
    name: str
    audit: Audit
    anchors: Mapping[str, Any]
    labels: Any
    data: Mapping[str, Any]
    inputs: Mapping[str, object]
    roles: Mapping[str, str]
    tokenizer: Any = None
    cache_dir: Path | None = None
    reference_role: str = "control"
    #: what the audit reuses between the states it reads (UDS stage 1): the plan's own, or a sweep worker's
    keep: Keep = field(default_factory=Keeper, compare=False, repr=False)
    #: Why the audit's inputs could not be built (its readings are *failed*), or None.
    error: str | None = None


def _reading(target: CellTarget, plan: AuditPlan, role: str, **fields: Any) -> Reading:
    return Reading(
        run_id=target.run_id,
        cell_key=target.key,
        measurement=plan.name,
        audit=plan.table,
        component=plan.audit.spec.to_dict(),
        model_state=target.state,
        role=role,
        **fields,
    )


def _blank_reading(target: CellTarget, plan: AuditPlan, role: str, **fields: Any) -> Reading:
    """A reading with no figure (failed, not run), its C-H7(b) fields from :func:`blank_fields`."""
    states, reference, layer, position = blank_fields(plan.labels, target.state)
    return _reading(
        target, plan, role, states=states, reference=reference, layer=layer, position=position, **fields
    )


class AuditMeasurement(Measurement):
    """One declared audit (:class:`AuditPlan`) on each audited state; readings only (module docstring)."""

    kind: ClassVar[str] = "audit"
    failure_is_outcome: ClassVar[bool] = True

    def __init__(self, plan: AuditPlan) -> None:
        self.plan = plan
        self.name = plan.name
        self.surface = "latent"

    def roles(self) -> tuple[str, ...]:
        return tuple(self.plan.roles)

    def key_inputs(self) -> dict[str, object]:
        p = self.plan
        return {
            "audit": p.audit.spec.to_dict(),
            "table": p.table,
            "anchors": {name: state.digest for name, state in sorted(p.anchors.items())},
            "reference_role": p.reference_role,
            **p.inputs,
        }

    def label(self, role: str) -> str:
        return f"audit {self.plan.table} ({self.name}) on {role}"

    def measure(self, state: State | None, target: CellTarget) -> list[Record]:
        p = self.plan
        role = p.roles.get(target.state, REMOVED)
        start = time.perf_counter()
        references = {name: p.anchors[ANCHOR_OF.get(name, name)] for name in p.audit.references}
        inputs = AuditInputs(p.data, p.labels, role, p.tokenizer, p.cache_dir, p.keep)
        figures = p.audit.read(loaded(state, self), references, inputs)
        elapsed = time.perf_counter() - start
        out: list[Record] = []
        for value, states, reference, layer, position, interval, details in figures:
            out.append(
                _reading(
                    target,
                    self.plan,
                    role,
                    states=states,
                    reference=reference,
                    layer=layer,
                    position=position,
                    value=value,
                    interval=interval,
                    details=details,
                    status="run",
                    reason=details.get("no_figure") if value is None else None,
                    elapsed_s=elapsed,
                )
            )
        return out

    def failed(self, target: CellTarget, exc: BaseException, elapsed: float) -> list[Record]:
        role = self.plan.roles.get(target.state, REMOVED)
        reason = f"{type(exc).__name__}: {exc}"
        return [_blank_reading(target, self.plan, role, status="failed", reason=reason, elapsed_s=elapsed)]


class AuditNotRun(NotRun):
    """An audited state the audit could not run on, with the reason: a *not run* reading (a state that could not
    be built) or a *failed* one (inputs that could not be built), so the statement says so (C-H7c). The one
    :class:`~remnant.engine.measurement.NotRun`, its record a reading rather than a cell record (C-H6). It reads
    no model state: run it with ``run_measurement(runner, m, None, role=STATE)``."""

    def __init__(self, plan: AuditPlan, state_role: str, reason: str, *, status: Status = "not_run") -> None:
        key = {
            "audit": plan.audit.spec.to_dict(),
            "table": plan.table,
            "audited": state_role,
            "status": status,
            "reason": reason,
            **plan.inputs,
        }
        label = f"audit {plan.table} ({plan.name}) on {state_role} ({status.replace('_', ' ')})"
        super().__init__("audit_not_run", plan.name, "latent", status, reason, key, label=label)
        self.plan, self.state_role = plan, state_role

    def measure(self, state: State | None, target: CellTarget) -> list[Record]:
        role = self.plan.roles.get(self.state_role, REMOVED)
        return [_blank_reading(target, self.plan, role, status=self.status, reason=self.reason)]


__all__ = [
    "ANCHOR_OF",
    "REMOVED",
    "AuditMeasurement",
    "AuditNotRun",
    "AuditPlan",
]
