"""The pure core imports no torch (DESIGN §2), so statements validate and verdicts recompute anywhere."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

PURE_CORE = [
    "remnant",
    "remnant.errors",
    "remnant.registry",
    "remnant.stats",
    "remnant.standard",
    "remnant.standard.verdict",
    "remnant.standard.tier",
    "remnant.statement",
    "remnant.statement.validate",
    "remnant.records",
    "remnant.prereg",
    "remnant.config",
    "remnant.packs",
]


@pytest.mark.parametrize("module", PURE_CORE)
def test_pure_core_module_does_not_import_torch(module: str) -> None:
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        pytest.skip(f"{module} is not built yet")
    code = (
        "import importlib, sys\n"
        f"importlib.import_module({module!r})\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'peft') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "", f"{module} pulls in {result.stdout.strip()}"


def test_cli_help_does_not_import_torch() -> None:
    """`remnant --help` builds every subcommand parser; handlers must import heavy libraries lazily."""
    code = "import sys\nfrom remnant.cli import build_parser\nbuild_parser()\nprint('torch' in sys.modules)\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_public_all_is_sorted() -> None:
    import remnant

    assert list(remnant.__all__) == sorted(remnant.__all__)
