"""A study's pre-registration: its config frozen with :func:`remnant.prereg.freeze_values` before it runs.

R14 and R15 applied to research (docs/studies.md): the config a study decides with is written to
``OUT/prereg.json`` before the first table is read or the first model is trained — by
``remnant study preregister`` ahead of time, or by the study command itself when the folder has none — and
a later run into the same folder is held to it. A changed field is refused unless ``OUT/deviations.jsonl``
records it (``remnant study deviation``, through :func:`remnant.prereg.record_deviation`, the store
assessments use), and every deviation in force is printed in the study's report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from remnant.prereg import (
    PREREG_FILE,
    Deviation,
    PreRegistration,
    check_values,
    deviations_for_statement,
    freeze_values,
    load_deviations,
    load_prereg,
)
from remnant.studies.config import with_legacy_values


@dataclass(frozen=True)
class Registration:
    """The frozen config a study ran under, the deviations in force, and whether this run froze it."""

    prereg: PreRegistration
    deviations: tuple[Deviation, ...]
    frozen_now: bool

    def to_json(self) -> dict[str, object]:
        """The registration block every study result carries (R14, R15)."""
        return {
            "digest": self.prereg.digest,
            "registered_at": self.prereg.registered_at,
            "frozen_by_this_run": self.frozen_now,
            "deviations": deviations_for_statement(self.deviations),
        }


def register(config: Any, out: str | Path) -> Registration:
    """Freeze ``config`` (its whole config as JSON) into ``out/prereg.json`` or, when one is there, hold
    ``config`` to it (R14, R15).

    Raises PreregError when a field differs from the frozen value without a recorded deviation.
    """
    folder = Path(out)
    values: dict[str, object] = config.model_dump(mode="json")
    if not (folder / PREREG_FILE).is_file():
        prereg = freeze_values(values, folder)
        return Registration(prereg, (), frozen_now=True)
    prereg = load_prereg(folder)
    # a config frozen before a field existed declared that field's old value (config.LEGACY_VALUES)
    frozen = with_legacy_values(str(prereg.values.get("study")), prereg.values)
    prereg = prereg.model_copy(update={"values": frozen})
    used = check_values(values, prereg, load_deviations(folder), where=f"study {values.get('study')} config")
    return Registration(prereg, tuple(used), frozen_now=False)


__all__ = ["Registration", "register"]
