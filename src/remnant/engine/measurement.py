"""The Measurement contract: one registered component that turns a model state into typed records.

How to add a measurement kind or a component: docs/extending.md.

Every number remnant records comes from a :class:`Measurement`: an attack on the probe set, a utility metric,
the relearning curve at one budget, a Class D risk under one method, a field metric (TOFU, MUSE, MIA) or a
white-box audit. A measurement declares

- ``kind`` (what it is: ``attack``, ``utility``, ``relearning``, ``classd``, ``metric``, ``audit``,
  ``not_applicable``) and ``surface`` (where its rates count: :data:`remnant.standard.vocabulary.SURFACES`);
- ``roles``: the model states it runs on — the post-removal model and the never-modified control with identical
  inputs (R3, C-Q4, C-W5), the pre-removal model where it is needed (C-Q3, R2), or none for a status record;
- :meth:`key_inputs`: everything besides the state that determines its numbers (component name, version and
  every parameter, item ids, seeds, prompt format, scoring settings). The cell key is the hash of these and the
  state's role and weights digest (:func:`cell_key_of`), so identical inputs give identical keys: ``--resume``
  skips a finished cell, and a cell computed for one assessment is reused by another (the demo's control);
- :meth:`measure`: the records of one state — observations per item, then cell records (R6, R19, R22).

:func:`run_measurement` is the one cell runner every kind goes through (:class:`remnant.engine.runner.CellRunner`:
cache, resume, progress, one record store). A measurement that raises is recorded as a *failed* cell when its
kind says a failure is an outcome (an attack that crashes blocks *removed*, D-5.1), never a crashed run.

Adding a measurement kind is one module with a :class:`Measurement` subclass; the contract tests
(``tests/contract/``) run every registered component of every kind through it on the tiny model.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from remnant.engine.cell import CellTarget, status_record
from remnant.records import CellRecord, Observation, Reading, cell_key

#: What a cell writes: observations and cell records, or (a white-box audit, C-H6) readings.
Record = Observation | CellRecord | Reading


class Measurement(ABC):
    """One registered measurement (module docstring). Subclasses set the class attributes and implement
    :meth:`key_inputs` and :meth:`measure`; instances are immutable once built."""

    #: What the measurement is (module docstring).
    kind: ClassVar[str] = ""
    #: Whether an exception in :meth:`measure` is recorded as a *failed* cell (True) or propagates (False).
    failure_is_outcome: ClassVar[bool] = False

    #: The name its records carry in ``attack`` (an attack slot, ``relearning``, a Class D measurement name...).
    name: str
    #: The surface its records carry (relearning, inference_time, weight_transform, latent, utility, baseline).
    surface: str

    def roles(self) -> tuple[str, ...]:
        """The states it runs on, in order (the post-removal model first, then the control: R3)."""
        return ("post_removal", "control")

    @abstractmethod
    def key_inputs(self) -> dict[str, Any]:
        """Everything besides the state that determines its numbers, as JSON values (hashed into the key)."""

    @abstractmethod
    def measure(self, state: Any, target: CellTarget) -> list[Record]:
        """The records of one state: observations, then cell records (all carrying ``target``'s fields)."""

    def label(self, role: str) -> str:
        """How progress lines name the cell."""
        return f"{self.name} on {role}"

    def failed(self, target: CellTarget, exc: BaseException, elapsed: float) -> list[Record]:
        """The records of a cell whose measurement raised (only when :attr:`failure_is_outcome`)."""
        return [
            status_record(target, status="failed", reason=f"{type(exc).__name__}: {exc}", elapsed=elapsed)
        ]


def cell_key_of(measurement: Measurement, state: Any | None) -> str:
    """The cell key of ``measurement`` on ``state`` (None for a measurement that reads no state)."""
    where: dict[str, Any] = {} if state is None else {"state": state.role, "weights": state.digest}
    return cell_key(kind=measurement.kind, **where, **measurement.key_inputs())


@dataclass(frozen=True)
class StateView:
    """The parts of a loaded state a cell key needs (its role and weights digest)."""

    role: str
    digest: str


def run_measurement(
    runner: Any, measurement: Measurement, state: Any | None, *, role: str | None = None
) -> list[CellRecord]:
    """Run ``measurement`` on ``state`` through ``runner`` (a :class:`remnant.engine.runner.CellRunner`): its
    cell records, from this run, the shared cache, or computed now."""
    key = cell_key_of(measurement, state)
    where = role or (state.role if state is not None else "post_removal")
    target = CellTarget(runner.run_id, key, where, measurement.name, measurement.surface)

    def compute() -> list[Record]:
        start = time.perf_counter()
        if not measurement.failure_is_outcome:
            return measurement.measure(state, target)
        try:
            return measurement.measure(state, target)
        except (KeyboardInterrupt, MemoryError):
            raise
        except Exception as exc:  # recorded as a failed cell (blocks removed), not a crashed run
            return measurement.failed(target, exc, time.perf_counter() - start)

    records: list[CellRecord] = runner.run(key, measurement.label(where), compute)
    return records


def run_on_states(
    runner: Any, measurement: Measurement, states: dict[str, Any], *, roles: Sequence[str] | None = None
) -> dict[str, list[CellRecord]]:
    """Run ``measurement`` on each of its roles' states (or ``roles``), identically (R3, C-Q4, C-W5)."""
    return {
        role: run_measurement(runner, measurement, states[role]) for role in (roles or measurement.roles())
    }


#: A factory the contract tests call to build one instance of a registered measurement kind on the tiny model.
SmokeFactory = Callable[[Any], list[Measurement]]


__all__ = [
    "Measurement",
    "Record",
    "SmokeFactory",
    "StateView",
    "cell_key_of",
    "run_measurement",
    "run_on_states",
]
