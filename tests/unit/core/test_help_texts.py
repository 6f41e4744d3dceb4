"""What ``--help`` and the docs' synopses tell a user: complete, and in the user's terms.

Help text describes what a command does; it never points at the project's internal seed documents ("seed 003",
``seeds/002``), which a user of the installed package does not have. A doc's synopsis of a command lists every
option the parser takes, so an option is never found only by reading ``--help`` (docs/sweep.md's ``sweep run``).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from remnant.cli import build_parser

DOCS = Path(__file__).resolve().parents[3] / "docs"
SEED_CITATION = re.compile(r"\bseeds?[ /_]?0\d\d\b", re.I)


def _parsers(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], str]]:
    """Every (sub)command's full help, with the one-line help its parent lists it under."""
    yield path, parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            listed = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield (*path, name), listed.get(name, "")
                yield from _parsers(sub, (*path, name))


def test_no_help_text_cites_a_seed_document() -> None:
    found = [
        (" ".join(path), match.group(0))
        for path, text in _parsers(build_parser(), ("remnant",))
        for match in SEED_CITATION.finditer(text)
    ]
    assert found == []


def test_the_seed_check_bites() -> None:
    assert SEED_CITATION.search("seed 003's auditor tables") and SEED_CITATION.search("(seeds/002 eqs. 1-6)")
    assert not SEED_CITATION.search("--seed 0 the run seed") and not SEED_CITATION.search("seeds 0 1")


def _options(parser: argparse.ArgumentParser, *path: str) -> set[str]:
    for word in path:
        (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return {o for a in parser._actions for o in a.option_strings if o.startswith("--") and o != "--help"}


@pytest.mark.parametrize(("doc", "command"), [("sweep.md", ("sweep", "run"))])
def test_synopsis_lists_every_option(doc: str, command: tuple[str, ...]) -> None:
    """The first code block of the doc is its synopsis; every option of the command appears in it."""
    text = (DOCS / doc).read_text(encoding="utf-8")
    synopsis = text.split("```", 2)[1]
    missing = sorted(o for o in _options(build_parser(), *command) if o not in synopsis)
    assert "--retry-failed" in _options(build_parser(), *command)
    assert missing == [], f"docs/{doc}'s synopsis lacks {missing}"


def test_latent_probe_tiny_commands_run_as_written(tmp_path: Path) -> None:
    """docs/latent.md's tiny-model lines, as written, in a checkout-like folder: the first builds the model folder
    the second names, and the second parses as ``study latent-probe`` with that folder (the study itself on the
    tiny model is run by tests/unit/latent/test_latent_study.py with the same arguments)."""
    import shlex
    import subprocess
    import sys

    text = (DOCS / "latent.md").read_text(encoding="utf-8")
    block = next(b for b in text.split("```")[1::2] if "--preset tiny" in b)
    build, study = (line for line in block.strip().splitlines())
    (tmp_path / "tests").symlink_to(DOCS.parent / "tests")
    argv = shlex.split(build)
    assert argv[0] == ".venv/bin/python"
    subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, check=True, capture_output=True, timeout=300)
    words = shlex.split(study)
    assert words[0] == "remnant"
    args = build_parser().parse_args(words[1:])
    assert (args.command, args.study_command, args.preset) == ("study", "latent-probe", "tiny")
    assert [(tmp_path / m / "model.safetensors").is_file() for m in args.model] == [True]
