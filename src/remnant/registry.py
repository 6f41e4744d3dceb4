"""Registries of components: attacks, removal methods, metrics, scorers, audits.

A component is registered with ``@register(kind, name, version)``. Creating it through :func:`create` binds its
parameters against its constructor, fills in every default, and attaches a :class:`ComponentSpec` — so a
statement names exactly what ran (name, version, every parameter) and the component can be rebuilt from it
(the Inspect AI idea; K4, R23, R24).

Kinds whose modules import torch are not imported until asked for: :data:`KIND_PACKAGES` maps each kind to the
package whose import registers all of its built-in members, and :func:`names` / :func:`get` import it on demand.
A new attack or method is one module plus its ``@register`` line and an import in that package's ``__init__``;
the contract tests iterate over :func:`names` and so cover it without further work.
"""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from remnant.errors import ConfigError

T = TypeVar("T")

#: The package whose import registers every built-in component of a kind.
KIND_PACKAGES: dict[str, str] = {
    "attack": "remnant.attacks",
    "method": "remnant.train.methods",
    "utility": "remnant.score.utility",
    "scorer": "remnant.score",
    "audit": "remnant.latent",
    "classd": "remnant.classd",
    "metric": "remnant.metrics",
}


@dataclass(frozen=True)
class ComponentSpec:
    """What a statement or manifest records about one component: enough to rebuild it."""

    kind: str
    name: str
    version: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "version": self.version,
            "params": jsonable(self.params),
        }


@dataclass(frozen=True)
class _Entry:
    kind: str
    name: str
    version: str
    target: type[Any]


_ENTRIES: dict[tuple[str, str], _Entry] = {}


def register(kind: str, name: str, version: str) -> Callable[[type[T]], type[T]]:
    """Class decorator: make ``cls`` available as ``(kind, name)`` at ``version``.

    The class gains ``registry_kind``, ``registry_name`` and ``registry_version`` attributes. Registering a
    different class under a taken name is an error (two modules claiming one name is a bug, not an override).
    """

    def decorate(cls: type[T]) -> type[T]:
        key = (kind, name)
        existing = _ENTRIES.get(key)
        if existing is not None and existing.target.__qualname__ != cls.__qualname__:
            raise ValueError(f"{kind} {name!r} is already registered by {existing.target.__module__}")
        cls.registry_kind = kind  # type: ignore[attr-defined]
        cls.registry_name = name  # type: ignore[attr-defined]
        cls.registry_version = version  # type: ignore[attr-defined]
        _ENTRIES[key] = _Entry(kind, name, version, cls)
        return cls

    return decorate


def _ensure_loaded(kind: str) -> None:
    package = KIND_PACKAGES.get(kind)
    if package is not None:
        importlib.import_module(package)


def names(kind: str) -> list[str]:
    """Sorted names of every registered component of ``kind`` (importing its package first)."""
    _ensure_loaded(kind)
    return sorted(name for (k, name) in _ENTRIES if k == kind)


def get(kind: str, name: str) -> type[Any]:
    """The registered class for ``(kind, name)``; a clear :class:`ConfigError` listing the choices otherwise."""
    _ensure_loaded(kind)
    entry = _ENTRIES.get((kind, name))
    if entry is None:
        choices = ", ".join(names(kind)) or "none registered"
        raise ConfigError(f"unknown {kind} {name!r}; registered: {choices}")
    return entry.target


def version(kind: str, name: str) -> str:
    """The registered version of ``(kind, name)``."""
    get(kind, name)
    return _ENTRIES[(kind, name)].version


def defaults(kind: str, name: str) -> dict[str, Any]:
    """Every constructor parameter of ``(kind, name)`` with its default (``None``-free required ones omitted)."""
    cls = get(kind, name)
    out: dict[str, Any] = {}
    for pname, param in inspect.signature(cls.__init__).parameters.items():
        if pname == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.default is not inspect.Parameter.empty:
            out[pname] = param.default
    return out


def bind(kind: str, name: str, params: Mapping[str, Any] | None = None) -> ComponentSpec:
    """Validate ``params`` against the constructor of ``(kind, name)`` and fill in every default.

    Unknown parameter names are refused (a misspelt budget must not silently fall back to a default).
    """
    cls = get(kind, name)
    given = dict(params or {})
    signature = inspect.signature(cls.__init__)
    try:
        bound = signature.bind(None, **given)
    except TypeError as exc:
        accepted = ", ".join(p for p in signature.parameters if p != "self")
        raise ConfigError(f"{kind} {name!r}: {exc}; accepted parameters: {accepted}") from exc
    bound.apply_defaults()
    resolved = {k: v for k, v in bound.arguments.items() if k != "self"}
    return ComponentSpec(kind=kind, name=name, version=_ENTRIES[(kind, name)].version, params=resolved)


def create(kind: str, name: str, params: Mapping[str, Any] | None = None) -> Any:
    """Instantiate ``(kind, name)`` with ``params``; the instance carries its :class:`ComponentSpec` as ``.spec``."""
    spec = bind(kind, name, params)
    instance = get(kind, name)(**spec.params)
    instance.spec = spec
    return instance


def jsonable(value: Any) -> Any:
    """Parameters as JSON-ready values (tuples become lists; anything else unknown becomes its repr)."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    try:
        json.dumps(value)
    except TypeError:
        return repr(value)
    return value


__all__ = [
    "KIND_PACKAGES",
    "ComponentSpec",
    "bind",
    "create",
    "defaults",
    "get",
    "jsonable",
    "names",
    "register",
    "version",
]
