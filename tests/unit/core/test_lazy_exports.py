"""Packages export their names lazily (remnant.lazy), so a command module loads without its whole package (a
light start); what each name means must not change: every name in ``__all__`` is the object its defining module
holds."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

LAZY_PACKAGES = ("remnant.packs", "remnant.formats", "remnant.metrics")


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_export_is_its_modules_object(package: str) -> None:
    module = importlib.import_module(package)
    exported = {name: getattr(module, name) for name in module.__all__}
    assert exported
    for name, value in exported.items():
        home = getattr(value, "__module__", None)
        if home is not None and home.startswith(package + "."):
            assert getattr(importlib.import_module(home), name) is value, f"{package}.{name}"
    with pytest.raises(AttributeError, match="no attribute 'not_an_export'"):
        module.not_an_export  # noqa: B018


def test_metric_handlers_register_through_the_registry() -> None:
    """The metrics package no longer registers on import; the registry imports its handlers module (R23)."""
    code = (
        "import sys, remnant.metrics\n"
        "assert 'remnant.metrics.privacy' not in sys.modules and 'scipy' not in sys.modules\n"
        "from remnant import registry\n"
        "print(sorted(registry.names('metric'))[:0], 'ks_test' in registry.names('metric'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["[]", "True"]
