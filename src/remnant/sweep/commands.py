"""``remnant sweep plan|run|report|export``: pools of models, built and measured on one machine or a Ray cluster.

``plan`` trains and writes nothing; ``run`` records into ``DIR/records.jsonl``, whose one writer (the driver)
holds DIR's lock, so a second ``sweep run`` into DIR exits 2 naming it, or waits with ``--wait`` (R23), and a
rerun skips every finished cell. Exit codes: 0 done (failed or diverged models are recorded outcomes, not
errors), 2 bad input.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from remnant.runlock import FolderLock
    from remnant.sweep.prepare import Prepared


def _say(args: argparse.Namespace) -> Callable[[str], None]:
    def say(message: str) -> None:
        if not getattr(args, "quiet", False):
            print(f"[sweep] {message}", file=sys.stderr, flush=True)

    return say


def _check_cpu_options(args: argparse.Namespace) -> None:
    """``--threads`` and ``--num-cpus`` are counts of CPU threads, 1 to MAX_THREADS, refused before the spec is
    read: 0 would silently fall back to the spec's count and a negative one reaches torch or Ray (R24: the run
    records the threads it measured at)."""
    from remnant.errors import ConfigError
    from remnant.sweep.spec import MAX_THREADS

    for option, value in (("--threads", args.threads), ("--num-cpus", getattr(args, "num_cpus", None))):
        if value is not None and not 1 <= value <= MAX_THREADS:
            raise ConfigError(
                f"{option} {value}: must be a number of CPU threads from 1 to {MAX_THREADS}",
                requirement="R24",
            )


def _threads(args: argparse.Namespace, prepared: Prepared) -> int:
    if getattr(args, "threads", None) is not None:
        return int(args.threads)
    return int(prepared.spec.resources.cpus_per_task)


def _plan(args: argparse.Namespace) -> int:
    from remnant.sweep.estimate import estimate, render_plan, use_threads
    from remnant.sweep.prepare import prepare

    _check_cpu_options(args)
    prepared = prepare(args.spec)
    threads = _threads(args, prepared)
    use_threads(threads)
    models, rate = estimate(prepared)
    print(render_plan(prepared, models, rate, threads), end="")
    return 0


def _executor(args: argparse.Namespace, prepared: Any) -> Any:
    import importlib.util

    from remnant.errors import ConfigError
    from remnant.sweep.executors import LocalExecutor, RayExecutor

    res = prepared.spec.resources
    if args.executor == "ray" and importlib.util.find_spec("ray") is None:
        raise ConfigError("--executor ray needs the ray extra: pip install 'remnant[ray]'", requirement="R14")
    if args.executor == "local":
        if args.address is not None:
            raise ConfigError("--address names a Ray cluster: use it with --executor ray", requirement="R14")
        return LocalExecutor(res.retries, threads=_threads(args, prepared))
    return RayExecutor(
        res.retries,
        address=args.address,
        gpus=res.gpus_per_task,
        cpus=res.cpus_per_task,
        num_cpus=args.num_cpus,
        say=_say(args),
    )


def _run(args: argparse.Namespace) -> int:
    from remnant.runlock import held
    from remnant.sweep.prepare import check_out

    _check_cpu_options(args)
    out = Path(args.out)
    check_out(args.spec, out)  # before the lock: a folder that is refused is neither locked nor made
    with held(out, purpose="remnant sweep run", wait=args.wait, say=_say(args)) as lock:
        return _run_locked(args, out, lock)


def _run_locked(args: argparse.Namespace, out: Path, lock: FolderLock) -> int:
    """``sweep run`` holding the sweep folder's lock (R23) from the inputs to the run summary: one writer."""
    from remnant.atomic import write_atomic
    from remnant.cli_paths import mark_output
    from remnant.sweep.driver import run_sweep
    from remnant.sweep.estimate import estimate, use_threads
    from remnant.sweep.prepare import check_disk, prepare

    say = _say(args)
    prepared = prepare(args.spec, out=out, fetch=True, lock=lock)
    use_threads(_threads(args, prepared))
    models, rate = estimate(prepared)
    check_disk(prepared, sum(m.disk for m in models))
    executor = _executor(args, prepared)
    try:
        summary = run_sweep(prepared, out, executor, say=say, retry_failed=args.retry_failed, lock=lock)
    finally:
        executor.close()
    stamp = time.strftime("%Y%m%dT%H%M%S")
    result = {
        "executor": executor.name,
        "seconds": round(summary.seconds, 1),
        "cells": summary.cells,
        "done_before": summary.done_before,
        "computed": summary.computed,
        "builds": summary.builds,
        "failed_tasks": summary.failed_tasks,
        "per_model_seconds": {k: round(v, 1) for k, v in summary.per_model.items()},
        "estimate_cpu_seconds": {m.model: round(m.cpu_build + m.cpu_measure, 1) for m in models},
        "cpu_rate_gflops": round(rate / 1e9, 1),
    }
    summary_file = out / "runs" / f"run-{stamp}.json"
    write_atomic(summary_file, json.dumps(result, indent=1, sort_keys=True) + "\n", root=out)  # no link (R23)
    mark_output(out, "sweep")
    shown = ("executor", "seconds", "cells", "done_before", "computed", "builds", "failed_tasks")
    print(json.dumps({k: result[k] for k in shown}, indent=1))
    return 0


