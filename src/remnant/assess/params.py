"""A registered component created from a config table, its parameters checked first (R14, R23).

:func:`remnant.registry.bind` refuses a parameter name the constructor does not take. This module adds the
value: each given parameter must have the type the constructor annotates (``shots = 1.5`` is not an ``int``,
``"16"`` is not a number, ``true`` is not a count), read strictly as JSON would carry it into the frozen
pre-registration; then the constructor's own checks run (``shots >= 1``, ``temperature > 0``...). Ranges of
known parameters were already checked when the config was read (:mod:`remnant.config.numbers`).

Every refusal is one ConfigError naming the config field and its requirement, so ``remnant preregister`` and
``remnant assess`` refuse a bad component before anything is frozen or trained.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any

from remnant.errors import ConfigError


def constructor_types(cls: type[Any]) -> dict[str, object]:
    """Annotated parameter types of ``cls.__init__``, a subclass's overriding its bases' (removal methods take
    their common parameters through ``**common`` from the base class, which annotates them)."""
    hints: dict[str, object] = {}
    for klass in reversed(cls.__mro__):
        init = klass.__dict__.get("__init__")
        if init is None or klass is object:
            continue
        try:
            hints.update(typing.get_type_hints(init))
        except (NameError, TypeError):  # an annotation that cannot be resolved is checked by the constructor
            continue
    hints.pop("return", None)
    return hints


@cache
def _adapter(hint: Any) -> Any:
    from pydantic import PydanticUserError, TypeAdapter

    try:
        return TypeAdapter(hint)
    except (PydanticUserError, NameError, TypeError):  # no validator for this type: left to the constructor
        return None


def type_problem(hint: Any, value: object) -> str | None:
    """Why ``value`` is not a ``hint`` (strict JSON reading: no coercion), or None."""
    from pydantic import ValidationError

    adapter = _adapter(hint)
    if adapter is None:
        return None
    try:
        adapter.validate_json(json.dumps(value, allow_nan=False), strict=True)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ValidationError):
            return str(exc.errors()[0]["msg"])
        return f"not a JSON value ({exc})"
    return None


def check_types(types: Mapping[str, object], params: Mapping[str, object]) -> None:
    """ConfigError at the first parameter whose value is not of its annotated type."""
    for key, value in params.items():
        if key not in types:
            continue
        problem = type_problem(types[key], value)
        if problem is not None:
            shown = json.dumps(value) if isinstance(value, str | int | float | bool) else type(value).__name__
            raise ConfigError(f"parameter {key!r} = {shown}: {problem} (expected {_show(types[key])})")


def _show(hint: Any) -> str:
    return hint.__name__ if type(hint) is type else str(hint).replace("typing.", "")


def create(kind: str, name: str, params: Mapping[str, object], *, field: str, requirement: str) -> Any:
    """``registry.create(kind, name, params)`` after the type check; any refusal names ``field`` (module doc)."""
    from remnant import registry

    try:
        cls = registry.get(kind, name)
        check_types(constructor_types(cls), params)
        return registry.create(kind, name, params)
    except (ConfigError, ValueError) as exc:  # a constructor's own range check may raise ValueError
        raise ConfigError(f"field '{field}': {exc}", requirement=requirement) from None


__all__ = ["check_types", "constructor_types", "create", "type_problem"]
