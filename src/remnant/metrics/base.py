"""The metric base: what a metric reads, and its one ``compute`` (R23, R24).

A metric declares in :attr:`Metric.reads` the readings it needs; :func:`remnant.metrics.evaluate.evaluate`
produces only the readings some requested metric declares and hands each a :class:`Readings` holding what it
declared. Every metric, built-in or plugin, has the one signature ``compute(readings) -> MetricLog``. Pure: no
torch here."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from remnant.metrics.evallog import MetricLog

if TYPE_CHECKING:  # the metric modules import this one: their types are annotations only here
    from remnant.metrics.catalogue import MetricDef, ResolvedSource
    from remnant.metrics.rouge import GenerationRecord
    from remnant.metrics.scores import TokenScores


class Reads(enum.Enum):
    """A reading a metric can declare. Sides are its named metric's sources (``items``, or ``forget`` and
    ``holdout``); per side, one entry per item and, for the token readings, one per answer of the item."""

    #: The evaluated model's teacher-forced pass over each answer (:class:`TokenScores`).
    TEACHER_FORCED = "teacher_forced"
    #: The same pass with μ_t and σ²_t over the vocabulary (min-k++); implies ``TEACHER_FORCED``.
    VOCAB_STATS = "vocab_stats"
    #: A reference model's teacher-forced pass over the same token ids (``--reference``).
    REFERENCE_PASS = "reference_pass"
    #: One greedy generation per prompt, with its ground truth (:class:`GenerationRecord`).
    GENERATIONS = "generations"
    #: Per-sample gradient norms of each item's first answer.
    GRADIENT_NORMS = "gradient_norms"
    #: A retain model's evaluation log (``--retain-logs``), which may be absent.
    RETAIN_LOG = "retain_log"
    #: Other metrics' logs, by the access names of the named metric's ``pre_compute``.
    DEPENDENCIES = "dependencies"


#: Readings taken from a model pass over the named metric's items (a named metric reading one needs a source).
MODEL_READS = frozenset(
    {Reads.TEACHER_FORCED, Reads.VOCAB_STATS, Reads.REFERENCE_PASS, Reads.GENERATIONS, Reads.GRADIENT_NORMS}
)


@dataclass(frozen=True)
class RetainLog:
    """A retain model's evaluation log and where it came from (for messages)."""

    data: Mapping[str, Any]
    source: str


def _no_decoder(ids: Sequence[int]) -> str:
    raise TypeError(
        "this metric did not declare a teacher-forced reading, so it has no tokenizer to decode with"
    )


@dataclass(frozen=True)
class Readings:
    """What one named metric declared, by side. Readings it did not declare are empty."""

    metric: str
    sources: Mapping[str, ResolvedSource] = field(default_factory=dict)
    scores: Mapping[str, Sequence[Sequence[TokenScores]]] = field(default_factory=dict)
    reference: Mapping[str, Sequence[Sequence[TokenScores]]] = field(default_factory=dict)
    generations: Mapping[str, Sequence[Sequence[GenerationRecord]]] = field(default_factory=dict)
    gradient_norms: Mapping[str, Sequence[float]] = field(default_factory=dict)
    dependencies: Mapping[str, MetricLog] = field(default_factory=dict)
    retain: RetainLog | None = None
    retain_key: str | None = None
    #: The evaluated tokenizer's decoding of label ids (special tokens skipped), for text-reading metrics.
    decode: Callable[[Sequence[int]], str] = _no_decoder

    def multi(self, side: str = "items") -> bool:
        """Whether ``side``'s items have several answers each (the perturbed ones)."""
        return self.sources[side].multi


class Metric:
    """Base of every metric (registry kind ``metric``): subclass it, set :attr:`reads`, implement
    :meth:`compute`, and take parameters as constructor arguments with defaults (the spec records them, R23)."""

    #: What :meth:`compute` reads (:class:`Reads`); nothing else is computed for it.
    reads: ClassVar[frozenset[Reads]] = frozenset()
    #: The p of the per-sample gradient norms (``Reads.GRADIENT_NORMS`` only).
    gradient_p: float = 2.0
    #: Named metrics a plugin adds to a suite (``{suite: (MetricDef, ...)}``): a plugin cannot edit the catalogue.
    named_metrics: ClassVar[Mapping[str, tuple[MetricDef, ...]]] = {}

    def __init__(self) -> None:
        """No parameters: a metric with some declares them here, with defaults (registered so a log names it and
        its version)."""

    def compute(self, readings: Readings) -> MetricLog:
        """Per-item values (``value_by_index``) and/or the aggregate (``agg_value``) from ``readings``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement compute(readings)")

    def notes(self, readings: Readings) -> tuple[str, ...]:
        """Why a value is missing or defaulted (shown and recorded with the log); a null value needs one."""
        return ()


def reads_of(metric: type) -> frozenset[Reads]:
    """A metric class's declared readings, ``VOCAB_STATS`` implying ``TEACHER_FORCED``."""
    reads: frozenset[Reads] = getattr(metric, "reads", frozenset())
    return reads | {Reads.TEACHER_FORCED} if Reads.VOCAB_STATS in reads else reads


__all__ = ["MODEL_READS", "Metric", "Reads", "Readings", "RetainLog", "reads_of"]
