"""The Measurement contract: one registered component that turns a model state into typed records.

A :class:`Measurement` declares its ``kind`` and ``surface`` (:data:`remnant.standard.vocabulary.SURFACES`), the
``roles`` it runs on — the post-removal model and the never-modified control with identical inputs (R3, C-Q4,
C-W5), the pre-removal model where needed (C-Q3, R2), or none for a status record — and :meth:`key_inputs`,
everything besides the state that determines its numbers. The cell key hashes these with the state's role and
weights digest (:func:`cell_key_of`), so identical inputs give identical keys: ``--resume`` skips a finished cell
and one assessment reuses another's (the demo's control). :meth:`measure` returns one state's observations, then
its cell records (R6, R19, R22).

:func:`run_measurement` runs every kind through the one cell runner. A measurement whose kind says a failure is an
outcome is recorded as a *failed* cell when it raises (a crashing attack blocks *removed*, D-5.1), never a crashed
run; a cell that reads no model and only says why it did not run is a :class:`NotRun`. How to add a kind or a
component: docs/extending.md.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from remnant.engine.cell import CellFields, CellTarget, status_record
from remnant.engine.runner import CellRunner, Record
from remnant.records import CellRecord, cell_key
from remnant.standard.vocabulary import Status


class StateKey(Protocol):
    """What a cell key reads of a state: its role and weights digest (R23: same weights and inputs, same key)."""

    @property
    def role(self) -> str: ...

    @property
    def digest(self) -> str: ...


class ModelLike(Protocol):
    """A loaded model and its tokenizer (a :class:`remnant.models.load.ModelState` is one)."""

    @property
    def model(self) -> Any: ...

    @property
    def tokenizer(self) -> Any: ...


class State(StateKey, ModelLike, Protocol):
    """A model state as measurements read it: an assessment's ``LoadedState``, a sweep's perturbed model, a
    contract test's tiny model (:class:`StateView` builds one)."""


@dataclass(frozen=True)
class StateView:
    """A state by its role and weights digest, with its model and tokenizer when it has them (a sweep's
    perturbed state; a planner computing keys before any model is loaded leaves them None)."""

    role: str
    digest: str
    model: Any = None
    tokenizer: Any = None


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
    def key_inputs(self) -> dict[str, object]:
        """Everything besides the state that determines its numbers, as JSON values (hashed into the key)."""

    @abstractmethod
    def measure(self, state: State | None, target: CellTarget) -> list[Record]:
        """The records of one state: observations, then cell records (all carrying ``target``'s fields)."""

    def label(self, role: str) -> str:
        """How progress lines name the cell."""
        return f"{self.name} on {role}"

    def failed(self, target: CellTarget, exc: BaseException, elapsed: float) -> list[Record]:
        """The records of a cell whose measurement raised (only when :attr:`failure_is_outcome`)."""
        return [
            status_record(target, status="failed", reason=f"{type(exc).__name__}: {exc}", elapsed=elapsed)
        ]


def loaded(state: State | None, measurement: Measurement) -> State:
    """``state``, which ``measurement`` reads (only a :class:`NotRun` runs on no state)."""
    if state is None:
        raise TypeError(f"{measurement.label('post_removal')} reads a model state; none was given")
    return state


def component_spec(component: object) -> dict[str, object] | None:
    """A registered component's name, version and every parameter (R23); None for one built unregistered."""
    spec = getattr(component, "spec", None)
    return spec.to_dict() if spec is not None else None


def cell_key_of(measurement: Measurement, state: StateKey | None) -> str:
    """The cell key of ``measurement`` on ``state`` (None for a measurement that reads no state)."""
    where: dict[str, object] = {} if state is None else {"state": state.role, "weights": state.digest}
    return cell_key(kind=measurement.kind, **where, **measurement.key_inputs())


def run_measurement(
    runner: CellRunner,
    measurement: Measurement,
    state: State | None,
    *,
    role: str | None = None,
    planned: str | None = None,
) -> list[CellRecord]:
    """Run ``measurement`` on ``state`` through ``runner``: its cell records, from this run, the shared cache, or
    computed now. ``planned`` is the key a planner computed for this cell before any model was loaded (a sweep's
    driver): a different key here is a bug that would break resume (R23), refused before anything runs."""
    key = cell_key_of(measurement, state)
    where = role or (state.role if state is not None else "post_removal")
    if planned is not None and key != planned:
        raise AssertionError(
            f"cell {measurement.label(where)}: key {key[:12]} is not the planned {planned[:12]}"
        )
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

    return runner.run(key, measurement.label(where), compute)


def run_on_states(
    runner: CellRunner, measurement: Measurement, states: Mapping[str, State]
) -> dict[str, list[CellRecord]]:
    """Run ``measurement`` on each of its roles' states, identically (R3, C-Q4, C-W5); one that reads no state (a
    :class:`NotRun`) once, under the post-removal model."""
    if not measurement.roles():
        return {"post_removal": run_measurement(runner, measurement, None)}
    return {role: run_measurement(runner, measurement, states[role]) for role in measurement.roles()}


class NotRun(Measurement):
    """The one cell that reads no model state and records why it did not run: a declared attack that does not
    apply or is disabled (C-Q2), relearning with fewer examples than every budget (C-W1), a battery measurement
    undefined for a risk's format, a white-box audit whose state could not be built (C-H7c).

    ``key`` is every input its cell key hashes besides ``kind`` (the reason among them, so a changed reason is a
    new cell). It writes one status record per ``(record name, typed fields)`` of ``records`` (default: one under
    ``name``); a kind whose not-run record is no cell record (an audit's reading, C-H6) overrides :meth:`measure`.
    Run it with ``run_measurement(runner, m, None)``; ``role=`` names the state it stands for.
    """

    def __init__(
        self,
        kind: str,
        name: str,
        surface: str,
        status: Status,
        reason: str,
        key: Mapping[str, object],
        *,
        label: str | None = None,
        records: Sequence[tuple[str, CellFields]] = (),
    ) -> None:
        self.kind = kind  # type: ignore[misc]  # one class for every kind: an instance attribute is enough
        self.name, self.surface, self.status, self.reason = name, surface, status, reason
        self._key = dict(key)
        self._label = label or f"{name} ({status.replace('_', ' ')})"
        self.records = tuple(records) or ((name, CellFields()),)

    @property
    def names(self) -> tuple[str, ...]:
        """The names its records carry (the battery's relearning measurements, or its own)."""
        return tuple(name for name, _ in self.records)

    def roles(self) -> tuple[str, ...]:
        return ()

    def key_inputs(self) -> dict[str, object]:
        return dict(self._key)

    def label(self, role: str) -> str:
        return self._label

    def measure(self, state: State | None, target: CellTarget) -> list[Record]:
        return [
            status_record(target.retarget(attack=name), status=self.status, reason=self.reason, fields=fields)
            for name, fields in self.records
        ]


__all__ = [
    "Measurement",
    "ModelLike",
    "NotRun",
    "Record",
    "State",
    "StateKey",
    "StateView",
    "cell_key_of",
    "component_spec",
    "loaded",
    "run_measurement",
    "run_on_states",
]
