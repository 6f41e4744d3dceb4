"""The research studies on the command line: the one ``remnant study`` group.

Each study freezes its config into ``OUT/prereg.json`` before it reads a table or trains a model (or is held to
the one already there, deviations included) and writes ``OUT/<study>.json``, ``.md`` and ``.html``. The pool
studies and the readmission decision from ``--cells`` need no model (the pure core); ``readmission`` without
``--cells`` and ``goodhart`` train models and need the model extra. Exit 0 when the study ran, whatever it found;
2 for bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from remnant.states.store import CheckpointStore

STUDY_KINDS = ("meta-eval", "recovery", "readmission", "goodhart")


def _write(out: Path, stem: str, result: Any, doc: Any) -> None:
    """``OUT/<stem>.json`` (the result; None: none), ``.md`` and ``.html`` (the document), and the folder marked."""
    from remnant.atomic import write_atomic
    from remnant.cli_paths import mark_output
    from remnant.studies.document import to_html, to_markdown

    out.mkdir(parents=True, exist_ok=True)
    if result is not None:
        write_atomic(out / f"{stem}.json", result.model_dump_json(indent=1) + "\n")
    write_atomic(out / f"{stem}.md", to_markdown(doc))
    write_atomic(out / f"{stem}.html", to_html(doc))
    mark_output(out, "study")


#: The tables of a pool folder a pool study reads (remnant.results.load_pool).
POOL_TABLES = ("results.parquet", "results.csv", "items.parquet", "items.csv")


def _inputs(args: argparse.Namespace) -> dict[str, str | Path | None]:
    """What a study reads, by what a refusal calls it: the output guard keeps its output off every one."""
    found: dict[str, str | Path | None] = {
        "the --config file": getattr(args, "config", None),
        "the --cells file": getattr(args, "cells", None),
        "the --pack folder": getattr(args, "pack", None),
    }
    pool = getattr(args, "pool", None)
    if pool is not None:
        found |= {f"the pool's {name}": Path(pool) / name for name in POOL_TABLES}
    models = getattr(args, "model", None)
    for model in [models] if isinstance(models, str) else models or []:
        found[f"the model {model}"] = model
    return found


def _log(args: argparse.Namespace, name: str) -> Any:
    def log(message: str) -> None:
        if not getattr(args, "quiet", False):
            print(f"[{name}] {message}", file=sys.stderr)

    return log


def _registered(
    kind: str, args: argparse.Namespace, overrides: dict[str, object], out: Path
) -> tuple[Any, Any]:
    """The study's config (file, then command-line overrides) and its registration in ``out`` (R14, R15)."""
    from remnant.cli_paths import out_folder
    from remnant.studies.config import load_config
    from remnant.studies.registration import register

    out_folder(out, requirement="R14", kind="study", inputs=_inputs(args))
    cfg = load_config(kind, args.config, overrides)
    return cfg, register(cfg, out)


def _model_extra() -> None:
    """Fail before anything is frozen when the study trains models and the model extra is absent (R14: nothing
    that could not run is frozen); the CLI turns the ModuleNotFoundError into its one-line hint."""
    import importlib.util

    for name in ("torch", "transformers"):  # found, not imported: this module is part of the pure core
        if importlib.util.find_spec(name) is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def _preregister(args: argparse.Namespace) -> int:
    from remnant.cli_paths import mark_output
    from remnant.prereg import PREREG_FILE

    _, reg = _registered(args.kind, args, {}, Path(args.out))
    mark_output(args.out, "study")
    print(reg.prereg.digest)
    print(Path(args.out) / PREREG_FILE)
    return 0


def _pool_study(kind: str, args: argparse.Namespace) -> int:
    """``meta-eval`` or ``recovery`` over the pool folder: registered (R14), then the finished pools it reads."""
    from remnant.results import load_pool, require_finished, require_spec
    from remnant.studies import report
    from remnant.studies.meta_eval import meta_eval
    from remnant.studies.recovery import recovery

    out = Path(args.out) if args.out else Path(args.pool) / "studies" / kind
    overrides: dict[str, object] = {"seed": args.seed}
    if kind == "recovery":
        overrides |= {"outcome": args.outcome, "outcome_kind": args.outcome_kind}
    cfg, reg = _registered(kind, args, overrides, out)
    # faithfulness compares the target and never-saw pools; recovery's outcomes are the unlearned models'
    studies: dict[str, tuple[str, tuple[str, ...], Any, Any]] = {
        "meta-eval": ("meta-evaluation", ("target", "never_saw"), meta_eval, report.meta_eval_document),
        "recovery": ("recovery study", ("unlearned",), recovery, report.recovery_document),
    }
    what, pools, study, document = studies[kind]
    require_spec(args.pool, cfg.pool_spec, what)
    table = load_pool(args.pool)
    require_finished(table, pools, what)
    result = study(table, cfg, registration=reg.to_json())
    _write(out, kind, result, document(result))
    print(out / f"{kind}.md")
    return 0


