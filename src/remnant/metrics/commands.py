"""``remnant eval MODEL --data DATA --metrics NAME[,NAME...] --out DIR``: OpenUnlearning's TOFU or MUSE metrics
on one model, as an engine client. ``DIR`` receives OpenUnlearning's output folder — ``TOFU_EVAL.json`` (every
computed metric's log entry, their layout) and ``TOFU_SUMMARY.json`` (requested metric → ``agg_value``, as their
evaluator summarises; ``MUSE_*`` for MUSE) — plus the engine's ``records.jsonl`` (one cell per metric,
:mod:`remnant.metrics.measurement`) and ``manifest.json`` (model identity, data files and hashes, prompt format, dtype,
every metric's registered name, version, parameters and cell key, the records' chain head, notes; R23, R24, R25).
The summary is printed to stdout as JSON. ``--samples FILE.html`` also writes the generation metrics' per-item
samples (prompt, answer, generation, scores) from the log, collapsed (:mod:`remnant.metrics.samples_page`).

Run again into the same ``DIR``, every cell the records hold is reused and nothing is computed (as OpenUnlearning
skips metrics already in its log); a changed parameter recomputes that metric's cell and the cells that depend on
it, read from one shared pass over the whole suite (the values a fresh run gives); a killed run resumes. The folder is locked while it runs
(:mod:`remnant.runlock`).

The suite follows the data folder (``--suite auto``, the default): a folder holding any MUSE config folder
(``knowmem/``, ``verbmem/``, ``privleak/``, ``raw/``, ``scal/``, ``sust/`` with one of its splits) is MUSE, any
other folder TOFU. ``--suite tofu|muse`` says it outright.

Everything a user can get wrong is checked before a model is loaded: unknown metric names, a data folder without a
split some metric reads (the error names the folder, the split and the metrics), TOFU-only options on a MUSE run,
an unreadable ``--retain-logs``, ``mia_reference`` without ``--reference``, an ``--out`` that is a file, an input
or a folder remnant did not make for an evaluation. Each is one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from remnant.errors import ConfigError
from remnant.records import CellRecord, Reading

if TYPE_CHECKING:
    from remnant.formats.muse import MuseFolder
    from remnant.formats.tofu import TofuFolder
    from remnant.metrics.base import RetainLog
    from remnant.metrics.catalogue import Suite
    from remnant.metrics.encoding import PromptSetting
    from remnant.metrics.evaluate import EvalSettings
    from remnant.metrics.measurement import MetricSuite
    from remnant.models.load import ModelState

#: A split's rows as the metrics read them: TOFU's as QARows, MUSE's as mappings.
Rows = dict[str, Sequence[object]]

#: TOFU's split and question options (their ``eval.tofu`` globals) and their defaults; MUSE fixes its splits.
TOFU_OPTIONS = {"forget_split": "forget10", "holdout_split": "holdout10", "question_key": "question"}


def _suite(args: argparse.Namespace) -> Suite:
    """``--suite``, or the data folder's: MUSE when it holds a MUSE config folder with one of its splits."""
    from remnant.formats.files import check_folder
    from remnant.formats.muse import present_parts

    if args.suite != "auto":
        return cast("Suite", str(args.suite))  # argparse's choices: tofu, muse (or auto)
    return "muse" if present_parts(check_folder(args.data)) else "tofu"


