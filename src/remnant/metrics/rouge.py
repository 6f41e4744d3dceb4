"""ROUGE on greedy generations (``*_Q_A_ROUGE``, MUSE ``*_knowmem_ROUGE`` / ``forget_verbmem_ROUGE``): their
``rouge`` handler over ``eval_text_similarity`` (docs/metrics.md). Per item, stemmed ROUGE-1/ROUGE-L of the
generation against the ground truth, logged with the texts; TOFU reports ``rougeL_recall``, MUSE ``rougeL_f1``.
One greedy generation serves all of an item's ground truths (theirs makes it once per ground truth, identically
under greedy decoding); the aggregate is the mean over items of the mean over an item's ground truths."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from remnant.errors import ConfigError
from remnant.metrics.base import Metric, Readings, Reads
from remnant.metrics.evallog import MetricLog
from remnant.registry import register

ROUGE_TYPES = ("rougeL_recall", "rougeL_f1", "rouge1_recall")


def _checked(rouge_type: str) -> str:
    if rouge_type not in ROUGE_TYPES:
        raise ConfigError(f"rouge_type {rouge_type!r} is not one of {list(ROUGE_TYPES)}", requirement="R23")
    return rouge_type


@dataclass(frozen=True)
class GenerationRecord:
    """One ground truth and one generation for the same prompt."""

    input: str
    ground_truth: str
    generation: str


def _scorer() -> Any:
    import logging

    from rouge_score import rouge_scorer  # type: ignore[import-untyped]

    # rouge_score logs an absl INFO line per scorer; theirs silences it the same way.
    logging.getLogger("absl").setLevel(logging.WARNING)
    return rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=True)


def rouge_fields(scorer: Any, record: GenerationRecord) -> dict[str, Any]:
    """The logged fields of one ground truth / generation pair."""
    s = scorer.score(record.ground_truth, record.generation)
    return {
        "rouge1_recall": float(s["rouge1"].recall),
        "rougeL_f1": float(s["rougeL"].fmeasure),
        "rougeL_recall": float(s["rougeL"].recall),
        "input": record.input,
        "ground_truth": record.ground_truth,
        "generation": record.generation,
    }


def rouge_log(items: Sequence[Sequence[GenerationRecord]], *, rouge_type: str, multi: bool) -> MetricLog:
    """The ``rouge`` entry; ``multi`` logs lists (several ground truths per item)."""
    _checked(rouge_type)
    scorer = _scorer()
    by_index: dict[str, dict[str, Any]] = {}
    means = []
    for i, records in enumerate(items):
        fields = [rouge_fields(scorer, r) for r in records]
        if multi:
            by_index[str(i)] = {key: [f[key] for f in fields] for key in fields[0]}
        else:
            by_index[str(i)] = fields[0]
        means.append(float(np.mean([f[rouge_type] for f in fields])))
    return MetricLog(agg_value=float(np.mean(means)) if means else None, value_by_index=by_index)


@register("metric", "rouge", "1")
class Rouge(Metric):
    """Stemmed ROUGE of the greedy generation against the ground truth (TOFU: ROUGE-L recall, 200 new tokens)."""

    reads = frozenset({Reads.GENERATIONS})

    def __init__(
        self, rouge_type: str = "rougeL_recall", max_new_tokens: int = 200, stopwords: tuple[str, ...] = ()
    ) -> None:
        self.rouge_type = _checked(rouge_type)
        if max_new_tokens < 1:
            raise ConfigError("rouge: max_new_tokens must be at least 1", requirement="R23")
        self.max_new_tokens = max_new_tokens
        self.stopwords = tuple(stopwords)

    def compute(self, readings: Readings) -> MetricLog:
        return rouge_log(readings.generations["items"], rouge_type=self.rouge_type, multi=readings.multi())


__all__ = ["ROUGE_TYPES", "GenerationRecord", "Rouge", "rouge_fields", "rouge_log"]
