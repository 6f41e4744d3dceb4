"""The marker remnant writes into every output folder it makes (:data:`remnant.cli_paths.MARKER_FILE`), as a
pydantic model with ``extra="forbid"`` (a serialised boundary: a hostile marker is refused, never half-read, R23).

Its own module so that :mod:`remnant.cli_paths`, which every command module imports, loads pydantic only when a
marker is read or written: ``remnant --help`` starts light.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class OutputMarker(BaseModel):
    """The content of :data:`MARKER_FILE`: which kind of output remnant made the folder as, and which remnant."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    made_by: Literal["remnant"] = "remnant"
    kind: str
    version: str


__all__ = ["OutputMarker"]
