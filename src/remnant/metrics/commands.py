"""``remnant eval MODEL --data DATA --metrics NAME[,NAME...] --out FILE.json``: OpenUnlearning's TOFU or MUSE
metrics on one model, written in their evaluation-log layout (``FILE.json``) with a provenance sidecar
(``FILE.manifest.json``: model identity, data files and hashes, prompt format, dtype, every metric's registered
name, version and parameters, notes; R23, R24, R25). The aggregates are printed to stdout as JSON (their
``TOFU_SUMMARY.json`` / ``MUSE_SUMMARY.json``). ``--samples FILE.html`` also writes the generation metrics'
per-item samples (prompt, answer, generation, scores) from the log, collapsed (:mod:`remnant.metrics.samples_page`).

The suite follows the data folder (``--suite auto``, the default): a folder holding any MUSE config folder
(``knowmem/``, ``verbmem/``, ``privleak/``, ``raw/``, ``scal/``, ``sust/`` with one of its splits) is MUSE, any
other folder TOFU. ``--suite tofu|muse`` says it outright.

Everything a user can get wrong is checked before a model is loaded: unknown metric names, a data folder without a
split some metric reads (the error names the folder, the split and the metrics), TOFU-only options on a MUSE run,
an unreadable ``--retain-logs``, ``mia_reference`` without ``--reference``. Each is one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from remnant.errors import ConfigError

#: TOFU's split and question options (their ``eval.tofu`` globals) and their defaults; MUSE fixes its splits.
TOFU_OPTIONS = {"forget_split": "forget10", "holdout_split": "holdout10", "question_key": "question"}


def _suite(args: argparse.Namespace) -> str:
    """``--suite``, or the data folder's: MUSE when it holds a MUSE config folder with one of its splits."""
    from remnant.formats.files import check_folder
    from remnant.formats.muse import present_parts

    if args.suite != "auto":
        return str(args.suite)
    return "muse" if present_parts(check_folder(args.data)) else "tofu"


def _metric_names(text: str | None, suite: Any) -> list[str]:
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


def _check_splits(folder: str | Path, names: Sequence[str], settings: Any) -> list[str]:
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


def _prompt(args: argparse.Namespace, tokenizer: Any) -> Any:
    from remnant.metrics.encoding import OpenUnlearningPrompt, RemnantPrompt

    if args.prompt == "remnant":
        return RemnantPrompt()
    return OpenUnlearningPrompt.for_tokenizer(tokenizer, date_string=args.date_string)


def _manifest_path(out: Path) -> Path:
    stem = out.name[: -len(".json")] if out.name.endswith(".json") else out.name
    return out.with_name(stem + ".manifest.json")


def _manifest(
    args: argparse.Namespace,
    names: list[str],
    settings: Any,
    loaded: tuple[Any, Any],
    data: Any,
    prompt: Any,
    result: Any,
) -> dict[str, Any]:
    from remnant import __version__

    requested = set(names)
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
        "metrics": {
            name: {
                "requested": name in requested,
                "component": spec.to_dict(),
                "sources": result.sources.get(name, {}),
            }
            for name, spec in sorted(result.specs.items())
        },
        "notes": result.notes,
        "summary": result.summary(),
    }


def _settings(args: argparse.Namespace, suite: Any) -> Any:
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


def _check_prompt(args: argparse.Namespace, names: list[str], suite: Any) -> None:
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
    """One evaluation: every computed metric (:class:`~remnant.metrics.evaluate.EvalResult`), the requested
    names in order, and the provenance manifest (R23, R24, R25)."""

    result: Any
    names: tuple[str, ...]
    manifest: dict[str, Any]

    @property
    def summary(self) -> dict[str, float | None]:
        """``{requested metric: agg_value}``, what ``remnant eval`` prints (their ``TOFU_SUMMARY.json``)."""
        return {n: self.result.logs[n].agg_value for n in self.names}

    @property
    def notes(self) -> list[str]:
        return list(self.result.notes)

    def log_json(self) -> str:
        """The evaluation log in their ``TOFU_EVAL.json`` / ``MUSE_EVAL.json`` layout."""
        from remnant.metrics.evallog import eval_log_json

        return str(eval_log_json(self.result.logs))