def _metric_names(text: str | None, suite: Suite) -> list[str]:
    from remnant.metrics.catalogue import DEFAULTS, lookup

    names = list(DEFAULTS[suite]) if text is None else [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ConfigError("--metrics names no metric", requirement="R23")
    for name in names:
        lookup(name, suite)
    return names


def _split_files(base: Path, split: str) -> bool:
    """Whether ``split`` (``config/split`` in a MUSE folder) has files under ``base`` in some layout."""
    from remnant.formats.files import candidates, check_name

    config, _, name = split.rpartition("/")
    if config:
        check_name(config, "config")
    return bool(candidates(base / config if config else base, check_name(name, "split")))


def _check_splits(folder: str | Path, names: Sequence[str], settings: EvalSettings) -> list[str]:
    """The splits the metrics read; a missing one is a ConfigError naming the folder, the split and the metrics
    that read it (a dependency with the metric it is computed for)."""
    from remnant.formats.files import check_folder
    from remnant.metrics.catalogue import with_dependencies
    from remnant.metrics.evaluate import split_readers

    root = check_folder(folder)
    readers = split_readers(names, settings)
    for split, users in readers.items():
        if _split_files(root, split):
            continue
        hidden = set(users) - set(names)  # dependencies: name the requested metrics they are computed for
        needed_for = [n for n in names if hidden & {d.name for d in with_dependencies([n], settings.suite)}]
        suffix = f" (computed for {', '.join(needed_for)})" if needed_for else ""
        raise ConfigError(
            f"{folder}: no split {split!r} (as {split}.json, .jsonl, .parquet or a folder), which metric(s) "
            f"{', '.join(users)} read{suffix}",
            requirement="R2",
        )
    return list(readers)


def _manifest(
    args: argparse.Namespace,
    settings: EvalSettings,
    loaded: tuple[ModelState, ModelState | None],
    data: TofuFolder | MuseFolder,
    prompt: PromptSetting,
    ran: dict[str, Any],
) -> dict[str, Any]:
    """The provenance of one evaluation (R23, R24, R25), with ``ran``, the part its cells give
    (:func:`_run_cells`)."""
    from remnant import __version__

    state, ref = loaded
    tofu = {k: getattr(settings, k) for k in TOFU_OPTIONS} if settings.suite == "tofu" else {}
    return {
        "tool": "remnant eval",
        "remnant_version": __version__,
        "model": {"source": state.source, "identity": state.identity.model_dump(mode="json")},
        "reference": None
        if ref is None
        else {"source": ref.source, "identity": ref.identity.model_dump(mode="json")},
        "data": {"folder": str(data.root), **data.provenance()},
        "retain_logs": None if args.retain_logs is None else str(args.retain_logs),
        "prompt": asdict(prompt),
        "settings": {
            "suite": settings.suite,
            **tofu,
            "batch_size": args.batch_size,
            "max_new_tokens": args.max_new_tokens,
            "dtype": args.dtype,
            "device": args.device,
        },
        **ran,
    }


def _settings(args: argparse.Namespace, suite: Suite) -> EvalSettings:
    """The run's settings; TOFU's split and question options on a MUSE run are refused (MUSE fixes its splits)."""
    from remnant.metrics.evaluate import EvalSettings

    given = {k: getattr(args, k) for k in TOFU_OPTIONS if getattr(args, k) is not None}
    if suite == "muse" and given:
        flag = "--" + next(iter(given)).replace("_", "-")
        raise ConfigError(
            f"{flag} applies to TOFU folders only; {args.data} is evaluated with the MUSE suite, whose metrics "
            "read the splits their configs name",
            requirement="R23",
        )
    if args.batch_size < 1 or (args.max_new_tokens is not None and args.max_new_tokens < 1):
        raise ConfigError("--batch-size and --max-new-tokens must be at least 1", requirement="R23")
    return EvalSettings(
        **{**TOFU_OPTIONS, **given},
        batch_size=args.batch_size,
        max_new_tokens=args.max_new_tokens,
        progress=not args.no_progress,
        suite=suite,
    )


def _check_prompt(args: argparse.Namespace, names: list[str], suite: Suite) -> None:
    """In-context examples (MUSE knowmem) are laid out in OpenUnlearning's prompt format only."""
    from remnant.metrics.catalogue import with_dependencies

    if args.prompt != "remnant":
        return
    for d in with_dependencies(names, suite):
        if d.source is not None and d.source.few_shot is not None:
            raise ConfigError(
                f"metric {d.name!r} asks its questions after the in-context examples of {d.source.few_shot!r}, "
                "which only OpenUnlearning's prompt format lays out: drop --prompt remnant",
                requirement="R23",
            )


@dataclass(frozen=True)
class Evaluation:
    """One evaluation: every computed metric's log entry, the requested names in order, and the provenance
    manifest (R23, R24, R25)."""

    logs: dict[str, dict[str, Any]]
    names: tuple[str, ...]
    manifest: dict[str, Any]

    @property
    def summary(self) -> dict[str, float]:
        """``{requested metric: agg_value}``, sorted, null ones left out: the ``TOFU_SUMMARY.json`` /
        ``MUSE_SUMMARY.json`` the command writes and prints."""
        return dict(self.manifest["summary"])

    @property
    def notes(self) -> list[str]:
        return list(self.manifest["notes"])

    def log_json(self) -> str:
        """The evaluation log in their ``TOFU_EVAL.json`` / ``MUSE_EVAL.json`` layout."""
        from remnant.metrics.evallog import eval_log_json

        return eval_log_json(self.logs)


def run_eval(
    args: argparse.Namespace,
    *,
    model: ModelState | None = None,
    before_cell: Callable[[str], None] | None = None,
) -> Evaluation:
    """``remnant eval``'s evaluation of ``args``: the one path behind the command and :func:`remnant.evaluate`.
    ``args.out`` None is a temporary folder (nothing kept); ``model`` an already loaded state used instead of
    ``args.model``; ``before_cell(label)`` runs before each cell is computed (a test kills a run there)."""
    from remnant.metrics.catalogue import ALIASES
    from remnant.metrics.evaluate import RetainLog
    from remnant.models.device import check_device

    # resolved here, so a device this machine lacks is refused before the data are read and the manifest
    # records the device the metrics ran on (R24)
    args.device = check_device(args.device, where="--device")
    suite = _suite(args)
    names = list(dict.fromkeys(ALIASES.get(n, n) for n in _metric_names(args.metrics, suite)))
    settings = _settings(args, suite)
    _check_prompt(args, names, suite)
    if "mia_reference" in names and args.reference is None:
        raise ConfigError(
            "metric 'mia_reference' needs a reference model (--reference MODEL)", requirement="R23"
        )
    if args.out is not None:
        _check_out(args)
    splits = _check_splits(args.data, names, settings)  # a str: a hub dataset id too (docs/formats.md)
    retain = None
    if args.retain_logs is not None:
        from remnant.metrics.evallog import read_eval_log

        retain = RetainLog(read_eval_log(args.retain_logs), str(args.retain_logs))
    # read (and refused, when a split is empty or malformed) before the output folder is made (nothing written)
    data, rows = _read_rows(args.data, settings.suite, splits)
    checked = (names, settings, splits, retain, model, data, rows)
    if args.out is None:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="remnant-eval-") as tmp:
            return _evaluate(args, checked, Path(tmp), before_cell)
    from remnant.cli_paths import mark_output
    from remnant.runlock import held

    with held(Path(args.out), purpose="remnant eval") as _lock:
        mark_output(args.out, "eval")  # first, so a run killed at any point leaves a folder it may resume
        return _evaluate(args, checked, Path(args.out), before_cell)


