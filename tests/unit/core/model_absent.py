"""Run Python, or the ``remnant`` command line, as on a machine with ``pip install remnant`` and no model extra.

A meta-path finder placed first raises ``ModuleNotFoundError`` (with ``name`` set, as a missing package does)
for every top-level module of the ``model`` extra (:data:`remnant.cli.MODEL_EXTRA_MODULES`: torch,
transformers, safetensors, peft, ...), so an import of any of them anywhere in the child process fails exactly as
it would where they are not installed (docs/extending.md).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from remnant.cli import MODEL_EXTRA_MODULES

#: The child's first lines: block the model extra before anything of remnant is imported.
BLOCKER = f"""
import importlib.abc, sys

BLOCKED = frozenset({sorted(MODEL_EXTRA_MODULES)!r})
assert not BLOCKED & set(sys.modules), sorted(BLOCKED & set(sys.modules))


class ModelExtraAbsent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{top!r}}", name=top)
        return None


sys.meta_path.insert(0, ModelExtraAbsent())
"""

#: Runs ``remnant ARGV`` in the child and exits with its code.
CLI = BLOCKER + "\nfrom remnant.cli import main\nsys.exit(main(sys.argv[1:]))\n"


def run_python(
    code: str, *, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter where the model extra is absent."""
    return subprocess.run(
        [sys.executable, "-c", BLOCKER + code],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        timeout=timeout,
    )


def run_cli(argv: Sequence[str], *, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``remnant ARGV`` in a fresh interpreter where the model extra is absent."""
    return subprocess.run(
        [sys.executable, "-c", CLI, *argv], capture_output=True, text=True, check=False, cwd=cwd, timeout=120
    )
