"""Every command in a doc block tagged ``sh runnable`` (README.md, docs/*.md) runs as written and exits 0.

The convention is documented at the top of docs/extending.md ("Commands in the docs"). A page's runnable blocks
run in order, line by line, in one temporary folder; the models the docs name are replaced by the tiny random
Llama through the explicit ``SUBSTITUTIONS`` table, so a page's commands take seconds. A documented command that
stopped working (a renamed flag, a moved file) fails here naming the page and line (R23: what the docs say a
command does is what it does).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: The fenced-block info string that marks a block whose commands run as written.
TAG = "sh runnable"

#: Repository folders the docs name by relative path, linked into each page's temporary folder.
LINKED = ("src", "examples", "tests")

#: What the docs name -> what the test runs instead ("{tiny}" is the tiny Llama folder). Only models: a doc
#: command is otherwise run exactly as written.
SUBSTITUTIONS = {"smollm2-135m-instruct": "{tiny}"}

#: The longest one documented command may take on the tiny model (seconds).
LINE_TIMEOUT = 180


@dataclass(frozen=True)
class DocLine:
    """One logical command line of a runnable block: continuations joined, with where it starts."""

    page: str
    line: int
    command: str


def runnable_lines(text: str, page: str) -> list[DocLine]:
    """The logical command lines of ``text``'s ``sh runnable`` blocks, in order; blank and comment-only lines
    are dropped, a line ending in a backslash continues on the next."""
    out: list[DocLine] = []
    inside, tagged = False, False
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        fence = re.match(r"^\s*```(.*)$", raw)
        if fence is not None:
            if inside and pending:
                raise ValueError(f"{page}:{start}: a runnable block ends inside a continued line")
            inside, tagged = (not inside), (not inside and fence.group(1).strip() == TAG)
            continue
        if not (inside and tagged):
            continue
        if not pending:
            start = number
            if not raw.strip() or raw.lstrip().startswith("#"):
                continue
        pending.append(raw[:-1] if raw.endswith("\\") else raw)
        if not raw.endswith("\\"):
            out.append(DocLine(page, start, " ".join(part.strip() for part in pending)))
            pending = []
    return out


def _pages() -> dict[str, list[DocLine]]:
    found = {}
    for path in PAGES:
        name = str(path.relative_to(ROOT))
        lines = runnable_lines(path.read_text(encoding="utf-8"), name)
        if lines:
            found[name] = lines
    return found


RUNNABLE = _pages()


def _workspace(folder: Path) -> dict[str, str]:
    """``folder`` set up as a fresh checkout's root; the environment the commands run with."""
    for name in LINKED:
        (folder / name).symlink_to(ROOT / name, target_is_directory=True)
    (folder / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.prefix) / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONPATH="")
    return env


def _substituted(command: str, tiny: Path) -> str:
    for named, stand_in in SUBSTITUTIONS.items():
        command = command.replace(named, stand_in.format(tiny=tiny))
    return command


def test_the_parser_joins_continuations_and_skips_untagged_blocks() -> None:
    text = "\n".join(
        [
            "```sh",
            "remnant untagged",
            "```",
            "```sh runnable",
            "# a comment",
            "",
            "remnant a --x \\",
            "    --y   # trailing",
            "remnant b",
            "```",
            "```",
            "remnant bare",
            "```",
        ]
    )
    lines = runnable_lines(text, "page.md")
    assert [(d.line, d.command) for d in lines] == [(7, "remnant a --x --y   # trailing"), (9, "remnant b")]
    with pytest.raises(ValueError, match=r"page.md:2: a runnable block ends inside a continued line"):
        runnable_lines("```sh runnable\nremnant a \\\n```\n", "page.md")


def test_the_core_pages_have_runnable_blocks() -> None:
    """The quick start, signing, packs and eval examples are tagged: untagging them would skip their check."""
    assert {"README.md", "docs/extending.md", "docs/metrics.md", "docs/packs.md", "docs/statement.md"} <= set(
        RUNNABLE
    )
    quick_start = [d.command.split()[1] for d in RUNNABLE["README.md"]]
    assert quick_start[:6] == ["verdict", "statement", "validate", "keys", "sign", "verify"]


@pytest.mark.parametrize("page", sorted(RUNNABLE))
def test_every_runnable_doc_command_exits_0(page: str, tiny_llama_dir: Path, tmp_path: Path) -> None:
    env = _workspace(tmp_path)
    assigned = ""  # NAME=value lines carry over to the page's later lines, as in one shell
    for doc in RUNNABLE[page]:
        command = _substituted(doc.command, tiny_llama_dir)
        done = subprocess.run(
            ["bash", "-c", f"set -o pipefail\n{assigned}{command}"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=LINE_TIMEOUT,
            check=False,
        )
        assert done.returncode == 0, (
            f"{doc.page}:{doc.line}: `{doc.command}` exited {done.returncode}\n{done.stderr[-2000:]}"
        )
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*(\s+#.*)?", doc.command):
            assigned += doc.command + "\n"
