"""``remnant report RUN [RUN ...] [--customer] [--out FILE] [--pack DIR]``: HTML from run folders.

Exit codes: 0 written, 2 bad input (missing or malformed statement, unreadable pack).
"""

from __future__ import annotations

import argparse

EXIT_OK = 0


def _report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from remnant.cli_paths import out_file, run_files, run_folder
    from remnant.report.runs import report_runs

    for run in args.runs:
        run_folder(run, requirement="K4")
    if args.out is not None:
        # the page replaces none of the run files it reads (a statement, the records...) nor a pack's files
        inputs = {f"{name} of {run}": Path(run) / name for run in args.runs for name in run_files()}
        inputs |= {f"the --pack folder {pack}": pack for pack in args.pack or ()}
        out_file(args.out, requirement="R22", inputs=inputs)
    path = report_runs(
        args.runs,
        customer=args.customer,
        out=args.out,
        packs=args.pack or (),
        labels=args.label,
        title=args.title,
    )
    print(path)
    return EXIT_OK


def add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``remnant report``."""
    report = subparsers.add_parser(
        "report",
        help="write the HTML report of a run (or compare several runs)",
        description=(
            "Write RUN/report.html (technical) or, with --customer, RUN/report-customer.html: the non-technical "
            "register with glossed verdicts beside their normative terms (V6) and canary values redacted (R18). "
            "With several runs, write one page comparing them to --out."
        ),
    )
    report.add_argument("runs", nargs="+", metavar="RUN", help="run folder(s) holding statement.json")
    report.add_argument("--customer", action="store_true", help="the customer register (V6, R18)")
    report.add_argument("--out", help="HTML file to write (required with several runs)")
    report.add_argument(
        "--pack",
        action="append",
        metavar="DIR",
        help="target pack to redact against (default: the pack location in the manifest)",
    )
    report.add_argument("--label", action="append", help="a label per run, in order (default: folder names)")
    report.add_argument("--title", help="page title")
    report.set_defaults(handler=_report)
