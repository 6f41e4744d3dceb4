"""``remnant study latent-probe [CONFIG] --model DIR [--preset tiny|cpu] [--out DIR]`` (Annex B at small scale).

Prints the Annex-shaped table (B.6) and writes ``latent-probe.json`` (every run, every cell) and
``latent-probe.md`` (the tables) to ``--out``. Exit code 0 when the study ran, whatever it found: the nulls
failing is a finding, not a failed check; 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from remnant.atomic import write_atomic
from remnant.jsonio import read_toml


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def render_markdown(result: Any) -> str:
    """The study's tables in markdown: the B.6 table, the per-run survival/recovery table and the cells."""
    cfg = result.config
    lines = [
        "# Latent-probe study (Standard Annex B design, small scale) — non-adjudicating (C-H6, C-H9)",
        "",
        f"Models: {', '.join(cfg.models)}; methods: {', '.join(cfg.methods)}; seeds: {cfg.seeds}; "
        f"margin δ = {cfg.margin}; a null holds for a method in ≥ {cfg.pass_fraction:.0%} of its evaluable cells.",
        "",
        "| | Evaluable cells | Content null held | Procedure null held | Content null | Procedure null "
        "| Design-stable |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in result.table:
        lines.append(
            f"| {r.method} | {r.evaluable_cells} | {r.content_held} | {r.procedure_held} | {r.content_null} "
            f"| {r.procedure_null} | {'yes' if r.design_stable else 'no'} |"
        )
    lines += [
        "",
        f"Content null: **{result.content_null}**. Procedure null: **{result.procedure_null}**. "
        f"Survival vs relearning recovery: ρ = {_fmt(result.rho)} over {result.n_rho} runs. "
        f"Decision (B.4): **{result.decision}**.",
        "",
        result.note,
        "",
        f"Primary configuration: layer {result.primary[0]}, position {result.primary[1]}.",
        "",
        "| Model | Method | Seed | κ_P installed | κ_P removed | retain κ removed/installed | gates | "
        "survival (primary) | recovery | control relearned κ_P |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in result.runs:
        failed = [k for k, v in run.gates.items() if not v]
        lines.append(
            f"| {Path(run.model).name} | {run.method} | {run.seed} | {_fmt(run.kappa_p['installed'])} "
            f"| {_fmt(run.kappa_p['removed'])} "
            f"| {_fmt(run.kappa_retain['removed'])}/{_fmt(run.kappa_retain['installed'])} "
            f"| {'passed' if not failed else 'failed: ' + ', '.join(failed)} | {_fmt(run.primary_survival)} "
            f"| {_fmt(run.recovery)} | {_fmt(run.control_relearned_p)} |"
        )
    lines += [
        "",
        "| Model | Method | Seed | Layer | Position | ‖u‖ / floor | removed | procedure control [CI] "
        "| content control [CI] | evaluable |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in result.runs:
        for c in run.cells:
            lines.append(
                f"| {Path(run.model).name} | {run.method} | {run.seed} | {c.layer} | {c.position} "
                f"| {c.signature:.3g} / {c.floor:.3g} | {c.survival_removed:.3f} "
                f"| {c.procedure.survival:.3f} [{c.procedure.ci95[0]:.3f}, {c.procedure.ci95[1]:.3f}] "
                f"{'held' if c.procedure.held else 'failed'} "
                f"| {c.content.survival:.3f} [{c.content.ci95[0]:.3f}, {c.content.ci95[1]:.3f}] "
                f"{'held' if c.content.held else 'failed'} | {'yes' if c.evaluable else 'no'} |"
            )
    return "\n".join(lines) + "\n"


def _latent_probe(args: argparse.Namespace) -> int:
    from remnant.cli_paths import mark_output, out_folder
    from remnant.latent.study import resolve_config, run_study

    inputs = {"the config": args.config, **{f"the model {m}": m for m in args.model or []}}
    out_folder(args.out, requirement="C-H7", kind="study", inputs=inputs)  # before the study runs, not after
    overrides: dict[str, Any] = {}
    if args.config is not None:
        path = Path(args.config)
        overrides = read_toml(path)
    if args.seeds:
        overrides["seeds"] = args.seeds
    if args.methods:
        overrides["methods"] = args.methods
    cfg = resolve_config(args.model or [], preset=args.preset, overrides=overrides)

    def log(message: str) -> None:
        if not args.quiet:
            print(f"[latent-probe] {message}", file=sys.stderr)

    result, _ = run_study(cfg, log=log)
    text = render_markdown(result)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "latent-probe.json", result.model_dump_json(indent=1))
    write_atomic(out / "latent-probe.md", text)
    mark_output(out, "study")
    return 0


def _auditors(args: argparse.Namespace) -> int:
    from remnant.attacks.seed003_study import run_auditors
    from remnant.attacks.seed003_table import AuditorSpec

    spec = AuditorSpec.preset(args.preset, samples=args.samples, seed=args.seed)

    def log(message: str) -> None:
        if not args.quiet:
            print(f"[auditors] {message}", file=sys.stderr)

    _, text = run_auditors(
        args.model or [], args.pack, args.out, spec=spec, max_items=args.max_items, log=log
    )
    print(text)
    return 0


def study_subparsers(subparsers: Any) -> Any:
    """The ``study`` group's own subcommand registry, so other modules add their studies to this one group
    (``remnant.studies.commands``, listed after this module in ``remnant.cli.COMMAND_MODULES``)."""
    study = subparsers.choices["study"]
    # argparse exposes a parser's subparsers action only through its actions list
    return next(a for a in study._actions if isinstance(a, argparse._SubParsersAction))


def add_commands(subparsers: Any) -> None:
    """Register the ``study`` command group: ``latent-probe`` and ``auditors`` (the research studies of
    ``remnant.studies`` join it through :func:`study_subparsers`)."""
    study = subparsers.add_parser("study", help="research studies of audit metrics (non-adjudicating)")
    sub = study.add_subparsers(dest="study_command", required=True)
    lp = sub.add_parser(
        "latent-probe",
        help="Annex B's direction-probe validation at small scale: signature, both nulls, recovery",
    )
    lp.add_argument("config", nargs="?", help="TOML with LatentProbeConfig fields (optional)")
    lp.add_argument("--model", action="append", help="model folder or zoo name (repeatable)")
    lp.add_argument(
        "--preset",
        choices=["tiny", "cpu"],
        help="sizing preset (tiny: the test suite's tiny random model, about a minute of CPU)",
    )
    lp.add_argument("--methods", nargs="+", help="removal methods (default: npo task_vector)")
    lp.add_argument("--seeds", nargs="+", type=int, help="installation and removal seeds (default: 0 1)")
    lp.add_argument("--out", default="latent-probe", help="output folder for latent-probe.json and .md")
    lp.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    lp.set_defaults(handler=_latent_probe)
    au = sub.add_parser(
        "auditors",
        help="how much of a pack's probe answers each black-box auditor recovers from each model, as ROUGE-L "
        "tables (Base, A, I, M+I, M+I+A, GCG, SoftGCG, ActPert; non-adjudicating)",
    )
    au.add_argument(
        "--model", action="append", help="model folder or zoo name, one table row each (repeatable)"
    )
    au.add_argument("--pack", required=True, help="target pack folder (probe split scored)")
    au.add_argument("--out", default="auditors", help="output folder for auditors.json and auditors.md")
    au.add_argument(
        "--preset", choices=["paper", "tiny"], default="paper", help="budgets (tiny: the test model)"
    )
    au.add_argument("--samples", type=int, help="samples per item for Table 2 (0: greedy only)")
    au.add_argument("--max-items", type=int, help="score only the first N probe items")
    au.add_argument("--seed", type=int, default=0, help="run seed every generator is derived from")
    au.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    au.set_defaults(handler=_auditors)


__all__ = ["add_commands", "render_markdown", "study_subparsers"]
