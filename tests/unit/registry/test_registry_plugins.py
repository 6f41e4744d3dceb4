"""Plugins through entry points (K4, R23): loaded with their kind, listed with their distribution, and a broken one
is one PluginWarning naming its distribution and entry point, never a crash or a silent skip; ``remnant list``
works without torch and shows built-ins from the static index, which must equal the registry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from plugin_fixtures import EXAMPLE_DIST, EXAMPLE_SRC, example_plugin, isolated_registry, write_dist
from remnant import registry
from remnant.builtin_index import BUILTIN_INDEX
from remnant.list_commands import KINDS, listing

__all__ = ["example_plugin", "isolated_registry"]  # fixtures, imported for use here

#: Plugin modules that go wrong in each way the registry must report (module name -> source).
BAD_MODULES = {
    "broken_plugin": "raise ImportError('needs a package that is not installed')\n",
    "wrong_kind_plugin": (
        "from remnant.engine.audit_base import Audit\nfrom remnant.registry import register\n\n\n"
        "@register('audit', 'wrong_kind_audit', '1')\nclass A(Audit):\n    pass\n"
    ),
    "empty_plugin": "X = 1\n",
    # K4: a metric that does not subclass remnant.metrics.base.Metric is refused at its @register line
    "not_a_metric_plugin": (
        "from remnant.registry import register\n\n\n"
        "@register('metric', 'not_a_metric', '1')\nclass M:\n    def compute(self, pre_compute):\n        return None\n"
    ),
}


def _bad_site(tmp_path: Path, module: str) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    (site / f"{module}.py").write_text(BAD_MODULES[module])
    return write_dist(site, f"{module.replace('_', '-')}-dist", "2.0", {"remnant.metrics": [f"m = {module}"]})


def test_example_plugin_is_registered_with_its_distribution(example_plugin: Path) -> None:
    assert "example_mean_answer_nll" in registry.names("metric")
    assert registry.version("metric", "example_mean_answer_nll") == "1"
    (plugin,) = registry.plugins("metric")
    assert (plugin.distribution, plugin.version, plugin.names) == (
        EXAMPLE_DIST,
        "0.1.0",
        ("example_mean_answer_nll",),
    )
    assert plugin.error is None
    rows = {r["name"]: r for r in listing("metric")}
    assert rows["example_mean_answer_nll"]["source"] == f"{EXAMPLE_DIST} 0.1.0"
    assert rows["probability"]["source"] == "built-in"


@pytest.mark.parametrize(
    ("module", "says"),
    [
        ("broken_plugin", "import failed: ImportError: needs a package"),
        ("wrong_kind_plugin", "registered audit 'wrong_kind_audit' in group remnant.metrics"),
        ("empty_plugin", "registered no metric"),
        (
            "not_a_metric_plugin",
            "TypeError: metric 'not_a_metric': class not_a_metric_plugin.M does not subclass "
            "remnant.metrics.base:Metric",
        ),
    ],
)
def test_a_broken_plugin_is_one_warning_naming_it_and_listed_broken(
    module: str, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_registry: None
) -> None:
    monkeypatch.syspath_prepend(str(_bad_site(tmp_path, module)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        names = registry.names("metric")
        registry.names("metric")  # asked again: still one warning
    plugin_warnings = [w for w in caught if issubclass(w.category, registry.PluginWarning)]
    assert len(plugin_warnings) == 1
    message = str(plugin_warnings[0].message)
    dist = f"{module.replace('_', '-')}-dist"
    assert f"'{dist}'" in message and f"'m = {module}'" in message and says in message
    assert "probability" in names and "wrong_kind_audit" not in registry.registered_now("audit")
    (row,) = [r for r in listing("metric") if r["source"] == f"{dist} 2.0"]
    assert row["name"] == "m" and says in row["error"]


def _cli(args: list[str], pythonpath: list[Path]) -> subprocess.CompletedProcess[str]:
    """``remnant ARGS`` in a fresh interpreter where importing torch or transformers fails, as where neither is
    installed (a meta-path blocker: ``sys.modules['torch'] = None`` would break scipy's own torch probe)."""
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('torch', 'transformers'):\n"
        "            raise ModuleNotFoundError(name, name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from remnant.cli import main\n"
        "rc = main(sys.argv[1:])\n"
        "assert 'torch' not in sys.modules\n"
        "sys.exit(rc)\n"
    )
    paths = [str(p) for p in pythonpath] + [os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_list_works_without_torch_and_names_sources(example_plugin: Path) -> None:
    done = _cli(["list", "metrics", "--json"], [example_plugin, EXAMPLE_SRC])
    assert done.returncode == 0, done.stderr
    rows = {r["name"]: (r["version"], r["source"]) for r in json.loads(done.stdout)}
    assert rows["example_mean_answer_nll"] == ("1", f"{EXAMPLE_DIST} 0.1.0")
    assert {n: v for n, (v, s) in rows.items() if s == "built-in"} == BUILTIN_INDEX["metric"]
    text = _cli(["list", "audits"], [])
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert len(lines) == len(BUILTIN_INDEX["audit"])
    assert lines[0].split() == ["direction_survival", "1.0", "built-in"]


def test_builtin_index_equals_the_registry() -> None:
    # the index stands in for importing the torch-heavy packages; regenerate it from this message when it fails
    live = {}
    for kind in KINDS.values():
        plugin_names = {n for p in registry.plugins(kind) for n in p.names}
        live[kind] = {n: registry.version(kind, n) for n in registry.names(kind) if n not in plugin_names}
    assert live == BUILTIN_INDEX, "BUILTIN_INDEX in src/remnant/builtin_index.py must be:\n" + json.dumps(
        live, indent=4, sort_keys=True
    )
