"""What ``remnant validate`` reports: one :class:`Violation` per broken requirement, in a :class:`ValidationReport`.

Every check module of the validator (:mod:`remnant.statement.validate`, :mod:`remnant.statement.agreement`)
returns violations of this one type, and compares reported figures with :func:`close`.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

#: How far a reported figure may sit from the one recomputed from its counts (JSON round-trips floats exactly;
#: this only absorbs a writer that rounded to six places).
TOL = 1e-6


class Violation(BaseModel):
    """One broken requirement."""

    model_config = ConfigDict(extra="forbid")

    requirement: str = Field(description="Requirement id (e.g. V5) or 'schema'.")
    message: str = Field(description="What is wrong, naming the field.")


class ValidationReport(BaseModel):
    """The validator's answer: conformant when there are no violations."""

    model_config = ConfigDict(extra="forbid")

    conformant: bool = Field(description="True when no violation was found.")
    violations: list[Violation] = Field(default_factory=list, description="Every violation found.")


def violation(requirement: str, message: str) -> Violation:
    """A :class:`Violation` of ``requirement`` (the checks' shorthand)."""
    return Violation(requirement=requirement, message=message)


def close(a: float | None, b: float | None) -> bool:
    """Both given and equal within :data:`TOL`."""
    return a is not None and b is not None and math.isclose(a, b, abs_tol=TOL)


def same(a: object, b: object) -> bool:
    """Equal figures: both None, equal numbers within :data:`TOL`, equal pairs, or otherwise ==."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return close(float(a), float(b))
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def show(value: object) -> str:
    """A figure as a message quotes it."""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, tuple | list):
        return "[" + ", ".join(show(v) for v in value) + "]"
    return repr(value) if isinstance(value, str) else str(value)


__all__ = ["TOL", "ValidationReport", "Violation", "close", "same", "show", "violation"]
