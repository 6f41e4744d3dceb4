"""The modules of the pure core (docs/extending.md), walked from the source so a new one is covered without a list edit."""

from __future__ import annotations

from pathlib import Path

import remnant
from remnant.cli import COMMAND_MODULES

SRC = Path(remnant.__file__).resolve().parent

#: Core packages: every module under them is core.
CORE_PACKAGES = ("standard", "statement", "config", "packs", "formats", "report")
#: Core modules outside those packages: the top-level core, the CLI, and what ``remnant recompute`` needs from
#: ``assess`` (its records → statement path; the rest of ``assess`` runs models).
CORE_MODULES = (
    "remnant",
    "remnant.atomic",
    "remnant.errors",
    "remnant.jsonio",
    "remnant.registry",
    "remnant.stats",
    "remnant.records",
    "remnant.results",
    "remnant.runlock",
    "remnant.prereg",
    "remnant.curves",
    "remnant.run_manifest",
    "remnant.cli",
    "remnant.cli_paths",
    "remnant.lazy",
    "remnant.output_marker",
    "remnant.assess.recompute",
    "remnant.assess.finalize",
    "remnant.assess.facts",
    "remnant.assess.runfiles",
)

#: Modules of core packages whose functions do model work (binding a pack to a model, R10): importing them needs
#: nothing heavy, calling them needs the model extra.
MODEL_SIDE = ("remnant.packs.bind",)


def _modules_under(package: str) -> list[str]:
    """Every module of ``remnant.<package>``, found from the source files (nothing is imported to find them)."""
    names = []
    for path in sorted((SRC / package).rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def core_modules() -> list[str]:
    walked = [m for package in CORE_PACKAGES for m in _modules_under(package)]
    return sorted({*walked, *CORE_MODULES, *COMMAND_MODULES})


CORE = core_modules()
