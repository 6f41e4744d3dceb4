"""Lines of Python in src/remnant per package at one or more git revisions: all lines, and code lines (not blank,
comment or docstring), as the engine's "src/ smaller" criterion is read.

    .venv/bin/python benchmarks/src_lines.py 38bb223 HEAD
"""

from __future__ import annotations

import argparse
import io
import subprocess
import tokenize
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def code_lines(source: str) -> int:
    """Lines that are neither blank, a comment, nor part of a docstring (a string standing as a statement)."""
    lines = source.splitlines()
    code = {i for i, line in enumerate(lines, 1) if line.strip() and not line.strip().startswith("#")}
    previous = None
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        starts_statement = previous is None or previous.type in (
            tokenize.INDENT,
            tokenize.DEDENT,
            tokenize.NEWLINE,
            tokenize.NL,
        )
        if token.type == tokenize.STRING and starts_statement:
            code -= set(range(token.start[0], token.end[0] + 1))
        if token.type not in (tokenize.COMMENT, tokenize.NL):
            previous = token
    return len(code)


def counts(rev: str) -> tuple[Counter[str], Counter[str]]:
    """(all lines, code lines) per package at ``rev`` (a top-level module counts as ``(top-level)``)."""
    git = ["git", "-C", str(ROOT)]
    names = subprocess.run([*git, "ls-tree", "-r", "--name-only", rev, "src/remnant"], check=True,
                           capture_output=True, text=True).stdout.split()  # fmt: skip
    total: Counter[str] = Counter()
    code: Counter[str] = Counter()
    for name in (n for n in names if n.endswith(".py")):
        source = subprocess.run(
            [*git, "show", f"{rev}:{name}"], check=True, capture_output=True, text=True
        ).stdout
        parts = name.split("/")
        package = parts[2] if len(parts) > 3 else "(top-level)"
        total[package] += source.count("\n")
        code[package] += code_lines(source)
    return total, code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revs", nargs="+", help="git revisions, e.g. 38bb223 HEAD")
    revs = parser.parse_args().revs
    results = [counts(rev) for rev in revs]
    packages = sorted(set().union(*(total for total, _ in results)), key=lambda p: -results[-1][0][p])
    print("package".ljust(14) + "".join(f"{rev[:10]:>22}" for rev in revs) + "   (all lines / code lines)")
    for package in [*packages, "total"]:
        cells = [
            (sum(t.values()), sum(c.values())) if package == "total" else (t[package], c[package])
            for t, c in results
        ]
        print(package.ljust(14) + "".join(f"{f'{a:,} / {b:,}':>22}" for a, b in cells))


if __name__ == "__main__":
    main()
