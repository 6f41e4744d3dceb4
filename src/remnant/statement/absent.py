"""The explicit absent marker of K6: a required element that is missing is present as ``{"absent": true, ...}``."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Absent(BaseModel):
    """A required statement element that could not be supplied, with the reason (K6: marked, never omitted)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    absent: Literal[True] = Field(default=True, description="Always true: this element is absent (K6).")
    reason: str = Field(min_length=1, description="Why the element is absent, in words a reader can check.")


def is_absent(value: object) -> bool:
    """Whether ``value`` is a K6 absent marker (model or its JSON form)."""
    if isinstance(value, Absent):
        return True
    return isinstance(value, dict) and value.get("absent") is True and isinstance(value.get("reason"), str)
