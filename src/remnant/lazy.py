"""Package exports imported on first use (PEP 562), so importing one small module of a package does not load
the whole package.

A package ``__init__`` lists its exports under ``if TYPE_CHECKING:`` (what mypy and readers see) and sets
``__getattr__ = lazy_exports(__name__, {name: submodule})``. ``remnant.statement.commands`` then imports
``remnant.statement`` without pydantic's schema models, and ``remnant --help``, ``validate``, ``verify`` and
``verdict`` start without scipy, pandas, pyarrow, matplotlib or torch (a light start; docs/extending.md).
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Collection, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str | tuple[str, str]], *, keep: bool = False
) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for ``package``: ``exports[name]`` is the submodule defining ``name``, or
    ``(submodule, attribute)`` where the export renames what the submodule defines. ``keep`` binds each name
    once resolved, over a same-named submodule its import bound (``remnant.assess``, the function)."""
    table = dict(exports)

    def __getattr__(name: str) -> Any:
        target = table.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        submodule, attribute = (target, name) if isinstance(target, str) else target
        value = getattr(importlib.import_module(f"{package}.{submodule}"), attribute)
        if keep:
            vars(sys.modules[package])[name] = value
        return value

    return __getattr__


class _ExportsOverSubmodules(types.ModuleType):
    """A package whose export shares its name with a submodule (``remnant.statement.absent``, the function, and
    ``remnant/statement/absent.py``): importing the submodule does not replace the export with the module."""

    _exports_over_submodules: frozenset[str] = frozenset()

    def __setattr__(self, name: str, value: object) -> None:
        if name in self._exports_over_submodules and isinstance(value, types.ModuleType):
            return  # the import system binding the submodule: the export (served by __getattr__) stays
        super().__setattr__(name, value)


def exports_over_submodules(package: str, names: Collection[str]) -> None:
    """Keep ``names`` meaning the package's lazy exports after their same-named submodules are imported, as an
    eager ``from .absent import absent`` in ``__init__`` did. ``import package.name`` and ``from package.name
    import X`` still reach the submodule (through ``sys.modules``)."""
    module = sys.modules[package]
    module.__class__ = _ExportsOverSubmodules
    module.__dict__["_exports_over_submodules"] = frozenset(names)
    for name in names:
        if isinstance(module.__dict__.get(name), types.ModuleType):
            del module.__dict__[name]


__all__ = ["exports_over_submodules", "lazy_exports"]
