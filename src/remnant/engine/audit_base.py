"""The typed base of every white-box audit: its family, the reference states it reads, one ``read`` (C-H6, C-H7).

An audit is registered as kind ``audit`` and subclasses :class:`Audit`. Its class declares

- ``family``: how it reads a state, which decides what inputs a caller builds for it — ``"uds"`` (entity-span
  patching: examples), ``"jaccess"`` (probes through a lens: probes, calibration probes, lens prompts) or
  ``"direction"`` (Annex B.3: forget-domain prompts);
- ``references``: the reference states it compares the audited state with (C-H7b), from :data:`REFERENCES` —
  ``full`` (the model with the target), ``retain`` (a model that never saw it) and ``control`` (the
  never-modified control);

and implements :meth:`Audit.read`, which turns one audited state into figures. The one
:class:`remnant.engine.audit.AuditMeasurement` calls it in an assessment and in a sweep alike; routing reads these
declarations, never the audit's name. Pure: no torch at import (the audits import theirs inside ``read``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar, cast

if TYPE_CHECKING:
    from remnant.engine.measurement import State
    from remnant.registry import ComponentSpec

#: One figure: (value, states compared, reference, layer, position, interval, details).
Figure = tuple[float | None, list[str], str, str, str, tuple[float, float] | None, dict[str, Any]]

#: The reference states an audit may declare (C-H7b): the model with the target, a model that never saw it, the
#: never-modified control.
REFERENCES = ("full", "retain", "control")

T = TypeVar("T")


class Keep(Protocol):
    """``keep(key, make)``: ``make()``'s value, made once per key for as long as the keeper lives (an audit plan, or
    a sweep worker's cache). What an audit reuses between audited states: work that reads only its references."""

    def __call__(self, key: Hashable, make: Callable[[], T], /) -> T: ...


@dataclass(frozen=True, eq=False)
class Keeper:
    """A :class:`Keep` in memory, for the life of the object that holds it (an assessment's audit plan)."""

    _kept: dict[Hashable, object] = field(default_factory=dict)

    def __call__(self, key: Hashable, make: Callable[[], T], /) -> T:
        if key not in self._kept:
            self._kept[key] = make()
        return cast(T, self._kept[key])  # stored by a make() under the same key


@dataclass(frozen=True)
class AuditInputs:
    """What ``read`` takes besides the audited state and its references, identical on every audited state (C-H7c).

    ``data`` holds the family's inputs (``examples``; ``probes``, ``calibration``, ``lens_prompts``, ``decoys``;
    ``prompts``), ``labels`` how figures name the references (:class:`remnant.latent.block.Anchors`) and ``role``
    the role the readings carry (``removed`` or an Annex B control, C-H7c).
    """

    data: Mapping[str, Any]
    labels: Any
    role: str
    tokenizer: Any = None
    cache_dir: Path | None = None
    keep: Keep = field(default_factory=Keeper, compare=False, repr=False)


def blank_fields(labels: Any, state: str) -> tuple[list[str], str, str, str]:
    """The C-H7(b) fields of a reading with no figure: what the audit compared (or would have), read nowhere."""
    states = [state, labels.full or "full", labels.retain or "reference"]
    return states, f"{labels.retain or 'reference'} (never saw the target){labels.note}", "—", "—"


class Audit:
    """A registered white-box audit: supplementary, never adjudicating (C-H6); see the module docstring."""

    family: ClassVar[str]
    references: ClassVar[tuple[str, ...]] = ()
    surface: ClassVar[str] = "latent"
    adjudicating: ClassVar[bool] = False
    #: Set by ``@register`` (the registered name names the audit in a figure's note).
    registry_name: ClassVar[str]
    #: Set by ``registry.create``: the name, version and every parameter its readings record (R23).
    spec: ComponentSpec

    def read(self, state: State, references: Mapping[str, Any], inputs: AuditInputs) -> list[Figure]:
        """The figures of ``state`` (``.model``, ``.digest``, ``.role``) against ``references`` (each declared
        reference name to a state with ``.model`` and ``.digest``)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement Audit.read (C-H7)")


__all__ = ["REFERENCES", "Audit", "AuditInputs", "Figure", "blank_fields"]