def _summary(args: argparse.Namespace) -> int:
    from remnant.cli_paths import out_folder
    from remnant.jsonio import read_json
    from remnant.studies.meta_eval import MetaEvalResult
    from remnant.studies.recovery import RecoveryResult
    from remnant.studies.report import summary_document

    meta_file = Path(args.meta_eval) / "meta-eval.json"
    rec_file = Path(args.recovery) / "recovery.json" if args.recovery else None
    read = {"--meta-eval's meta-eval.json": meta_file}
    if rec_file is not None:
        read["--recovery's recovery.json"] = rec_file
    out = out_folder(args.out, requirement="R22", kind="study", inputs=read)
    meta = MetaEvalResult.model_validate(read_json(meta_file, requirement="R22"))
    rec = None
    if rec_file is not None:
        rec = RecoveryResult.model_validate(read_json(rec_file, requirement="R22"))
    _write(out, "summary", None, summary_document(meta, rec))
    print(out / "summary.md")
    return 0


STATES_HELP = (
    "keep every trained state (install, removal, control states) in the store DIR (a folder, or s3://bucket/prefix "
    "or gs://bucket/prefix) and load it back when a later run asks for the same recipe: the same model, pack, "
    "settings and seed (another estimator on the same design trains nothing)"
)


def _states(args: argparse.Namespace, out: str | Path, models: list[str]) -> CheckpointStore | None:
    """The ``--states`` store (:func:`remnant.states.store.open_store`), or None. A folder is neither a model
    folder nor the study's output folder or inside it (that holds the study's results only)."""
    if args.states is None:
        return None
    from remnant.errors import ConfigError
    from remnant.states.remote import is_uri
    from remnant.states.store import open_store

    study, where = Path(out).resolve(), Path(args.states).resolve()
    if not is_uri(args.states) and (where == study or study in where.parents):
        raise ConfigError(
            f"--states {args.states}: is the study's output folder {out} or inside it; keep the states beside it "
            "(nothing written)",
            requirement="R23",
        )
    return open_store(args.states, option="--states", inputs={f"the model {m}": m for m in models})


@contextlib.contextmanager
def _recorded(
    args: argparse.Namespace, out: str | Path, name: str, models: list[str]
) -> Iterator[dict[str, Any]]:
    """A model study's run settings: its log, the ``--states`` store, progress, and its records file in the study
    folder, held locked for this process while the study runs and writes (R23)."""
    from remnant.studies.run_cells import recording

    states = _states(args, out, models)
    with recording(Path(out), name) as records:
        yield {"log": _log(args, name), "states": states, "progress": not args.quiet, "records": records}


def _readmission(args: argparse.Namespace) -> int:
    from remnant.errors import ConfigError
    from remnant.jsonio import read_json
    from remnant.studies.readmission import Cells, decide
    from remnant.studies.report import readmission_document

    out = Path(args.out or f"readmission-{args.estimator}")
    if not args.cells:
        _model_extra()
    overrides: dict[str, object] = {"estimator": args.estimator, "preset": args.preset}
    if args.model:
        overrides["design"] = {"models": args.model}
    cfg, reg = _registered("readmission", args, overrides, out)
    if args.cells:
        data = Cells.model_validate(read_json(Path(args.cells), requirement="R23"))
        if data.estimator != cfg.estimator:
            raise ConfigError(
                f"{args.cells}: cells of estimator {data.estimator!r}, not {cfg.estimator!r}",
                requirement="R23",
            )
    else:
        from remnant.atomic import write_atomic
        from remnant.studies.readmission_run import design_config, run_cells

        with _recorded(args, out, "readmission", list(design_config(cfg).models)) as run:
            data = run_cells(cfg, run_id=f"readmission-{reg.prereg.digest[:12]}", **run)
            write_atomic(out / "readmission-cells.json", data.model_dump_json(indent=1) + "\n")
    result = decide(data, cfg, registration=reg.to_json())
    _write(out, "readmission", result, readmission_document(result))
    print(f"{cfg.estimator}: {result.decision} (non-adjudicating, C-H6, C-H9)")
    print(out / "readmission.md")
    return 0


