"""Layers import downward only: no package of ``remnant`` imports a package that imports it back (DESIGN's layer
rule; a type-only import counts too, since it says which package depends on which), and no function is longer
than 80 lines (the handbook's limit)."""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[3] / "src"
ROOT = SRC / "remnant"
MAX_FUNCTION_LINES = 80


def _module(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package(module: str) -> str:
    """The first component below ``remnant`` (a top-level module is its own package)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "(root)"


def _imports(path: Path, module: str, tree: ast.AST) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolved against this module's package
                base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                found.append(".".join(base + ([node.module] if node.module else [])))
            else:
                found.append(node.module or "")
    return [name for name in found if name.startswith("remnant.")]


@functools.cache  # parsed once for the module's three tests, which only read the trees
def _trees() -> list[tuple[Path, str, ast.AST]]:
    return [(p, _module(p), ast.parse(p.read_text(encoding="utf-8"))) for p in sorted(ROOT.rglob("*.py"))]


def test_no_package_imports_a_package_that_imports_it_back() -> None:
    edges: dict[str, dict[str, str]] = defaultdict(
        dict
    )  # package -> imported package -> first importing module
    for path, module, tree in _trees():
        here = _package(module)
        for name in _imports(path, module, tree):
            there = _package(name)
            if there != here:
                edges[here].setdefault(there, module)
    cycles = sorted(
        f"{a} <-> {b} ({edges[a][b]} imports {b}; {edges[b][a]} imports {a})"
        for a in edges
        for b in edges[a]
        if a < b and a in edges.get(b, {})
    )
    assert cycles == []


def test_the_walk_finds_the_imports_it_checks() -> None:
    # the walk above must find imports at all: the statement package is imported by the assessment's finaliser
    assess = {name for p, m, t in _trees() if _package(m) == "assess" for name in _imports(p, m, t)}
    assert any(name.startswith("remnant.statement") for name in assess)


def test_no_function_is_longer_than_80_lines() -> None:
    long = [
        f"{path.relative_to(SRC)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path, _module_name, tree in _trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == []
