"""``remnant plan CONFIG``, ``remnant assess CONFIG --out RUN [--resume]`` and ``remnant recompute RUN``.

Exit codes: 0 done, 2 bad input (malformed config, missing pack, pickled weights, a pre-registration
that is missing or does not match, R14/R15; a run folder another remnant process is writing, R23, named with its
holder: ``--wait`` waits for it instead), 1 ``recompute`` only: the records fail their integrity check (R23: a
broken chain, a head other than the pinned one, counts the observations do not give), 130 interrupted (completed
cells are kept; rerun with --resume).
The verdict itself is not a failed check: a *hidden* verdict is a successful assessment.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

EXIT_OK = 0
#: ``--wait`` of the commands that write a run folder (remnant.runlock).
WAIT_HELP = (
    "when another remnant process is writing RUN, wait for it to finish (default: exit 2 at once, naming it; "
    "records are append-only and chained, so two writers never interleave, R23)"
)


def _summary(outcome: Any, run: Path) -> dict[str, object]:
    from remnant.standard.derive import behavioural_n

    return {
        "verdict": outcome.verdict.verdict,
        "g_star": outcome.verdict.g_star,
        "g_star_ci95": list(outcome.verdict.g_star_ci95) if outcome.verdict.g_star_ci95 else None,
        "decisive_attacks": list(outcome.verdict.decisive_attacks),
        "tier": outcome.tier.display,
        "removal_stage_utility": outcome.facts["utility"]["removal_stage"],
        "smallest_n": behavioural_n(outcome.facts),
        "manifest_ref": outcome.manifest_ref,
        "files": [str(p) for p in outcome.files],
        "run": str(run),
    }


def _assess(args: argparse.Namespace) -> int:
    from remnant.assess.run import assess_command
    from remnant.cli_paths import mark_output, run_folder

    run = run_folder(args.out, requirement="R14", must_exist=False, option="--out")
    outcome = assess_command(
        args.config, run, resume=args.resume, wait=args.wait, states=args.states, progress=not args.quiet
    )
    mark_output(run, "run")
    print(json.dumps(_summary(outcome, run), indent=2))
    return EXIT_OK


def _recompute(args: argparse.Namespace) -> int:
    from remnant.assess.recompute import recompute
    from remnant.cli_paths import run_folder

    run = run_folder(args.run, requirement="R24")
    outcome = recompute(run, reports=not args.no_reports, expect_head=args.expect_head, wait=args.wait)
    print(json.dumps(_summary(outcome, run), indent=2))
    return EXIT_OK


def _plan(args: argparse.Namespace) -> int:
    from remnant.assess.plan import make_plan, render_plan
    from remnant.config import load_config

    plan = make_plan(load_config(Path(args.config)))
    if args.json:
        print(json.dumps(plan.to_json(), indent=2))
    else:
        print(render_plan(plan))
    return EXIT_OK


def add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``plan``, ``assess`` and ``recompute`` (called by remnant.cli)."""
    plan = subparsers.add_parser(
        "plan",
        help="what an assessment will do and cost, before anything runs",
        description="Print the states to train, the attacks and cells, forward/backward token counts, an estimate "
        "in minutes on this machine's CPU and on a GPU (from SmolLM2-135M throughputs measured on a 2-core "
        "CPU), and the tier the "
        "planned n can support (R21).",
    )
    plan.add_argument("config", metavar="CONFIG", help="assessment config (TOML)")
    plan.add_argument("--json", action="store_true", help="machine-readable output")
    plan.set_defaults(handler=_plan)

    assess = subparsers.add_parser(
        "assess",
        help="run a pre-registered assessment: states, attacks, records, verdict, statement, manifest, reports",
        description="Run CONFIG into RUN. Needs RUN/prereg.json (`remnant preregister CONFIG --out RUN`, R14); "
        "changes since are refused unless recorded as deviations (R15). Writes records.jsonl as it goes, then "
        "manifest.json, statement.json (and statement.dsse.json when signing.key is set), report.html and "
        "report-customer.html. Ctrl-C stops cleanly; --resume skips completed cells.",
    )
    assess.add_argument("config", metavar="CONFIG", help="assessment config (TOML)")
    assess.add_argument("--out", metavar="RUN", required=True, help="run folder holding prereg.json")
    assess.add_argument("--resume", action="store_true", help="continue a run, skipping completed cells")
    assess.add_argument("--quiet", action="store_true", help="no training progress bars")
    assess.add_argument("--wait", action="store_true", help=WAIT_HELP)
    assess.add_argument(
        "--states",
        metavar="STORE",
        help="keep the states this run trains (installed, removed, the audits' control states) in STORE, a folder "
        "or s3://bucket/prefix or gs://bucket/prefix, instead of RUN/states, and load a state a later run asks for "
        "by the same recipe from there (checked against the files saved, R23)",
    )
    assess.set_defaults(handler=_assess)

    recompute = subparsers.add_parser(
        "recompute",
        help="rebuild rates, verdict, tier, statement, manifest and reports from RUN's records (no model)",
        description="Recompute everything downstream of RUN/records.jsonl with the pre-registration and config "
        "copy in RUN. Loads no model; the statement is byte-identical to the one assess wrote. Records whose chain is "
        "broken, whose head is not the one manifest.json and statement.json pin, or whose cell counts do not follow "
        "from their observations are refused (exit 1, R23) and nothing is rewritten.",
    )
    recompute.add_argument("run", metavar="RUN", help="run folder written by remnant assess")
    recompute.add_argument("--no-reports", action="store_true", help="skip the HTML reports")
    recompute.add_argument(
        "--expect-head",
        metavar="sha256:HEX",
        help="the records_head of the statement you hold (e.g. from its signed envelope): the records must end "
        "there, whatever the run folder's own manifest and statement say (R23)",
    )
    recompute.add_argument("--wait", action="store_true", help=WAIT_HELP)
    recompute.set_defaults(handler=_recompute)