def _goodhart(args: argparse.Namespace) -> int:
    from remnant.studies.report import goodhart_document

    out = Path(args.out or "goodhart")
    _model_extra()
    overrides: dict[str, object] = {"audit": args.audit, "preset": args.preset, "weights": args.weights}
    overrides["seeds"] = args.seeds
    cfg, reg = _registered("goodhart", args, overrides, out)
    from remnant.studies.goodhart import run_goodhart

    with _recorded(args, out, "goodhart", [args.model]) as run:
        run_id = f"goodhart-{reg.prereg.digest[:12]}"
        result = run_goodhart(cfg, args.model, pack=args.pack, run_id=run_id, **run)
    result = result.model_copy(update={"registration": reg.to_json()})
    _write(out, "goodhart", result, goodhart_document(result))
    print(result.finding)
    print(out / "goodhart.md")
    return 0


def _deviation(args: argparse.Namespace) -> int:
    from remnant.errors import ConfigError
    from remnant.jsonio import loads_strict
    from remnant.prereg import record_deviation

    try:
        old = loads_strict(args.old, source="--old", requirement="R15")
        new = loads_strict(args.new, source="--new", requirement="R15")
    except ConfigError as exc:
        raise ConfigError(
            f"{exc} (give --old and --new as JSON, e.g. 0.8 or '\"mean\"')", requirement="R15"
        ) from None
    from remnant.cli_paths import run_folder

    run_folder(args.out, requirement="R15", option="OUT", kind="study")
    dev = record_deviation(args.out, args.field, old, new, args.reason, args.stage)
    print(f"deviation recorded: {dev.field}: {old!r} -> {new!r} ({dev.stage})")
    return 0


def _latent_probe(args: argparse.Namespace) -> int:
    """Prints the Annex-shaped table (B.6) and writes ``latent-probe.json`` (every run, every cell) and
    ``latent-probe.md``; exit 0 whatever it found (the nulls failing is a finding, not a failed check)."""
    from remnant.atomic import write_atomic
    from remnant.cli_paths import out_folder
    from remnant.jsonio import read_toml
    from remnant.studies.latent_probe import render_markdown, resolve_config, run_study

    inputs = {"the config": args.config, **{f"the model {m}": m for m in args.model or []}}
    out_folder(args.out, requirement="C-H7", kind="study", inputs=inputs)  # before the study runs, not after
    overrides: dict[str, object] = read_toml(Path(args.config)) if args.config is not None else {}
    if args.seeds:
        overrides["seeds"] = args.seeds
    if args.methods:
        overrides["methods"] = args.methods
    cfg = resolve_config(args.model or [], preset=args.preset, overrides=overrides)
    out = Path(args.out)
    with _recorded(args, args.out, "latent-probe", list(cfg.models)) as run:
        result, _ = run_study(cfg, **run)
        text = render_markdown(result)
        write_atomic(out / "latent-probe.json", result.model_dump_json(indent=1))
        write_atomic(out / "latent-probe.md", text)
    print(text)
    return 0


def _auditors(args: argparse.Namespace) -> int:
    from remnant.studies.auditor_table import AuditorSpec, run_auditors

    spec = AuditorSpec.preset(args.preset, samples=args.samples, seed=args.seed)
    _, text = run_auditors(
        args.model or [], args.pack, args.out, spec=spec, max_items=args.max_items, log=_log(args, "auditors")
    )
    print(text)
    return 0


def _add_pool_study(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_: str
) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(name, help=help_)
    p.add_argument("pool", metavar="POOL_DIR", help="sweep folder with results.parquet (or .csv) and items")
    p.add_argument("--config", help="study config (TOML; fields of the study's config, docs/studies.md)")
    p.add_argument("--out", help=f"output folder (default POOL_DIR/studies/{name})")
    p.add_argument("--seed", type=int, help="pre-registered seed every bootstrap derives from")
    p.set_defaults(handler=partial(_pool_study, name))
    return p


