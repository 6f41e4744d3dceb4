"""Plugins for the tests without pip: a distribution's ``.dist-info`` (METADATA, entry_points.txt) written into a
temporary folder on ``sys.path`` is what ``importlib.metadata.entry_points`` reads for an installed one.

``example_plugin`` puts ``examples/plugin`` (its source folder and a dist-info naming its entry point, as
``pip install -e examples/plugin`` would) on the path, with the registry's tables copied so nothing it registers
outlives the test.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from remnant import registry

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_SRC = ROOT / "examples" / "plugin" / "src"
EXAMPLE_DIST = "remnant-example-plugin"
EXAMPLE_ENTRY = "example_mean_answer_nll = remnant_example_plugin.metric"
#: Top-level modules of the tests' plugins, forgotten after each test so the next one imports (registers) afresh.
PLUGIN_MODULES = (
    "remnant_example_plugin",
    "broken_plugin",
    "wrong_kind_plugin",
    "empty_plugin",
    "clash_plugin",
    "not_a_metric_plugin",
)


def write_dist(site: Path, name: str, version: str, entry_points: Mapping[str, Sequence[str]]) -> Path:
    """A dist-info for ``name`` under ``site`` declaring ``entry_points`` (``{group: ["name = module", ...]}``)."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    text = "".join(
        f"[{group}]\n" + "".join(f"{line}\n" for line in lines) for group, lines in entry_points.items()
    )
    (info / "entry_points.txt").write_text(text)
    return site


def example_site(site: Path) -> Path:
    """``site`` holding the example plugin's dist-info (its code stays in ``EXAMPLE_SRC``)."""
    return write_dist(site, EXAMPLE_DIST, "0.1.0", {"remnant.metrics": [EXAMPLE_ENTRY]})


@pytest.fixture
def isolated_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The registry's tables as copies (plugins loaded afresh) and no plugin module left imported after (the
    built-in metrics, which the plugins here build on, are imported first)."""
    # the built-ins registered before the copy: their modules, once imported, never register again
    for package in registry.KIND_PACKAGES.values():
        importlib.import_module(package)
    before = set(sys.modules)
    monkeypatch.setattr(registry, "_ENTRIES", dict(registry._ENTRIES))
    monkeypatch.setattr(registry, "_PLUGINS", {})
    yield
    for name in set(sys.modules) - before:
        if name.startswith(PLUGIN_MODULES):
            del sys.modules[name]


@pytest.fixture
def example_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_registry: None) -> Path:
    """The example plugin installed for this test; returns the folder to put on PYTHONPATH for a subprocess."""
    site = example_site(tmp_path / "site")
    monkeypatch.syspath_prepend(str(EXAMPLE_SRC))
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    return site
