"""Registries of components: attacks, removal methods, metrics, scorers, audits.

A component is a class that subclasses its kind's base (:data:`KIND_BASES`), decorated with
``@register(kind, name, version)``, in a module its kind's package (:data:`KIND_PACKAGES`) imports; kinds whose
modules import torch are imported only when asked for. :func:`create` binds its parameters, fills in every default
and attaches a :class:`ComponentSpec`, so a statement names exactly what ran and the component can be rebuilt from
it (K4, R23, R24). A built-in module that fails to import is an error, never skipped; the contract tests iterate
over :func:`names`.

Another distribution adds components through entry points in the groups of :data:`PLUGIN_GROUPS`, each naming a
module (or a class in one) whose import runs ``@register``; they load the first time their kind is asked for,
after the built-ins, so :func:`names` covers them too. A plugin whose import fails, or which registers nothing of
its group's kind, is one :class:`PluginWarning` and is listed as broken by :func:`plugins`: never a crash, never a
silent skip (K4, R23).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import json
import warnings
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
    "metric": "remnant.metrics.handlers",
}


#: The base every registered class of a kind subclasses, as ``module:qualname``. Checked by name along the class's
#: MRO, so registering imports no base module (the attack and method bases import torch; K4).
KIND_BASES: dict[str, str] = {
    "metric": "remnant.metrics.base:Metric",
    "audit": "remnant.engine.audit_base:Audit",
    "attack": "remnant.attacks.base:Attack",
    "method": "remnant.train.methods.base:RemovalMethod",
}


def _check_base(kind: str, name: str, cls: type[object]) -> None:
    base = KIND_BASES.get(kind)
    if base is None or base in {f"{c.__module__}:{c.__qualname__}" for c in cls.__mro__}:
        return
    raise TypeError(
        f"{kind} {name!r}: class {cls.__module__}.{cls.__qualname__} does not subclass {base}, the base of "
        f"kind {kind!r} (K4, R23)"
    )


@dataclass(frozen=True)
class ComponentSpec:
    """What a statement or manifest records about one component: enough to rebuild it."""

    kind: str
    name: str
    version: str
    params: Mapping[str, object] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
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
    target: type[object]


_ENTRIES: dict[tuple[str, str], _Entry] = {}


def register(kind: str, name: str, version: str) -> Callable[[type[T]], type[T]]:
    """Class decorator: make ``cls`` available as ``(kind, name)`` at ``version``.

    The class gains ``registry_kind``, ``registry_name`` and ``registry_version`` attributes. A class that does not
    subclass its kind's base (:data:`KIND_BASES`) is a TypeError; so is a different class under a taken name (two
    modules claiming one name is a bug, not an override).
    """

    def decorate(cls: type[T]) -> type[T]:
        _check_base(kind, name, cls)
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


#: The entry-point group through which another distribution adds components of a kind.
PLUGIN_GROUPS: dict[str, str] = {
    "method": "remnant.methods",
    "attack": "remnant.attacks",
    "metric": "remnant.metrics",
    "audit": "remnant.audits",
}


class PluginWarning(UserWarning):
    """A plugin that could not be loaded, or registered nothing of its group's kind (K4)."""


@dataclass(frozen=True)
class Plugin:
    """One entry point of a plugin group, loaded: the components it registered, or why it is broken."""

    kind: str
    group: str
    entry_point: str  # "name = module:attr"
    distribution: str
    version: str
    names: tuple[str, ...] = ()
    error: str | None = None


_PLUGINS: dict[str, tuple[Plugin, ...]] = {}


def _distribution(ep: importlib.metadata.EntryPoint) -> tuple[str, str]:
    dist = ep.dist
    if dist is None:  # an entry point built by hand, not read from an installed distribution
        return ep.module, "?"
    return dist.name, dist.version


def _built_in(target: type[object]) -> bool:
    return target.__module__.split(".")[0] == "remnant"


def _registered_by(loaded: object) -> list[tuple[str, str]]:
    """``(kind, name)`` of the registered class ``loaded``, or of the registered classes a module defines."""
    if isinstance(loaded, type):
        candidates: list[Any] = [loaded]
    else:
        home = getattr(loaded, "__name__", None)
        members = getattr(loaded, "__dict__", {}).values()
        candidates = [c for c in members if isinstance(c, type) and c.__module__ == home]
    return [(str(c.registry_kind), str(c.registry_name)) for c in candidates if hasattr(c, "registry_kind")]


