"""The split between ``pip install remnant`` (the pure core) and ``pip install 'remnant[model]'`` (docs/extending.md).

pyproject.toml's base dependencies are what the core imports; the ``model`` extra is what only model work
imports, and :data:`remnant.cli.MODEL_EXTRA_MODULES` (what the CLI recognises as "the model extra is missing")
names exactly its modules.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from core_modules import CORE, MODEL_SIDE, SRC

from remnant import cli

PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"
#: Installed with transformers, not named in the extra.
THROUGH_TRANSFORMERS = {"tokenizers", "huggingface_hub"}
#: Imported by a core module only to read an optional format, with its own message when absent (the ray extra).
OPTIONAL_IN_CORE = {"pyarrow"}


def _project() -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    return project


def _name(requirement: str) -> str:
    """The normalised distribution name of a requirement string ("rouge-score==0.1.2" -> "rouge_score")."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match is not None, requirement
    return re.sub(r"[-.]+", "_", match.group(0)).lower()


def test_base_dependencies_hold_nothing_of_the_model_extra() -> None:
    project = _project()
    base = {_name(r) for r in project["dependencies"]}
    model = {_name(r) for r in project["optional-dependencies"]["model"]}
    assert {"torch", "transformers", "safetensors", "peft", "accelerate", "gguf"} <= model
    assert not base & model
    assert not base & {"torch", "transformers", "safetensors", "tokenizers", "huggingface_hub"}


def test_the_cli_knows_exactly_the_model_extra() -> None:
    model = {_name(r) for r in _project()["optional-dependencies"]["model"]}
    assert model | THROUGH_TRANSFORMERS == cli.MODEL_EXTRA_MODULES


def test_dev_installs_the_model_and_ray_extras() -> None:
    """`make test` and `make demo` install `.[dev]`, which must bring everything."""
    dev = _project()["optional-dependencies"]["dev"]
    extras = {e.strip() for r in dev if r.startswith("remnant[") for e in r[len("remnant[") : -1].split(",")}
    assert {"model", "ray"} <= extras


def _third_party_imports(module: str) -> set[str]:
    """Top-level names of non-remnant, non-stdlib modules ``module`` imports anywhere (function bodies too)."""
    parts = module.split(".")[1:]
    path = SRC.joinpath(*parts)
    file = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    names: set[str] = set()
    for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name.partition(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            names.add(node.module.partition(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in ("remnant", "__future__")}


def test_every_library_a_core_module_imports_is_a_base_dependency() -> None:
    """Including imports inside functions, which importing the module does not exercise (e.g. Jinja2 in the
    report renderer): `pip install remnant` must bring each one."""
    project = _project()
    base = {_name(r) for r in project["dependencies"]}
    model = {_name(r) for r in project["optional-dependencies"]["model"]} | THROUGH_TRANSFORMERS
    distributions = importlib.metadata.packages_distributions()
    missing: dict[str, set[str]] = {}
    for module in CORE:
        allowed = base | model if module in MODEL_SIDE else base
        for name in _third_party_imports(module) - OPTIONAL_IN_CORE:
            dists = {_name(d) for d in distributions.get(name, [name])}
            if not dists & allowed:
                missing.setdefault(module, set()).add(name)
    assert missing == {}


def test_the_scan_sees_function_level_imports() -> None:
    assert {"jinja2", "markupsafe"} <= _third_party_imports("remnant.report.render")
    assert "matplotlib" in _third_party_imports("remnant.report.plots")


# -- the one-line message, in process ------------------------------------------------------------------------------


def _parser_raising(exc: BaseException) -> argparse.ArgumentParser:
    def handler(args: argparse.Namespace) -> int:
        raise exc

    parser = argparse.ArgumentParser(prog="remnant")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("needs-model").set_defaults(handler=handler)
    return parser


def test_a_missing_model_package_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = ModuleNotFoundError("No module named 'peft'", name="peft")
    monkeypatch.setattr(cli, "build_parser", lambda: _parser_raising(missing))
    assert cli.main(["needs-model"]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == "remnant needs-model: error: needs the model extra: pip install 'remnant[model]' (peft is not installed)\n"
    )


@pytest.mark.parametrize("name", ["torch._no_such_part", "not_a_model_package", None])
def test_other_missing_modules_keep_their_traceback(
    name: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A missing submodule of an installed torch, or a package outside the extra, is a bug, not a missing extra."""
    missing = ModuleNotFoundError(f"No module named {name!r}", name=name)
    monkeypatch.setattr(cli, "build_parser", lambda: _parser_raising(missing))
    with pytest.raises(ModuleNotFoundError):
        cli.main(["needs-model"])