def run_eval(
    args: argparse.Namespace, *, model: Any = None, before_reading: Callable[[], None] | None = None
) -> Evaluation:
    """``remnant eval``'s evaluation of ``args`` (the command's options), writing nothing: the one path behind the
    command and :func:`remnant.evaluate`. ``model`` is an already loaded state (``model``, ``tokenizer``,
    ``identity``, ``source``) used instead of loading ``args.model``; ``before_reading`` runs once the options are
    checked and before any data or model is read (the command checks its output paths there)."""
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
    if before_reading is not None:
        before_reading()
    splits = _check_splits(args.data, names, settings)  # a str: a hub dataset id too (docs/formats.md)
    retain = None
    if args.retain_logs is not None:
        from remnant.metrics.evallog import read_eval_log

        retain = RetainLog(read_eval_log(args.retain_logs), str(args.retain_logs))
    return _evaluate(args, names, settings, splits, retain, model)


def _check_out(args: argparse.Namespace) -> None:
    from remnant.cli_paths import out_file

    # the log and its manifest replace none of what the evaluation reads, nor land in its model or data folders
    inputs = {
        "the model": args.model,
        "the --data folder": args.data,
        "the --retain-logs file": args.retain_logs,
        "the --reference model": args.reference,
    }
    out = out_file(_log_path(args), requirement="R23", inputs=inputs)
    out_file(_manifest_path(out), requirement="R23", option="--out's manifest", inputs=inputs)
    if getattr(args, "samples", None) is not None:
        samples = out_file(args.samples, requirement="R23", option="--samples", inputs=inputs)
        if samples.resolve() in (out.resolve(), _manifest_path(out).resolve()):
            raise ConfigError(
                f"--samples {samples}: is the log or its manifest; name another file (nothing written)",
                requirement="R23",
            )


def _log_path(args: argparse.Namespace) -> Path:
    """``--out``: the log file; written with a trailing slash (``--out eval/``) it names a folder, which receives
    the log under OpenUnlearning's name for the suite (``TOFU_EVAL.json``, ``MUSE_EVAL.json``, as their
    ``eval.py`` writes into its output folder) and its manifest beside it, never a file called ``eval`` (R23)."""
    text = str(args.out)
    if text.endswith(("/", os.sep)):
        return Path(text) / f"{_suite(args).upper()}_EVAL.json"
    return Path(text)


def _run(args: argparse.Namespace) -> int:
    from remnant.atomic import write_atomic

    evaluation = run_eval(args, before_reading=lambda: _check_out(args))
    out = _log_path(args)
    write_atomic(out, evaluation.log_json())
    manifest = json.dumps(evaluation.manifest, indent=2, sort_keys=True, allow_nan=False) + "\n"
    write_atomic(_manifest_path(out), manifest)
    if getattr(args, "samples", None) is not None:
        from remnant.metrics.samples_page import samples_page

        page = samples_page(json.loads(evaluation.log_json()), title=f"remnant eval samples: {args.model}")
        write_atomic(Path(args.samples), page)
    for note in evaluation.notes:
        print(f"remnant eval: note: {note}", file=sys.stderr)
    print(json.dumps(evaluation.summary, indent=2))
    return 0


def _read_rows(folder: str, suite: Any, splits: list[str]) -> tuple[Any, dict[str, list[Any]]]:
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
    names: list[str],
    settings: Any,
    splits: list[str],
    retain: Any,
    model: Any,
) -> Evaluation:
    from remnant.metrics.evaluate import evaluate
    from remnant.models.load import load_model

    data, rows = _read_rows(args.data, settings.suite, splits)
    loading = {"dtype": args.dtype, "device": args.device, "progress": settings.progress}
    state = model if model is not None else load_model(args.model, **loading)
    ref = None if args.reference is None else load_model(args.reference, **loading)
    prompt = _prompt(args, state.tokenizer)
    result = evaluate(
        state, rows.__getitem__, names, prompt=prompt, settings=settings, retain_log=retain, reference=ref
    )
    if args.dtype != "fp32":
        result.notes.append(
            f"evaluated in {args.dtype}: a precision reduction (R25); log-softmax runs in fp32"
        )
    manifest = _manifest(args, names, settings, (state, ref), data, prompt, result)
    return Evaluation(result=result, names=tuple(names), manifest=manifest)


def add_commands(subparsers: Any) -> None:
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
        help="the evaluation log to write (their TOFU_EVAL.json / MUSE_EVAL.json layout); ending in / it is a folder that receives TOFU_EVAL.json / MUSE_EVAL.json",
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
