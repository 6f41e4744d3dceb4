"""White-box audit measurements: one registered audit on one audited state, written as readings (C-H6, C-H7).

An audit compares the audited state with fixed anchor states: UDS patches the audited model (and a model that
never saw the target, the *reference*) into the model with the target installed; J-Access reads the audited model
and both anchors through one lens; direction survival projects the audited model's shift from the never-modified
control on the installed-minus-control direction (Annex B.3). So a cell is (audit, audited state); the anchors'
weights digests, the audit's registered name, version and parameters and its inputs (examples, probes, prompts)
are all in its cell key, and the same cell runs unchanged on the post-removal model and on each Annex B control
state (C-H7c: the same statistic on identical inputs).

A cell writes :class:`~remnant.records.Reading` records, one per figure, each with the C-H7(b) fields worded by
:mod:`remnant.latent.block` at measurement time — reference, states compared, layer, position — so the statement's
``latent`` block is rebuilt from records alone. It never writes a cell record: nothing the verdict or the tier
reads can hold a latent figure (C-H6). An audit that raises is a *failed* reading, never a crashed run; a state
that could not be built is a *not run* reading (:class:`AuditNotRun`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, cast

from remnant.engine.cell import CellTarget
from remnant.engine.measurement import Measurement, Record
from remnant.records import Reading

#: What the reading of a figure on an Annex B control state calls its role; the audited model is "removed".
REMOVED = "removed"

#: One figure: (value, states compared, reference, layer, position, interval, details).
Figure = tuple[float | None, list[str], str, str, str, tuple[float, float] | None, dict[str, Any]]


@dataclass(frozen=True)
class AuditPlan:
    """One declared audit, ready to run on any audited state (C-H7b: its anchors and inputs are fixed).

    ``anchors`` maps ``full`` (the model with the target), ``reference`` (the model that never saw it) and
    ``control`` (the never-modified control) to loaded states; ``labels`` says how figures name them
    (:class:`remnant.latent.block.Anchors`); ``data`` holds the audit's runtime inputs and ``inputs`` what of
    them goes in the cell key; ``roles`` maps each audited state's role to the role its readings carry.
    """

    table: str
    name: str
    audit: Any
    anchors: Mapping[str, Any]
    labels: Any
    data: Mapping[str, Any]
    inputs: Mapping[str, Any]
    roles: Mapping[str, str]
    tokenizer: Any = None
    cache_dir: Any = None
    family: str = "uds"
    reference_role: str = "control"
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


def _blank_fields(plan: AuditPlan, state: str) -> tuple[list[str], str, str, str]:
    """The C-H7(b) fields of a reading with no figure: what the audit compared (or would have), read nowhere."""
    labels = plan.labels
    states = [state, labels.full or "full", labels.retain or "reference"]
    return states, f"{labels.retain or 'reference'} (never saw the target){labels.note}", "—", "—"


def _blank_reading(target: CellTarget, plan: AuditPlan, role: str, **fields: Any) -> Reading:
    """A reading with no figure (failed, not run), its C-H7(b) fields from :func:`_blank_fields`."""
    states, reference, layer, position = _blank_fields(plan, target.state)
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

    def key_inputs(self) -> dict[str, Any]:
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

    def measure(self, state: Any, target: CellTarget) -> list[Record]:
        role = self.plan.roles.get(target.state, REMOVED)
        start = time.perf_counter()
        figures = FAMILIES[self.plan.family](self.plan, state)
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


class AuditNotRun(Measurement):
    """An audited state the audit could not run on, with the reason: a *not run* reading (a state that could not
    be built) or a *failed* one (inputs that could not be built), so the statement says so (C-H7c). It reads no
    model state: run it with ``run_measurement(runner, m, None, role=STATE)``."""

    kind: ClassVar[str] = "audit_not_run"

    def __init__(self, plan: AuditPlan, state_role: str, reason: str, *, status: str = "not_run") -> None:
        self.plan = plan
        self.name = plan.name
        self.surface = "latent"
        self.state_role = state_role
        self.reason = reason
        self.status = status

    def roles(self) -> tuple[str, ...]:
        return ()

    def key_inputs(self) -> dict[str, Any]:
        return {
            "audit": self.plan.audit.spec.to_dict(),
            "table": self.plan.table,
            "audited": self.state_role,
            "status": self.status,
            "reason": self.reason,
            **self.plan.inputs,
        }

    def label(self, role: str) -> str:
        return f"audit {self.plan.table} ({self.name}) on {self.state_role} ({self.status.replace('_', ' ')})"

    def measure(self, state: Any, target: CellTarget) -> list[Record]:
        role = self.plan.roles.get(self.state_role, REMOVED)
        return [_blank_reading(target, self.plan, role, status=self.status, reason=self.reason)]


def _uds_figures(plan: AuditPlan, state: Any) -> list[Figure]:
    from remnant.latent.block import no_figure_note, uds_figure
    from remnant.latent.uds import score_source, stage1, uds_no_retain

    full, ref = plan.anchors["full"], plan.anchors["reference"]
    examples, cfg = plan.data["examples"], plan.audit.config
    if plan.name == "uds_no_retain":
        r = uds_no_retain(full.model, state.model, plan.tokenizer, examples, cfg)
        r = r.model_copy(update={"target_model": full.digest, "source_model": state.digest})
    elif plan.name == "logit_lens_uds":
        r = plan.audit.run(full.model, ref.model, state.model, plan.tokenizer, examples)
        update = {"target_model": full.digest, "retain_model": ref.digest, "source_model": state.digest}
        r = r.model_copy(update=update)
    else:
        s1 = stage1(
            full.model,
            ref.model,
            plan.tokenizer,
            examples,
            cfg,
            cache_dir=plan.cache_dir,
            full_digest=full.digest,
            retain_digest=ref.digest,
        )
        r = score_source(full.model, state.model, s1, cfg, source_digest=state.digest)
    fig = uds_figure(state.role, r, plan.labels)
    details = {
        k: getattr(r, k)
        for k in ("n_examples", "n_scored", "n_no_ke", "n_span_not_found", "coverage", "layers", "tau")
    }
    details.update(
        prompt_format=r.prompt_format,
        uds_compat=r.uds_compat,
        layer_mean_ler=r.layer_mean_ler,
        provenance=r.provenance,
        examples=[e.idx for e in r.examples],
    )
    if fig is None:
        details["no_figure"] = no_figure_note(plan.name, state.role, r)
        return [(None, *_blank_fields(plan, state.role), None, details)]
    return [(fig.value, fig.states, fig.reference, str(fig.layer), fig.position, None, details)]


def _jaccess_figures(plan: AuditPlan, state: Any) -> list[Figure]:
    from remnant.latent.block import jaccess_figure, no_figure_note

    full, ref = plan.anchors["full"], plan.anchors["reference"]
    d = plan.data
    r = plan.audit.run(
        state.model,
        full.model,
        ref.model,
        plan.tokenizer,
        d["probes"],
        d["lens_prompts"],
        decoys=d.get("decoys", ()),
        calibration=d.get("calibration", ()),
        cache_dir=plan.cache_dir,
    )
    update = {"audited_model": state.digest, "original_model": full.digest, "retain_model": ref.digest}
    r = r.model_copy(update=update)
    fig = jaccess_figure(state.role, r, plan.labels)
    details: dict[str, Any] = {
        k: getattr(r, k)
        for k in (
            "jocc_clipped",
            "access_audited",
            "access_original",
            "access_retain",
            "retain_gap",
            "retain_gap_ci95",
            "p_above_retain",
            "n_probes",
            "n_silent",
            "k",
            "layers",
            "decoder",
            "probe_level",
            "provenance",
        )
    }
    if r.band_selection is not None:
        details["band_selection"] = r.band_selection.model_dump(mode="json")
    if fig is None:
        details["no_figure"] = no_figure_note(plan.name, state.role, r)
        return [(None, *_blank_fields(plan, state.role), None, details)]
    return [(fig.value, fig.states, fig.reference, str(fig.layer), fig.position, None, details)]


def _direction_figures(plan: AuditPlan, state: Any) -> list[Figure]:
    from remnant.latent.block import direction_figures
    from remnant.latent.direction import Role, direction_survival

    control, full = plan.anchors["control"], plan.anchors["full"]
    role = cast(Role, plan.roles.get(state.role, REMOVED))
    r = direction_survival(
        control.model,
        full.model,
        {state.role: state.model},
        {state.role: role},
        plan.data["prompts"],
        plan.audit.config,
    )
    update = {"reference": control.digest, "installed": full.digest, "states": {state.role: state.digest}}
    r = r.model_copy(update=update)
    floors = {(s.layer, s.position): s for s in r.signatures}
    out: list[Figure] = []
    for f, fig in direction_figures(r, plan.labels):
        sig = floors[(f.layer, f.position)]
        details = {
            "within_margin": f.within_margin,
            "margin": r.margin,
            "signature": sig.magnitude,
            "permutation_floor": sig.permutation_floor,
            "n_prompts": r.n_prompts,
            "grid_met": r.grid_met,
            "provenance": r.provenance,
        }
        out.append((fig.value, fig.states, fig.reference, f"block {f.layer}", fig.position, f.ci95, details))
    return out


#: Audit family -> how it reads one audited state (a list of figures).
FAMILIES: dict[str, Callable[[AuditPlan, Any], list[Figure]]] = {
    "uds": _uds_figures,
    "jaccess": _jaccess_figures,
    "direction": _direction_figures,
}


def items_key(ids: Sequence[Any]) -> list[Any]:
    """The part of a cell key that names an audit's inputs (ids, or token-id lists), as JSON values."""
    return [list(x) if isinstance(x, tuple | list) else x for x in ids]


__all__ = [
    "FAMILIES",
    "REMOVED",
    "AuditMeasurement",
    "AuditNotRun",
    "AuditPlan",
    "Figure",
    "items_key",
]