def _report(args: argparse.Namespace) -> int:
    from remnant.cli_paths import run_folder
    from remnant.sweep.report import write_report

    out = run_folder(args.dir, requirement="R23", option="DIR", kind="sweep")
    summary = write_report(out)
    for note in summary.notes:
        print(f"remnant sweep report: note: {note}", file=sys.stderr)
    shown = {k: v for k, v in dataclasses.asdict(summary).items() if k != "notes"}
    print(json.dumps(shown, indent=1))
    return 0


def _export(args: argparse.Namespace) -> int:
    from remnant.cli_paths import out_folder, run_folder
    from remnant.sweep.export import export_inputs, export_model

    sweep = run_folder(args.dir, requirement="R23", option="DIR", kind="sweep")
    # the sweep folder, its store, the base model and the pool's own folders are never the folder replaced
    out = out_folder(args.out, requirement="R23", kind="model", inputs=export_inputs(sweep))
    folder = export_model(sweep, args.model, out)
    print(f"exported {args.model} -> {folder}")
    return 0


def add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``remnant sweep plan|run|report|export``."""
    sweep = subparsers.add_parser("sweep", help="pools of models: build, measure, tabulate (local or Ray)")
    sub = sweep.add_subparsers(dest="sweep_command", required=True)
    plan = sub.add_parser("plan", help="models, cells, estimated time (CPU, GPU) and disk; runs nothing")
    plan.add_argument("spec", help="pool spec (TOML; examples/sweep-*.toml)")
    plan.add_argument("--threads", type=int, help="CPU threads to estimate at (default: cpus_per_task)")
    plan.set_defaults(handler=_plan)
    run = sub.add_parser("run", help="build what is missing and measure every pending cell")
    run.add_argument("spec", help="pool spec (TOML)")
    run.add_argument("--out", required=True, help="sweep folder (records.jsonl, plan.json; reruns resume)")
    run.add_argument(
        "--executor", choices=("local", "ray"), default="local", help="where tasks run (default local)"
    )
    run.add_argument("--address", help="Ray cluster address (with --executor ray; default: a local Ray)")
    run.add_argument("--num-cpus", type=int, help="CPUs of the local Ray started here (default: all)")
    run.add_argument("--threads", type=int, help="local executor: CPU threads (default cpus_per_task)")
    run.add_argument(
        "--retry-failed",
        action="store_true",
        help="run again the cells recorded as failed (their records stay; the new ones supersede them)",
    )
    run.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    run.add_argument(
        "--wait",
        action="store_true",
        help="when another remnant process is running into --out, wait for it to finish (default: exit 2 at "
        "once, naming it; the records are append-only and chained, so two writers never interleave, R23)",
    )
    run.set_defaults(handler=_run)
    rep = sub.add_parser("report", help="results table (Parquet, CSV), items table and report.html")
    rep.add_argument("dir", help="sweep folder")
    rep.set_defaults(handler=_report)
    exp = sub.add_parser("export", help="one pool model as a standalone safetensors model folder")
    exp.add_argument("dir", help="sweep folder")
    exp.add_argument("model", help="the model's id in the pool (plan.json; the results table's `model`)")
    exp.add_argument(
        "--out", required=True, help="a new model folder (or one an earlier export made: replaced whole)"
    )
    exp.set_defaults(handler=_export)


__all__ = ["add_commands"]