def _check_out(args: argparse.Namespace) -> None:
    from remnant.cli_paths import out_file, out_folder

    # nothing the evaluation reads is replaced, nor does its folder land in its model or data folders
    inputs = {
        "the model": args.model,
        "the --data folder": args.data,
        "the --retain-logs file": args.retain_logs,
        "the --reference model": args.reference,
    }
    out = out_folder(args.out, requirement="R23", kind="eval", inputs=inputs)
    if getattr(args, "samples", None) is not None:
        samples = out_file(args.samples, requirement="R23", option="--samples", inputs=inputs)
        where = samples.resolve()
        if out.resolve() in (where, *where.parents):
            raise ConfigError(
                f"--samples {samples}: is the --out folder or inside it, which holds the evaluation's own "
                "files; name a file elsewhere (nothing written)",
                requirement="R23",
            )


def _run(args: argparse.Namespace) -> int:
    from remnant.atomic import write_atomic

    evaluation = run_eval(args)
    if getattr(args, "samples", None) is not None:
        from remnant.metrics.samples_page import samples_page

        page = samples_page(evaluation.logs, title=f"remnant eval samples: {args.model}")
        write_atomic(Path(args.samples), page)
    for note in evaluation.notes:
        print(f"remnant eval: note: {note}", file=sys.stderr)
    print(json.dumps(evaluation.summary, indent=2))
    return 0


def _read_rows(folder: str, suite: Suite, splits: list[str]) -> tuple[TofuFolder | MuseFolder, Rows]:
    """The data folder read (for provenance) and each split's rows: TOFU rows as QARows, MUSE rows as mappings
    (``config/split`` names)."""
    if suite == "muse":
        from remnant.formats.muse import read_muse

        parts = [(s.split("/", 1)[0], s.split("/", 1)[1]) for s in splits]
        muse = read_muse(folder, parts)
        return muse, {f"{c}/{n}": [r.model_dump() for r in muse.rows(c, n)] for c, n in parts}
    from remnant.formats.tofu import read_tofu
    from remnant.metrics.rows import as_rows

    tofu = read_tofu(folder, splits)
    return tofu, {split: as_rows([r.model_dump() for r in tofu.rows(split)], split=split) for split in splits}


