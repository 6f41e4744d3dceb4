"""The public API (``remnant.__all__``) is exactly this list: a name added or removed is a decision, made here
(as httpx guards its own). ``import remnant`` stays light (the pure core works without torch), and every name
resolves to what the command line runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import remnant

PUBLIC = [
    "ConfigError",
    "DivergedError",
    "EvalResult",
    "Evaluation",
    "HARNESS_VERSION",
    "IntegrityError",
    "ModelError",
    "Outcome",
    "PackError",
    "PluginWarning",
    "PreregError",
    "RecordError",
    "RemnantError",
    "RunSummary",
    "STANDARD_VERSION",
    "SignatureError",
    "UnsupportedArchitecture",
    "VerdictFacts",
    "VerdictResult",
    "__version__",
    "assess",
    "evaluate",
    "recompute",
    "run_sweep",
    "verdict",
]


def test_all_is_exactly_the_public_list() -> None:
    assert remnant.__all__ == sorted(PUBLIC)
    assert len(set(remnant.__all__)) == len(remnant.__all__)


def test_every_public_name_resolves_to_the_commands_function() -> None:
    from remnant.assess.recompute import recompute
    from remnant.errors import ConfigError, RemnantError
    from remnant.standard.verdict import decide

    for name in remnant.__all__:
        assert getattr(remnant, name) is not None, name
    assert remnant.verdict is decide and remnant.ConfigError is ConfigError
    assert issubclass(remnant.ConfigError, remnant.RemnantError) and remnant.RemnantError is RemnantError
    assert (
        remnant.recompute.__module__ == "remnant.api" and recompute.__module__ == "remnant.assess.recompute"
    )
    assert set(remnant.__all__) <= set(dir(remnant))


def test_import_remnant_imports_no_heavy_library() -> None:
    code = (
        "import sys, remnant\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'scipy', 'transformers'))\n"
        "print(heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


def test_an_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        remnant.no_such_name  # noqa: B018


def test_remnant_assess_stays_the_function_after_its_package_is_imported(tmp_path: Path) -> None:
    """``remnant.assess`` names the public function and the package ``remnant.assess``; importing the package (the
    function's own first call does) makes the attribute the package, so the package runs what the function runs.
    In a fresh interpreter, in both import orders, two calls of ``remnant.assess(...)`` each reach the command:
    a config that is not there is refused by name (not "'module' object is not callable")."""
    missing = tmp_path / "missing.toml"
    code = (
        "import remnant\n"
        "{first}\n"
        "for _ in range(2):\n"
        "    try:\n"
        f"        remnant.assess({str(missing)!r}, {str(tmp_path / 'run')!r})\n"
        "    except remnant.RemnantError as exc:\n"
        "        print(type(exc).__name__, 'missing.toml' in str(exc))\n"
    )
    for first in ("import remnant.assess.run", "f = remnant.assess"):  # the package first, or the function
        done = subprocess.run(
            [sys.executable, "-c", code.format(first=first)], capture_output=True, text=True, timeout=120
        )
        assert done.stdout.split() == ["ConfigError", "True"] * 2, (first, done.stderr[-2000:])
