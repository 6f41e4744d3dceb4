"""OpenUnlearning's evaluation-log layout (their ``TOFU_EVAL.json`` and ``TOFU_SUMMARY.json``; docs/metrics.md, "The
log layout"; §3), written and read. Top-level keys are sorted, as theirs are; a metric computed as another's
dependency is logged under its own name too. The reader is strict (:mod:`remnant.jsonio`: duplicate keys, NaN and
Infinity refused), as a retain model's published log feeds forget quality and privleak."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from remnant.errors import ConfigError

#: The Standard's requirement an evaluation log's provenance is about (every parameter recorded, R23/R24).
REQUIREMENT = "R23"


@dataclass(frozen=True)
class MetricLog:
    """One metric's entry: its aggregate, its per-item values (or ``None``), and any extra top-level fields."""

    agg_value: float | None
    value_by_index: Mapping[str, Mapping[str, Any]] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = dict(self.extra)
        out["agg_value"] = self.agg_value
        if self.value_by_index is not None:
            out["value_by_index"] = {k: dict(v) for k, v in self.value_by_index.items()}
        return out


def _check_finite(value: object, where: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(
            f"{where}: non-finite value {value!r} cannot be written as JSON", requirement=REQUIREMENT
        )
    if isinstance(value, Mapping):
        for k, v in value.items():
            _check_finite(v, f"{where}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _check_finite(v, f"{where}[{i}]")


def eval_log_json(body: Mapping[str, object]) -> str:
    """A log (metric → entry, :meth:`MetricLog.to_json`) or a summary (metric → ``agg_value``) as their evaluator
    writes it (``Evaluator.save_logs``): top-level keys sorted, four-space indent; and a final newline."""
    _check_finite(body, "evaluation log")
    return json.dumps({name: body[name] for name in sorted(body)}, indent=4, allow_nan=False) + "\n"


def summarize(logs: Mapping[str, Mapping[str, Any]], names: Sequence[str]) -> dict[str, float]:
    """Their ``TOFU_SUMMARY.json`` (``Evaluator.summarize``): each requested metric's ``agg_value``, a null one
    left out; while a run is under way, the metrics logged so far (their evaluator rewrites it after each one)."""
    aggs = {name: logs[name].get("agg_value") for name in names if name in logs}
    return {name: float(value) for name, value in sorted(aggs.items()) if value is not None}


def read_eval_log(path: str | Path) -> dict[str, Any]:
    """A log in their layout, read strictly; a top level that is not an object is a ConfigError."""
    from remnant.jsonio import read_json

    data = read_json(path, requirement=REQUIREMENT)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: an evaluation log is a JSON object of metrics", requirement=REQUIREMENT)
    return data


def _entry(log: Mapping[str, object], metric: str, source: str) -> dict[str, object] | None:
    """``metric``'s entry, checked only when read (a log may hold entries remnant never reads)."""
    entry = log.get(metric)
    if entry is None:
        return None
    if not isinstance(entry, dict):
        raise ConfigError(f"{source}: metric {metric!r} is not an object", requirement=REQUIREMENT)
    return entry


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where}: expected a number, found {value!r}", requirement=REQUIREMENT)
    return float(value)


def per_item_scores(log: Mapping[str, object], metric: str, *, source: str) -> list[float] | None:
    """``metric``'s per-item ``score`` values in the log's order (e.g. a retain model's ``forget_truth_ratio``);
    ``None`` when the log has no such metric. A malformed entry is a ConfigError naming ``source``."""
    entry = _entry(log, metric, source)
    if entry is None:
        return None
    by_index = entry.get("value_by_index")
    if not isinstance(by_index, dict) or not by_index:
        raise ConfigError(
            f"{source}: {metric}.value_by_index must be a non-empty object", requirement=REQUIREMENT
        )
    scores = []
    for idx, item in by_index.items():
        if not isinstance(item, dict) or "score" not in item:
            raise ConfigError(
                f"{source}: {metric}.value_by_index[{idx!r}] has no 'score'", requirement=REQUIREMENT
            )
        scores.append(_number(item["score"], f"{source}: {metric}.value_by_index[{idx!r}].score"))
    return scores


def aggregate(log: Mapping[str, object], metric: str, *, source: str) -> float | None:
    """``metric``'s ``agg_value`` (e.g. a retain model's ``mia_min_k`` AUC); ``None`` when absent or null."""
    entry = _entry(log, metric, source)
    if entry is None or entry.get("agg_value") is None:
        return None
    return _number(entry["agg_value"], f"{source}: {metric}.agg_value")


__all__ = ["MetricLog", "aggregate", "eval_log_json", "per_item_scores", "read_eval_log", "summarize"]
