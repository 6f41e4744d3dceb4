"""Shared field types, the strict base model and the cross-field error every config section uses (R23, R14).

Every config table is a :class:`ConfigModel`: extra keys are refused and a quoted number in the TOML is a
mistake to report, not a value to coerce. A cross-field rule raises :class:`RuleViolation`, which carries the
dotted field and the requirement id into the :class:`~remnant.errors.ConfigError` the loader raises.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Name = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$")]
Params = dict[str, Any]
Unit = Annotated[float, Field(ge=0.0, le=1.0)]

#: Largest master seed: seeds travel through canonical JSON, which holds integers up to 2**53 (RFC 8785, I-JSON).
MAX_SEED = 2**53 - 1


class RuleViolation(ValueError):
    """A cross-field rule a model validator enforces; carries the dotted field and requirement id."""

    def __init__(self, field: str, message: str, rule: str) -> None:
        super().__init__(f"field '{field}' {message} ({rule})")
        self.field, self.message, self.rule = field, message, rule


class ConfigModel(BaseModel):
    # strict: a quoted number in the TOML is a mistake to report, not a value to coerce.
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, strict=True)


def require_one_of(model: BaseModel, where: str, first: str, second: str, rule: str) -> None:
    """RuleViolation at ``where`` unless exactly one of the fields ``first`` and ``second`` is set."""
    if (getattr(model, first) is None) == (getattr(model, second) is None):
        raise RuleViolation(where, f"must name exactly one of '{first}' or '{second}'", rule)
