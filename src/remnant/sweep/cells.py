"""The cells of a pool: every model × perturbation × suite measurement, with its engine cell key (pure).

The driver and the workers compute keys with the same functions, so the driver knows before anything runs which
cells the record store already holds (a rerun skips them: only the cells in flight when a driver or a worker
was killed are run again), and a worker skips the cells the driver says are done. A perturbed state's digest is
derived from its model's state digest and the perturbation's declared settings (:func:`perturbed_digest`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from remnant.engine.measurement import Measurement, StateView, cell_key_of
from remnant.states.perturb import NF4_SETTINGS
from remnant.states.recipe import perturbed_state
from remnant.sweep.pool import Pool, PoolModel
from remnant.sweep.suite import PoolMeasurement

if TYPE_CHECKING:
    from remnant.sweep.spec import ExistingSpec, GeneratedSpec

NONE, NF4, RELEARN = "none", "nf4", "relearn"


def perturbations(spec: GeneratedSpec | ExistingSpec) -> list[str]:
    """``none``, then NF4 and relearning when the spec declares them."""
    out = [NONE]
    if spec.perturbations.nf4:
        out.append(NF4)
    if spec.perturbations.relearn.enabled:
        out.append(RELEARN)
    return out


def perturbed_digest(
    spec: GeneratedSpec | ExistingSpec, model: PoolModel, perturbation: str, pack_digest: str
) -> str:
    """The state digest of ``model`` under ``perturbation`` (its own for ``none``)."""
    if perturbation == NONE:
        return model.state
    if perturbation == NF4:
        return perturbed_state(model.state, NF4_SETTINGS)
    relearn = spec.perturbations.relearn.model_dump(mode="json", exclude={"enabled"})
    data = {"pack": pack_digest, "attributes": spec.pack.attributes, "system_prompt": spec.pack.system_prompt}
    return perturbed_state(model.state, {"relearn": relearn, **data})


@dataclass(frozen=True)
class PlannedCell:
    """One cell: its key, model, perturbation and suite entry."""

    key: str
    model: str
    perturbation: str
    entry: str


def model_cells(
    spec: GeneratedSpec | ExistingSpec,
    model: PoolModel,
    measurements: list[tuple[str, Measurement]],
    pack_digest: str,
) -> list[tuple[PlannedCell, PoolMeasurement]]:
    """Every cell of one model, in run order (perturbation, then suite order)."""
    out: list[tuple[PlannedCell, PoolMeasurement]] = []
    for perturbation in perturbations(spec):
        view = StateView(role=perturbation, digest=perturbed_digest(spec, model, perturbation, pack_digest))
        for entry, inner in measurements:
            pm = PoolMeasurement(entry, inner, model.id, perturbation)
            out.append((PlannedCell(cell_key_of(pm, view), model.id, perturbation, entry), pm))
    return out


def plan_cells(
    spec: GeneratedSpec | ExistingSpec,
    pool: Pool,
    measurements: list[tuple[str, Measurement]],
    pack_digest: str,
) -> list[PlannedCell]:
    """Every cell of the pool, models in pool order; a key shared by two cells is a bug, refused."""
    cells = [c for m in pool.models for c, _ in model_cells(spec, m, measurements, pack_digest)]
    keys = [c.key for c in cells]
    if len(set(keys)) != len(keys):
        raise AssertionError("two cells of one pool share a key")
    return cells


def reference_states(pool: Pool) -> dict[str, str]:
    """The audits' references as state digests (what the audit's key hashes)."""
    return {role: pool.model(model_id).state for role, model_id in sorted(pool.references.items())}


__all__ = [
    "NF4",
    "NONE",
    "RELEARN",
    "PlannedCell",
    "model_cells",
    "perturbations",
    "perturbed_digest",
    "plan_cells",
    "reference_states",
]
