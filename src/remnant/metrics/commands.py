"""``remnant eval MODEL --data DATA --metrics NAME[,NAME...] --out FILE.json``: OpenUnlearning's TOFU metrics on one
model, written in their evaluation-log layout (``FILE.json``) with a provenance sidecar (``FILE.manifest.json``:
model identity, data files and hashes, prompt format, dtype, every metric's registered name, version and
parameters, notes; R23, R24, R25). The aggregates are printed to stdout as JSON (their ``TOFU_SUMMARY.json``).

Everything a user can get wrong is checked before a model is loaded: unknown metric names, a data folder without a
split some metric reads (the error names both), an unreadable ``--retain-logs``, ``mia_reference`` without
``--reference``. Each is one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from remnant.errors import ConfigError


def _metric_names(text: str | None) -> list[str]:
    from remnant.metrics.catalogue import DEFAULT_TOFU, lookup

    names = list(DEFAULT_TOFU) if text is None else [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ConfigError("--metrics names no metric", requirement="R23")
    for name in names:
        lookup(name)
    return names


def _check_splits(folder: Path, names: Sequence[str], settings: Any) -> list[str]:
    """The splits the metrics read; a missing one is a ConfigError naming it and the metrics that need it."""
    from remnant.formats.files import candidates, check_folder, check_name
    from remnant.metrics.catalogue import with_dependencies
    from remnant.metrics.evaluate import required_splits

    root = check_folder(folder)
    needed = required_splits(names, settings)
    for split in needed:
        if candidates(root, check_name(split, "split")):
            continue
        users = [
            d.name
            for d in with_dependencies(list(names))
            if any(
                s is not None
                and s.resolve(settings.forget_split, settings.holdout_split, "question").split == split
                for s in (d.source, d.holdout)
            )
        ]
        raise ConfigError(
            f"{folder}: no split {split!r} (as {split}.json, .jsonl, .parquet or a folder), which metric(s) "
            f"{', '.join(users)} read",
            requirement="R2",
        )
    return needed


def _prompt(args: argparse.Namespace, tokenizer: Any) -> Any:
    from remnant.metrics.encoding import OpenUnlearningPrompt, RemnantPrompt

    if args.prompt == "remnant":
        return RemnantPrompt()
    return OpenUnlearningPrompt.for_tokenizer(tokenizer, date_string=args.date_string)


def _manifest_path(out: Path) -> Path:
    stem = out.name[: -len(".json")] if out.name.endswith(".json") else out.name
    return out.with_name(stem + ".manifest.json")


def _manifest(
    args: argparse.Namespace, names: list[str], state: Any, ref: Any, data: Any, prompt: Any, result: Any
) -> dict[str, Any]:
    from remnant import __version__

    requested = set(names)
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
            "forget_split": args.forget_split,
            "holdout_split": args.holdout_split,
            "question_key": args.question_key,
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


def _run(args: argparse.Namespace) -> int:
    from remnant.metrics.catalogue import ALIASES
    from remnant.metrics.evaluate import EvalSettings, RetainLog

    names = list(dict.fromkeys(ALIASES.get(n, n) for n in _metric_names(args.metrics)))
    settings = EvalSettings(
        forget_split=args.forget_split,
        holdout_split=args.holdout_split,
        question_key=args.question_key,
        batch_size=args.batch_size,
        max_new_tokens=args.max_new_tokens,
        progress=not args.no_progress,
    )
    if args.batch_size < 1 or args.max_new_tokens < 1:
        raise ConfigError("--batch-size and --max-new-tokens must be at least 1", requirement="R23")
    if "mia_reference" in names and args.reference is None:
        raise ConfigError(
            "metric 'mia_reference' needs a reference model (--reference MODEL)", requirement="R23"
        )
    from remnant.cli_paths import out_file

    out = out_file(args.out, requirement="R23")
    out_file(_manifest_path(out), requirement="R23", option="--out's manifest")
    splits = _check_splits(Path(args.data), names, settings)
    retain = None
    if args.retain_logs is not None:
        from remnant.metrics.evallog import read_eval_log

        retain = RetainLog(read_eval_log(args.retain_logs), str(args.retain_logs))
    return _evaluate(args, names, settings, splits, retain)


def _evaluate(
    args: argparse.Namespace, names: list[str], settings: Any, splits: list[str], retain: Any
) -> int:
    from remnant.atomic import write_atomic
    from remnant.formats.tofu import read_tofu
    from remnant.metrics.evallog import eval_log_json
    from remnant.metrics.evaluate import evaluate
    from remnant.metrics.rows import as_rows
    from remnant.models.load import load_model

    data = read_tofu(args.data, splits)
    state = load_model(args.model, dtype=args.dtype, device=args.device)
    ref = None if args.reference is None else load_model(args.reference, dtype=args.dtype, device=args.device)
    prompt = _prompt(args, state.tokenizer)
    rows = {split: as_rows([r.model_dump() for r in data.rows(split)], split=split) for split in splits}
    result = evaluate(
        state, rows.__getitem__, names, prompt=prompt, settings=settings, retain_log=retain, reference=ref
    )
    if args.dtype != "fp32":
        result.notes.append(
            f"evaluated in {args.dtype}: a precision reduction (R25); log-softmax runs in fp32"
        )
    out = Path(args.out)
    write_atomic(out, eval_log_json(result.logs))
    manifest = _manifest(args, names, state, ref, data, prompt, result)
    write_atomic(_manifest_path(out), json.dumps(manifest, indent=2, sort_keys=True, allow_nan=False) + "\n")
    for note in result.notes:
        print(f"remnant eval: note: {note}", file=sys.stderr)
    print(json.dumps({n: result.logs[n].agg_value for n in names}, indent=2))
    return 0


def add_commands(subparsers: Any) -> None:
    """Register ``remnant eval``."""
    p = subparsers.add_parser(
        "eval",
        help="OpenUnlearning's TOFU metrics on one model, in their evaluation-log layout",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", help="a local model folder (safetensors), a .gguf file or a zoo name")
    p.add_argument("--data", required=True, help="a TOFU-format folder (forget10_perturbed.json, ...)")
    p.add_argument(
        "--metrics",
        help="comma-separated metric names (their log keys, e.g. forget_truth_ratio,forget_quality,mia_min_k); "
        "default: their default TOFU suite",
    )
    p.add_argument("--out", required=True, help="the evaluation log to write (their TOFU_EVAL.json layout)")
    p.add_argument("--retain-logs", help="a retain model's evaluation log (forget quality, privleak)")
    p.add_argument("--reference", help="a reference model for mia_reference (same tokenizer)")
    p.add_argument(
        "--batch-size", type=int, default=32, help="sequences per forward pass (default 32, theirs)"
    )
    p.add_argument("--max-new-tokens", type=int, default=200, help="greedy tokens for ROUGE (default 200)")
    p.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32", help="model dtype (default fp32)")
    p.add_argument("--device", default="cpu", help="torch device (default cpu)")
    p.add_argument("--forget-split", default="forget10", help="forget split (default forget10)")
    p.add_argument(
        "--holdout-split", default="holdout10", help="holdout split for the attacks (default holdout10)"
    )
    p.add_argument(
        "--question-key",
        choices=("question", "paraphrased_question"),
        default="question",
        help="question field of the forget and retain metrics (default question)",
    )
    p.add_argument(
        "--prompt",
        choices=("openunlearning", "remnant"),
        default="openunlearning",
        help="prompt format: OpenUnlearning's (default; comparable with their logs) or remnant's own",
    )
    p.add_argument("--date-string", help="the chat template's date (their Llama-3.2 configs: '10 Apr 2025')")
    p.add_argument("--no-progress", action="store_true", help="no progress bars on stderr")
    p.set_defaults(handler=_run)


__all__ = ["add_commands"]
