"""The ``remnant`` command line: one command group, each subcommand a thin wrapper over the Python API.

Exit codes: 0 success, 1 a check failed / not conformant, 2 bad input or usage.

Each part of the package contributes its subcommands from a ``commands`` module exposing
``add_commands(subparsers)``; handlers are set with ``parser.set_defaults(handler=fn)`` where ``fn(args) -> int``.
Handlers import heavy libraries (torch, transformers) inside themselves, so ``remnant verdict`` or
``remnant validate`` start in well under a second and work where torch is not installed (``pip install remnant``,
the pure core). A command that needs a model where the ``model`` extra is missing ends in one line,
"needs the model extra: pip install 'remnant[model]'", and exit 2.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Sequence

from remnant import __version__
from remnant.errors import IntegrityError, RemnantError

#: Modules contributing subcommands, in the order their commands are listed in ``--help``.
COMMAND_MODULES: tuple[str, ...] = (
    "remnant.standard.commands",
    "remnant.statement.commands",
    "remnant.prereg_commands",
    "remnant.models.commands",
    "remnant.packs.commands",
    "remnant.formats.commands",
    "remnant.train.commands",
    "remnant.report.commands",
    "remnant.assess.commands",
    "remnant.studies.commands",
    "remnant.sweep.commands",
    "remnant.metrics.commands",
    "remnant.list_commands",
    "remnant.demo",
)

#: Top-level modules that only the ``model`` extra installs (pyproject.toml; tokenizers and huggingface_hub come
#: with transformers). A command that finds one of them missing needs the extra, not a traceback.
MODEL_EXTRA_MODULES = frozenset(
    {
        "accelerate",
        "datasets",
        "filelock",
        "gguf",
        "huggingface_hub",
        "peft",
        "rouge_score",
        "safetensors",
        "tokenizers",
        "torch",
        "tqdm",
        "transformers",
    }
)
MODEL_EXTRA_HINT = "needs the model extra: pip install 'remnant[model]'"

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
        importlib.import_module(module_name).add_commands(sub)
    return parser


#: OSErrors about a path the user named (a missing input, a folder given for a file, a file for a folder, no
#: permission): one line and exit 2. Other exceptions are bugs and keep their traceback.
USER_PATH_ERRORS: tuple[type[OSError], ...] = (
    FileNotFoundError,
    FileExistsError,
    IsADirectoryError,
    NotADirectoryError,
    PermissionError,
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every error a user can cause ends in one line on stderr and exit 2."""
    try:
        try:
            return _dispatch(argv)
        finally:
            # a reader that stopped early (`remnant ... | head`) fails the flush here, inside the net, rather
            # than at interpreter exit ("Exception ignored ... BrokenPipeError")
            sys.stdout.flush()
    except BrokenPipeError:
        _discard_stdout()
        _say("remnant: error: the output was closed before all of it was written (broken pipe)")
        return EXIT_BAD_INPUT


def _discard_stdout() -> None:
    """Point stdout at the null device, so the interpreter's last flush of what is left cannot fail."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no file descriptor behind stdout (an in-process caller): nothing to do
        pass


def _say(message: str) -> None:
    with contextlib.suppress(OSError):  # stderr closed too: the exit code is all that is left
        print(message, file=sys.stderr)


def _path_error(exc: OSError) -> str:
    """``PATH: reason`` from an OSError (both paths for a rename or link)."""
    if exc.filename is None:
        return str(exc)
    other = f" -> {exc.filename2}" if exc.filename2 is not None else ""
    return f"{exc.filename}{other}: {exc.strerror or exc}"


def _dispatch(argv: Sequence[str] | None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words == ["--version"]:  # answered before the parser imports every command module
        print(f"remnant {__version__}")
        return EXIT_OK
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    try:
        return int(handler(args))
    except IntegrityError as exc:
        print(f"remnant {args.command}: check failed: {exc}", file=sys.stderr)
        return EXIT_CHECK_FAILED
    except RemnantError as exc:
        why = str(exc)
    except USER_PATH_ERRORS as exc:
        why = _path_error(exc)
    except ModuleNotFoundError as exc:
        # Only the package itself missing counts: a missing submodule of an installed torch is a bug.
        if exc.name not in MODEL_EXTRA_MODULES:
            raise
        why = f"{MODEL_EXTRA_HINT} ({exc.name} is not installed)"
    except KeyboardInterrupt:
        print(
            f"remnant {args.command}: interrupted; completed work is kept (rerun with --resume)",
            file=sys.stderr,
        )
        return 130
    print(f"remnant {args.command}: error: {why}", file=sys.stderr)
    return EXIT_BAD_INPUT


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
