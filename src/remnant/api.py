"""remnant's Python API (re-exported by :mod:`remnant`): each function is the path its command takes, with the
command's options as keyword arguments, so a notebook and the command line compute the same thing (docs/api.md).

Imports nothing heavy at module level: torch and transformers are imported when a function runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from remnant.assess.finalize import Outcome
    from remnant.metrics.commands import Evaluation


def _command_defaults(
    module: Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None], argv: list[str]
) -> argparse.Namespace:
    """The options ``argv`` gives the command that ``module`` adds (every default the command line has)."""
    parser = argparse.ArgumentParser(prog="remnant")
    module(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def _apply(args: argparse.Namespace, options: Mapping[str, object], command: str) -> argparse.Namespace:
    """Keyword arguments over the command's defaults; a name the command has no option for is a TypeError."""
    for key, value in options.items():
        if key in ("handler", "command") or not hasattr(args, key):
            accepted = sorted(k for k in vars(args) if k not in ("handler", "command"))
            raise TypeError(f"remnant {command} has no option {key!r}; accepted: {', '.join(accepted)}")
        setattr(args, key, value)
    return args


def _in_memory(pair: tuple[Any, ...]) -> Any:
    """A loaded state for a ``(transformers model, tokenizer)`` pair, identified by its weights' bytes (R23)."""
    from remnant.errors import ModelError
    from remnant.models.identity import identify_in_memory
    from remnant.models.load import ModelState

    model: Any = pair[0] if len(pair) == 2 else None
    tokenizer: Any = pair[1] if len(pair) == 2 else None
    if not callable(getattr(model, "parameters", None)) or not callable(tokenizer):
        got = ", ".join(type(p).__name__ for p in pair)
        raise ModelError(
            f"an in-memory model is a (transformers model, tokenizer) pair; got ({got})", requirement="R23"
        )
    model.eval()
    identity = identify_in_memory(model, tokenizer)
    return ModelState(model=model, tokenizer=tokenizer, identity=identity, source="in-memory")


def evaluate(
    model: str | Path | tuple[Any, Any],
    data: str | Path,
    *,
    metrics: str | list[str] | None = None,
    out: str | Path | None = None,
    **options: object,
) -> Evaluation:
    """``remnant eval``: TOFU or MUSE metrics on ``model`` (a folder, a .gguf file, a zoo name, or an in-memory
    ``(transformers model, tokenizer)`` pair) over the data folder ``data``.

    ``options`` are the command's options with underscores (``forget_split``, ``holdout_split``,
    ``question_key``, ``batch_size``, ``max_new_tokens``, ``dtype``, ``device``, ``suite``, ``retain_logs``,
    ``reference``, ``prompt``, ``date_string``, ``no_progress``); an in-memory pair is evaluated in its own dtype
    unless ``dtype`` says otherwise. ``out`` is the command's ``--out DIR`` (its files written, its finished
    metrics reused); without it the cells run in a temporary folder and nothing is kept. The result's
    ``.summary`` equals the ``TOFU_SUMMARY.json`` the command writes, ``.log_json()`` its ``TOFU_EVAL.json`` and
    ``.manifest`` its ``manifest.json``.
    """
    from remnant.metrics.commands import add_commands, run_eval

    source = "in-memory" if isinstance(model, tuple) else str(model)
    args = _command_defaults(add_commands, ["eval", source, "--data", str(data), "--out", "-"])
    args.out = None if out is None else str(out)
    args.no_progress = True
    if metrics is not None:
        args.metrics = metrics if isinstance(metrics, str) else ",".join(metrics)
    _apply(args, options, "eval")
    loaded = _in_memory(model) if isinstance(model, tuple) else None
    if loaded is not None and "dtype" not in options:
        from remnant.models.dtype import dtype_name

        args.dtype = dtype_name(str(next(loaded.model.parameters()).dtype))
    return run_eval(args, model=loaded)


def recompute(
    run: str | Path, *, reports: bool = True, expect_head: str | None = None, wait: bool = False
) -> Outcome:
    """``remnant recompute RUN``: check a run's records and rebuild everything downstream of them (R24)."""
    from remnant.assess.recompute import recompute as recompute_run

    return recompute_run(Path(run), reports=reports, expect_head=expect_head, wait=wait)


def run_sweep(spec: str | Path, out: str | Path, **options: object) -> int:
    """``remnant sweep run SPEC --out DIR``: the command itself, options as keyword arguments (``executor``,
    ``retry_failed``, ``wait``, ...); returns its exit code. The run summary is written under ``out/runs/``."""
    from remnant.sweep.commands import add_commands

    args = _command_defaults(add_commands, ["sweep", "run", str(spec), "--out", str(out)])
    _apply(args, options, "sweep run")
    return int(args.handler(args))


__all__ = ["evaluate", "recompute", "run_sweep"]
