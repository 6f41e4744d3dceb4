"""``remnant preregister CONFIG --out RUN``: freeze the pre-registered values before any attack (R14).

Prints the digest and the path of ``RUN/prereg.json``. A malformed config (a number out of range anywhere, free
parameter tables included), a component that refuses its declared parameters, a missing pack or a run folder
frozen with different values is bad input (exit 2, with the file, field and requirement named): nothing that
could not run is ever frozen (R14).
"""

from __future__ import annotations

import argparse
from pathlib import Path

EXIT_OK = 0


def _preregister(args: argparse.Namespace) -> int:
    from remnant.cli_paths import mark_output, run_folder
    from remnant.config import load_config
    from remnant.prereg import PREREG_FILE, freeze

    run_folder(args.out, requirement="R14", must_exist=False, option="--out")
    cfg = load_config(Path(args.config))
    from remnant.assess.inputs import check_components

    check_components(cfg)  # every attack, metric, method and the relearning procedure, created once (R14)
    prereg = freeze(cfg, Path(args.out))
    mark_output(args.out, "run")
    print(prereg.digest)
    print(Path(args.out) / PREREG_FILE)
    return EXIT_OK


def add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``preregister`` on the top-level subparsers (called by remnant.cli)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "preregister",
        help="freeze a config's pre-registered values into RUN/prereg.json (R14)",
        description="Freeze the gating metric, tau, utility and phi, probe sets, attack budgets, minimum n, "
        "seeds and claim of CONFIG into RUN/prereg.json with a sha256 digest and a UTC timestamp (R14). "
        "A frozen file is never rewritten; later changes are recorded as deviations (R15).",
    )
    parser.add_argument("config", metavar="CONFIG", help="assessment config (TOML; see docs/config.md)")
    parser.add_argument("--out", metavar="RUN", required=True, help="run folder to write prereg.json into")
    parser.set_defaults(handler=_preregister)
