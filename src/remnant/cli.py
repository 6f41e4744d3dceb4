"""The ``remnant`` command line: one command group, each subcommand a thin wrapper over the Python API.

Exit codes (DESIGN §4): 0 success, 1 a check failed / not conformant, 2 bad input or usage.

Each part of the package contributes its subcommands from a ``commands`` module exposing
``add_commands(subparsers)``; handlers are set with ``parser.set_defaults(handler=fn)`` where ``fn(args) -> int``.
Handlers import heavy libraries (torch, transformers) inside themselves, so ``remnant verdict`` or
``remnant validate`` start in well under a second and work where torch is not installed.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from remnant import __version__
from remnant.errors import RemnantError

#: Modules contributing subcommands, in the order their commands are listed in ``--help``.
COMMAND_MODULES: tuple[str, ...] = (
    "remnant.standard.commands",
    "remnant.statement.commands",
    "remnant.prereg_commands",
    "remnant.models.commands",
    "remnant.packs.commands",
    "remnant.train.commands",
    "remnant.report.commands",
    "remnant.assess.commands",
    "remnant.study_commands",
    "remnant.demo",
)

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="remnant",
        description="Tell whether a model's unlearning removed a target or only hid it (Yuyari Standard v0.3).",
    )
    parser.add_argument("--version", action="version", version=f"remnant {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            # A part not built yet contributes no commands; a missing *dependency* inside it is a real error.
            if exc.name is not None and (module_name + ".").startswith(exc.name + "."):
                continue
            raise
        module.add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    try:
        return int(handler(args))
    except RemnantError as exc:
        print(f"remnant {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(
            f"remnant {args.command}: interrupted; completed work is kept (rerun with --resume)",
            file=sys.stderr,
        )
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