def _evaluate(
    args: argparse.Namespace,
    checked: tuple[
        list[str], EvalSettings, list[str], RetainLog | None, ModelState | None, TofuFolder | MuseFolder, Rows
    ],
    out: Path,
    before_cell: Callable[[str], None] | None,
) -> Evaluation:
    """Load, build one cell per metric, run them into ``out`` and write the manifest (the folder is locked)."""
    from remnant.metrics.encoding import OpenUnlearningPrompt, RemnantPrompt
    from remnant.metrics.measurement import MetricSuite
    from remnant.models.load import load_model
    from remnant.run_manifest import MANIFEST_FILE

    names, settings, splits, retain, model, data, rows = checked  # as run_eval checked and read them
    loading = {"dtype": args.dtype, "device": args.device, "progress": settings.progress}
    state = model if model is not None else load_model(args.model, **loading)
    ref = None if args.reference is None else load_model(args.reference, **loading)
    prompt: PromptSetting = (
        RemnantPrompt()
        if args.prompt == "remnant"
        else OpenUnlearningPrompt.for_tokenizer(state.tokenizer, date_string=args.date_string)
    )
    suite = MetricSuite(
        names,
        rows,
        prompt,
        dtype=args.dtype,
        settings=settings,
        retain_log=retain,
        reference=ref,
        name="eval",
        roles=("post_removal",),
        log_digest=True,
    )
    logs, ran = _run_cells(suite, state, out, before_cell)
    manifest = _manifest(args, settings, (state, ref), data, prompt, ran)
    if args.dtype != "fp32":
        manifest["notes"].append(
            f"evaluated in {args.dtype}: a precision reduction (R25); log-softmax runs in fp32"
        )
    from remnant.atomic import write_atomic

    write_atomic(out / MANIFEST_FILE, json.dumps(manifest, indent=2, sort_keys=True, allow_nan=False) + "\n")
    return Evaluation(logs=logs, names=tuple(names), manifest=manifest)