def add_study_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the research studies to the ``remnant study`` subcommands (``sub``: that group's subparsers)."""
    pre = sub.add_parser(
        "preregister", help="freeze a study's config into OUT/prereg.json before it runs (R14)"
    )
    pre.add_argument("kind", choices=STUDY_KINDS, help="which study")
    pre.add_argument("--config", help="study config (TOML)")
    pre.add_argument("--out", required=True, help="the study's output folder")
    pre.set_defaults(handler=_preregister)
    _add_pool_study(
        sub, "meta-eval", "faithfulness (AUC) and robustness (Q, R, HM) of every metric of a pool"
    )
    rec = _add_pool_study(
        sub, "recovery", "does a pre-attack metric predict relearning recovery (ρ, partial, items)"
    )
    rec.add_argument("--outcome", help="metric recovery is read on (default: auto)")
    rec.add_argument("--outcome-kind", choices=["revival", "shift"], help="item revival or model-level shift")
    summ = sub.add_parser(
        "summary", help="the paper table: metrics x (AUC, Q, R, HM, rho) beside the published figures"
    )
    summ.add_argument("--meta-eval", required=True, help="folder holding meta-eval.json")
    summ.add_argument("--recovery", help="folder holding recovery.json")
    summ.add_argument("--out", required=True, help="output folder for summary.md and summary.html")
    summ.set_defaults(handler=_summary)
    rd = sub.add_parser(
        "readmission", help="a latent estimator through the Standard's readmission bar (C-H9, B.4)"
    )
    rd.add_argument("estimator", choices=["direction", "uds", "j_access"], help="the estimator tested")
    rd.add_argument("--config", help="study config (TOML: rule, design, estimator_params)")
    rd.add_argument("--model", action="append", help="model folder or zoo name (repeatable)")
    rd.add_argument("--preset", choices=["tiny", "cpu"], help="design sizing preset (tiny: the test model)")
    rd.add_argument("--cells", help="decide from a readmission-cells.json instead of running the models")
    rd.add_argument("--out", help="output folder (default readmission-ESTIMATOR)")
    rd.add_argument("--states", metavar="DIR", help=STATES_HELP)
    rd.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    rd.set_defaults(handler=_readmission)
    gh = sub.add_parser(
        "goodhart", help="removal that also minimises an audit: does the score fall but not recovery"
    )
    gh.add_argument("--config", help="study config (TOML)")
    gh.add_argument("--model", required=True, help="base (never-modified) model folder or zoo name")
    gh.add_argument("--pack", help="Class D pack folder (default: minted from the config's pack settings)")
    gh.add_argument("--audit", choices=["j_access", "uds"], help="the audit optimised against")
    gh.add_argument("--preset", choices=["tiny", "cpu"], help="sizing preset")
    gh.add_argument("--weights", nargs="+", type=float, help="penalty weights λ (must include 0)")
    gh.add_argument("--seeds", nargs="+", type=int, help="removal seeds")
    gh.add_argument("--out", help="output folder (default goodhart)")
    gh.add_argument("--states", metavar="DIR", help=STATES_HELP)
    gh.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    gh.set_defaults(handler=_goodhart)
    dv = sub.add_parser("deviation", help="record a deviation from a study's frozen config (R15)")
    dv.add_argument("out", metavar="OUT", help="the study's output folder (holds prereg.json)")
    dv.add_argument("field", help="dotted config field, e.g. utility_floor or rule.margin")
    dv.add_argument("--old", required=True, help="the value in force (JSON)")
    dv.add_argument("--new", required=True, help="the new value (JSON)")
    dv.add_argument("--reason", required=True, help="why")
    dv.add_argument("--stage", required=True, help="when it was adopted")
    dv.set_defaults(handler=_deviation)


def _add_model_studies(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``latent-probe`` (Annex B's direction probe) and ``auditors`` (seed 003's black-box auditors)."""
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
    lp.add_argument("--states", metavar="DIR", help=STATES_HELP)
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


def add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the ``remnant study`` group (:data:`remnant.cli.COMMAND_MODULES`) with every study in it."""
    study = subparsers.add_parser("study", help="research studies of audit metrics (non-adjudicating)")
    sub = study.add_subparsers(dest="study_command", required=True)
    _add_model_studies(sub)
    add_study_commands(sub)


__all__ = ["STUDY_KINDS", "add_commands", "add_study_commands"]
