"""Package exports imported on first use (PEP 562), so importing one small module of a package does not load
the whole package.

A package ``__init__`` lists its exports under ``if TYPE_CHECKING:`` (what mypy and readers see) and sets
``__getattr__ = lazy_exports(__name__, {name: submodule})``. A command module then imports its package without
the rest of it, and ``remnant --help``, ``validate``, ``verify`` and ``verdict`` start without scipy, pandas,
pyarrow, matplotlib or torch (a light start; docs/extending.md).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
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


__all__ = ["lazy_exports"]