def _run_cells(
    suite: MetricSuite, state: ModelState, out: Path, before_cell: Callable[[str], None] | None
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Every metric's cell through the one runner into ``out/records.jsonl``, the log and the summary rewritten after
    each (a killed run's finished cells are reused when it runs again). Returns every computed metric's log entry and
    the manifest's part the cells give: each metric's cell (R23), the records' chain head, counts, notes, summary."""
    from remnant.atomic import write_atomic
    from remnant.engine.measurement import StateView, run_measurement
    from remnant.engine.runner import CellRunner
    from remnant.metrics.evallog import eval_log_json, summarize
    from remnant.metrics.measurement import log_sha256
    from remnant.records import RECORDS_FILE, RecordStore
    from remnant.run_manifest import RecordsChain

    prefix = suite.settings.suite.upper()
    log_path, summary_path = out / f"{prefix}_EVAL.json", out / f"{prefix}_SUMMARY.json"
    old = _old_log(log_path)

    def stale(records: list[CellRecord | Reading]) -> bool:
        """A recorded cell whose entry the log lacks or holds otherwise is computed again (R23)."""
        cells = [r for r in records if isinstance(r, CellRecord)]
        want = cells[-1].params.get("log_sha256") if cells else None
        entry = old.get(cells[-1].metric) if cells else None
        return want is None or not isinstance(entry, dict) or log_sha256(entry) != want

    store = RecordStore(out / RECORDS_FILE)
    store.repair()  # a killed run's torn last write: its cell is computed again
    digest = state.identity.digest
    runner = CellRunner(store, f"eval-{digest[:12]}", before_cell=before_cell, redo=stale)
    view = StateView(role="post_removal", digest=digest, model=state.model, tokenizer=state.tokenizer)
    suite.narrow(runner.recorded(), view)
    logs: dict[str, dict[str, Any]] = {}
    cells: list[CellRecord] = []
    for cell in suite.cells():
        before = runner.computed
        record = run_measurement(runner, cell, view)[-1]
        fresh = runner.computed > before
        logs[cell.metric] = suite.shared.logs[cell.metric].to_json() if fresh else dict(old[cell.metric])
        cells.append(record)
        write_atomic(log_path, eval_log_json(logs))
        write_atomic(summary_path, eval_log_json(summarize(logs, suite.metrics)))
    return logs, {
        "run_id": runner.run_id,
        "metrics": {
            cell.metric: {
                "requested": cell.metric in suite.metrics,
                "component": cell.component,
                "sources": cell.params.get("sources", {}),
                "cell_key": cell.cell_key,
            }
            for cell in sorted(cells, key=lambda c: c.metric)
        },
        "records": RecordsChain.of(store.read_chain()[1]).model_dump(mode="json"),
        "cells": {"computed": runner.computed, "reused": runner.reused},
        "notes": [str(n) for c in cells for n in c.params.get("notes", [])],
        "summary": summarize(logs, suite.metrics),
    }


def _old_log(path: Path) -> dict[str, Any]:
    """The log a previous run left in the folder ({} if none); unreadable, it is rewritten from its cells."""
    from remnant.errors import RemnantError
    from remnant.metrics.evallog import read_eval_log

    if not path.is_file():
        return {}
    try:
        return read_eval_log(path)
    except RemnantError:
        return {}


def add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``remnant eval``."""
    p = subparsers.add_parser(
        "eval",
        help="OpenUnlearning's TOFU or MUSE metrics on one model, in their evaluation-log layout",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "model",
        help="a model folder (safetensors), a PEFT LoRA adapter folder, a .gguf file, a zoo name or a hub id "
        "(org/name); see docs/formats.md, Model arguments",
    )
    p.add_argument(
        "--data",
        required=True,
        help="a TOFU-format folder (forget10_perturbed.json, ...) or a MUSE-format folder (knowmem/, verbmem/, "
        "privleak/), or a hub dataset id (org/name); docs/formats.md",
    )
    p.add_argument(
        "--suite",
        choices=("auto", "tofu", "muse"),
        default="auto",
        help="metric suite (default auto: MUSE when --data holds a MUSE config folder, TOFU otherwise)",
    )
    p.add_argument(
        "--metrics",
        help="comma-separated metric names (their log keys, e.g. forget_truth_ratio,forget_quality,mia_min_k or "
        "forget_knowmem_ROUGE,privleak); default: the suite's default list (their tofu.yaml / muse.yaml)",
    )
    p.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="the output folder: TOFU_EVAL.json and TOFU_SUMMARY.json (MUSE_* for MUSE, their layout), "
        "records.jsonl and manifest.json; run again into it, finished metrics are reused",
    )
    p.add_argument("--retain-logs", help="a retain model's evaluation log (forget quality, privleak)")
    p.add_argument("--reference", help="a reference model for mia_reference (same tokenizer)")
    p.add_argument(
        "--batch-size", type=int, default=32, help="sequences per forward pass (default 32, theirs)"
    )
    p.add_argument(
        "--max-new-tokens",
        type=int,
        help="greedy tokens for every ROUGE metric (default: each metric's config: TOFU 200, MUSE knowmem 32, "
        "verbmem 128)",
    )
    p.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32", help="model dtype (default fp32)")
    p.add_argument("--device", default="cpu", help="auto, cpu, mps, cuda or cuda:N (default cpu)")
    p.add_argument("--forget-split", help="TOFU forget split (default forget10)")
    p.add_argument("--holdout-split", help="TOFU holdout split for the attacks (default holdout10)")
    p.add_argument(
        "--question-key",
        choices=("question", "paraphrased_question"),
        help="TOFU question field of the forget and retain metrics (default question)",
    )
    p.add_argument(
        "--prompt",
        choices=("openunlearning", "remnant"),
        default="openunlearning",
        help="prompt format: OpenUnlearning's (default; comparable with their logs) or remnant's own",
    )
    p.add_argument("--date-string", help="the chat template's date (their Llama-3.2 configs: '10 Apr 2025')")
    p.add_argument("--no-progress", action="store_true", help="no progress bars on stderr")
    p.add_argument(
        "--samples",
        metavar="FILE.html",
        help="also write the generation metrics' per-item samples (prompt, answer, generation, scores) as an "
        "HTML page, one collapsed table per metric",
    )
    p.set_defaults(handler=_run)


__all__ = ["Evaluation", "add_commands", "run_eval"]