def _load_plugin(kind: str, group: str, ep: importlib.metadata.EntryPoint) -> Plugin:
    dist, dist_version = _distribution(ep)
    where = f"{ep.name} = {ep.value}"
    before = set(_ENTRIES)
    error: str | None = None
    try:
        loaded = ep.load()
    except Exception as exc:  # a plugin's failure is its own: one warning, never a crash (K4)
        return Plugin(
            kind, group, where, dist, dist_version, error=f"import failed: {type(exc).__name__}: {exc}"
        )
    # remnant's own modules that the plugin imports register built-ins as a side effect: those are not its own
    added = [key for key in _ENTRIES if key not in before and not _built_in(_ENTRIES[key].target)]
    # a module imported before (by the user, or an earlier load) registered its classes then: count them too
    added += [key for key in _registered_by(loaded) if key not in added and key in _ENTRIES]
    wrong = sorted(f"{k} {n!r}" for k, n in added if k != kind)
    mine = tuple(sorted(n for k, n in added if k == kind))
    if wrong:
        error = f"registered {', '.join(wrong)} in group {group}, which takes {kind}s only"
    elif not mine:
        error = f"registered no {kind} (its module has no @register('{kind}', ...) class)"
    if error is not None:  # a broken plugin contributes nothing, not half of what it meant to
        for key in added:
            _ENTRIES.pop(key, None)
        mine = ()
    return Plugin(kind, group, where, dist, dist_version, names=mine, error=error)


def plugins(kind: str) -> tuple[Plugin, ...]:
    """Every entry point of ``kind``'s plugin group, loaded once (broken ones warned about once, kept listed)."""
    group = PLUGIN_GROUPS.get(kind)
    if group is None:
        return ()
    if kind not in _PLUGINS:
        _PLUGINS[kind] = ()  # set first: a plugin that asks for its own kind while loading does not recurse
        found = tuple(_load_plugin(kind, group, ep) for ep in importlib.metadata.entry_points(group=group))
        _PLUGINS[kind] = found
        for plugin in found:
            if plugin.error is not None:
                warnings.warn(
                    f"remnant plugin {plugin.distribution!r} (entry point '{plugin.entry_point}' in group "
                    f"{plugin.group}) is not used: {plugin.error}",
                    PluginWarning,
                    stacklevel=2,
                )
    return _PLUGINS[kind]


def _ensure_loaded(kind: str) -> None:
    package = KIND_PACKAGES.get(kind)
    if package is not None:
        importlib.import_module(package)
    plugins(kind)  # after the built-ins: a plugin reusing a built-in's name is refused, not the built-in


def registered_now(kind: str) -> dict[str, str]:
    """``{name: version}`` of what is registered of ``kind`` so far, importing nothing (``remnant list``)."""
    return {name: e.version for (k, name), e in sorted(_ENTRIES.items()) if k == kind}


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


def defaults(kind: str, name: str) -> dict[str, object]:
    """Every constructor parameter of ``(kind, name)`` with its default (``None``-free required ones omitted)."""
    cls = get(kind, name)
    out: dict[str, object] = {}
    for pname, param in inspect.signature(cls.__init__).parameters.items():
        if pname == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.default is not inspect.Parameter.empty:
            out[pname] = param.default
    return out


def bind(kind: str, name: str, params: Mapping[str, object] | None = None) -> ComponentSpec:
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


def create(kind: str, name: str, params: Mapping[str, object] | None = None) -> Any:
    """Instantiate ``(kind, name)`` with ``params``; the instance carries its :class:`ComponentSpec` as ``.spec``."""
    spec = bind(kind, name, params)
    instance = get(kind, name)(**spec.params)
    instance.spec = spec
    return instance


def jsonable(value: object) -> object:
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
    "KIND_BASES",
    "KIND_PACKAGES",
    "PLUGIN_GROUPS",
    "ComponentSpec",
    "Plugin",
    "PluginWarning",
    "bind",
    "create",
    "defaults",
    "get",
    "jsonable",
    "names",
    "plugins",
    "register",
    "registered_now",
    "version",
]
