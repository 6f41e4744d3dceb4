"""No import cycles between remnant's packages (docs/extending.md: the pure core at the bottom, the model edge above it).

The graph is built from the source with ``ast``, one node per package (``remnant.assess``, ``remnant.report``,
...; a top-level module such as ``remnant.records`` is its own node). An import at module level is a *top-level*
edge: a cycle of those is an error, whatever the packages. An import inside a function runs only when the function
is called and is counted separately, as is one under ``if TYPE_CHECKING:`` (never run). ``report`` reads the run
manifest and the relearning curves from the core (``remnant.run_manifest``, ``remnant.curves``) and never imports
``assess``, which calls it to write the reports: so the two cannot form a cycle at any level.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from core_modules import SRC

TOP, FUNCTION, TYPING = "top", "function", "type-checking"


@dataclass(frozen=True)
class Edge:
    source: str  # importing module
    target: str  # imported module
    kind: str  # TOP, FUNCTION or TYPING


def package_of(module: str) -> str:
    """``remnant.assess.run`` -> ``assess``; ``remnant.records`` -> ``records``; ``remnant`` -> ``remnant``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(node: ast.AST, kind: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import under ``node`` with its kind: a function body makes it FUNCTION, ``if TYPE_CHECKING`` TYPING."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, kind
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _imports(child, FUNCTION)
        elif isinstance(child, ast.If) and _is_type_checking(child.test) and kind == TOP:
            for statement in child.body:
                yield from _imports(ast.Module(body=[statement], type_ignores=[]), TYPING)
            for statement in child.orelse:
                yield from _imports(ast.Module(body=[statement], type_ignores=[]), TOP)
        else:
            yield from _imports(child, kind)


def _module_files(src: Path) -> dict[str, Path]:
    """Module name -> file, for every module of the package at ``src``."""
    files = {}
    for path in sorted(src.rglob("*.py")):
        parts = path.relative_to(src.parent).with_suffix("").parts
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def import_edges(src: Path) -> list[Edge]:
    """Every import of a module of the package at ``src`` by one of its modules."""
    files = _module_files(src)
    root = src.name
    edges = []
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        for node, kind in _imports(ast.parse(path.read_text(encoding="utf-8")), TOP):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = module.split(".") if is_package else module.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                # `from remnant import stats` imports the module remnant.stats
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            edges += [Edge(module, t, kind) for t in targets if t == root or t.startswith(root + ".")]
    return edges


def package_graph(edges: list[Edge], kinds: set[str]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for e in edges:
        a, b = package_of(e.source), package_of(e.target)
        if e.kind in kinds and a != b:
            graph[a].add(b)
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one package (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


EDGES = import_edges(SRC)


def _between(a: str, b: str, edges: list[Edge] = EDGES) -> list[Edge]:
    return [e for e in edges if package_of(e.source) == a and package_of(e.target) == b]


def test_no_top_level_cycle_between_packages() -> None:
    found = cycles(package_graph(EDGES, {TOP}))
    detail = [
        f"{e.source} -> {e.target}"
        for component in found
        for a in component
        for b in component
        for e in _between(a, b)
        if e.kind == TOP
    ]
    assert found == [], "\n".join(detail)


def test_report_never_imports_assess() -> None:
    """Not at module level, not inside a function, not for typing: with assess -> report (the reports written
    after the statement), any such import would close a cycle."""
    assert _between("report", "assess") == []


def test_assess_calls_report_only_from_functions() -> None:
    edges = _between("assess", "report")
    assert {e.source for e in edges} == {"remnant.assess.finalize"}  # writes the reports
    assert {e.kind for e in edges} == {FUNCTION}


def test_both_read_the_manifest_and_curves_from_the_core() -> None:
    """What assess and report share lives in the core; the graph builder sees those edges (it is not empty)."""
    for package in ("assess", "report"):
        targets = {(e.target, e.kind) for e in EDGES if package_of(e.source) == package}
        assert ("remnant.run_manifest", TOP) in targets
        assert ("remnant.curves", TOP) in targets
    assert not [
        e
        for e in EDGES
        if package_of(e.source) in ("run_manifest", "curves")
        and e.kind != TYPING
        and package_of(e.target) in ("assess", "report")
    ]


# -- the graph builder on a made-up package ---------------------------------------------------------------------


@pytest.fixture()
def toy(tmp_path: Path) -> Path:
    src = tmp_path / "toy"
    files = {
        "__init__.py": "",
        "core.py": "from toy import util\n",
        "util.py": "X = 1\n",
        "a/__init__.py": "from .mod import thing\n",
        "a/mod.py": "from toy.b.mod import other\nthing = 1\n",
        "b/__init__.py": "",
        "b/mod.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from toy.a import thing\n"
            "def f():\n    import toy.a.mod\n"
            "other = 2\n"
        ),
        "c/__init__.py": "import toy.d\n",
        "d/__init__.py": "from ..c import nothing\n",
    }
    for name, text in files.items():
        path = src / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return src


def test_builder_kinds_and_relative_imports(toy: Path) -> None:
    edges = {(e.source, e.target, e.kind) for e in import_edges(toy)}
    assert ("toy.core", "toy.util", TOP) in edges  # `from toy import util` is the module toy.util
    assert ("toy.a", "toy.a.mod", TOP) in edges  # relative, from a package's __init__
    assert ("toy.b.mod", "toy.a", TYPING) in edges
    assert ("toy.b.mod", "toy.a.mod", FUNCTION) in edges
    assert ("toy.d", "toy.c", TOP) in edges  # two dots, from a package's __init__


def test_cycles_counts_top_level_edges_only_when_asked(toy: Path) -> None:
    edges = import_edges(toy)
    assert cycles(package_graph(edges, {TOP})) == [["c", "d"]]  # a -> b only at top level: no cycle
    assert cycles(package_graph(edges, {TOP, FUNCTION})) == [["a", "b"], ["c", "d"]]
