"""Field-metric measurements (docs/metrics.md): one cell per metric, every pending cell on a state read from one
shared pass.

:meth:`MetricSuite.cells` gives one :class:`MetricMeasurement` per computed metric (dependencies first), so each
metric is its own cell of the one cell runner (cache, ``--resume``, one record store: ``remnant eval``, a sweep's
pool). The first pending cell computed on a state runs :func:`remnant.metrics.evaluate.evaluate` once over the
whole suite and the others read its result (:class:`SharedPass` says why). Results are rebuilt from the records
(:func:`readings_from_records`). Research measurements: none adjudicates a verdict or moves a tier.

What a metric's cell writes, in this order:

- an :class:`~remnant.records.Observation` per logged item value, ``score`` = the value the aggregate averages
  (``score``; ``prob`` for the probabilities; the ``rouge_type`` field for ROUGE, with the generation as the
  excerpt), ``kappa`` null (R6: a graded value, not a κ); ``item_id`` = ``METRIC/INDEX``, ``METRIC/SIDE/INDEX``
  for a membership attack's forget and holdout sides, and ``…/J`` for the J-th of several answers;
- one :class:`~remnant.records.CellRecord` with ``metric`` = the log key and the aggregate as utility records a
  value that is not a proportion (:mod:`remnant.engine.utility`): ``k = 0`` and a nominal ``n`` (the items the
  metric read, at least 1; R19), its registered handler as ``component`` (R23), and in ``params`` what no typed
  field holds: ``agg_value`` (OpenUnlearning's name; the typed ``value`` is a utility reading's, R10),
  ``requested``, ``sources``, ``extra`` (a membership attack's per-side aggregates and AUC), the ``dtype`` the
  state was evaluated in (R25), ``notes`` and, for a suite built with ``log_digest``, ``log_sha256`` (the digest
  of the metric's evaluation-log entry, so a reused cell's entry in a log file can be checked). A metric with no
  value (forget quality without a retain model's log) is ``not_run`` with the note as its reason (R19).

A cell's key (:meth:`MetricMeasurement.key_inputs`) covers everything the metric's value depends on (R23, R24,
R25), the state's weights digest added by :func:`~remnant.engine.measurement.cell_key_of`; another metric requested
beside it leaves the key as it is.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from remnant.engine.cell import CellTarget, cell_record, observation_record
from remnant.engine.measurement import (
    Measurement,
    Record,
    State,
    StateKey,
    cell_key_of,
    loaded,
    run_measurement,
)
from remnant.errors import ConfigError
from remnant.models.dtype import dtype_name
from remnant.records import AnyRecord, CellRecord, Observation
from remnant.statement.canonical import canonical_sha256

if TYPE_CHECKING:
    from remnant.engine.runner import CellRunner
    from remnant.metrics.base import RetainLog
    from remnant.metrics.catalogue import MetricDef
    from remnant.metrics.encoding import PromptSetting
    from remnant.metrics.evallog import MetricLog
    from remnant.metrics.evaluate import EvalResult, EvalSettings, ModelLike

#: The surface field metrics' records carry: none of the Standard's (they never adjudicate).
SURFACE = "metric"
#: Observations of a greedy, deterministic evaluation carry this seed (nothing is sampled).
SEED = 0
#: Per-item fields an aggregate averages, in the order they are looked for (ROUGE's is its ``rouge_type``).
ITEM_FIELDS = ("score", "prob")


def rows_digest(rows: Sequence[Any]) -> str:
    """sha256 of a split's rows (every field, in order) as canonical JSON: changes with any row or its order.
    TOFU rows are dataclasses, MUSE rows mappings."""
    return canonical_sha256(
        [asdict(r) if is_dataclass(r) and not isinstance(r, type) else dict(r) for r in rows]
    )


def log_sha256(entry: Mapping[str, object]) -> str:
    """sha256 of one evaluation-log entry (its JSON form) as canonical JSON (the ``log_sha256`` param)."""
    return canonical_sha256(dict(entry))


def _state_digest(state: Any) -> str:
    digest = getattr(state, "digest", None)
    return str(digest if digest is not None else state.identity.digest)


@dataclass(frozen=True)
class PassReading:
    """One metric's part of a shared pass: its log entry, component spec, item sources, notes and the pass's
    seconds (the whole pass for the cell that ran it, 0 for the cells that read it)."""

    log: MetricLog
    spec: dict[str, Any]
    sources: dict[str, dict[str, object]]
    notes: list[str]
    elapsed: float


class SharedPass:
    """One :func:`~remnant.metrics.evaluate.evaluate` call per state over the whole suite, read by its pending cells.

    The pass always computes every metric of the suite, recorded or not (R23): a row's float32 scores depend on the
    rows batched and padded with it, so a pass over only the cells a resumed run still lacks would record values a
    fresh run does not. ``pending`` (narrowed by :meth:`MetricSuite.narrow`) names the cells that will read the
    result, which is kept until each has, so a model state is not held alive beyond its cells."""

    def __init__(self, suite: MetricSuite) -> None:
        self.suite = suite
        self.pending: tuple[str, ...] = suite.computed
        self._state: ModelLike | None = None
        self._result: EvalResult | None = None
        self._unread: set[str] = set()
        #: The latest pass's log entries by metric (a client writing the log reads them; no model held).
        self.logs: dict[str, MetricLog] = {}

    def read(self, state: ModelLike, metric: str) -> PassReading:
        """``metric`` on ``state``: from the pass already made on it, or from a pass over the whole suite made now."""
        from remnant.metrics.evaluate import evaluate

        elapsed = 0.0
        result = self._result
        if self._state is not state or metric not in self._unread or result is None:
            s = self.suite
            start = time.perf_counter()
            self._result = result = evaluate(
                state,
                s.data.__getitem__,
                s.computed,
                prompt=s.prompt,
                settings=s.settings,
                retain_log=s.retain_log,
                reference=s.reference,
            )
            elapsed = time.perf_counter() - start
            # only the pending cells read it (a recorded metric, or a dependency computed on the way, does not):
            # once they have, the state is let go
            readers = self.pending if metric in self.pending else (metric,)
            self._state, self._unread = state, set(result.logs) & set(readers)
            self.logs = dict(result.logs)
        self._unread.discard(metric)
        if not self._unread:  # every metric of the pass read: let the state go
            self._state = self._result = None
        return PassReading(
            log=result.logs[metric],
            spec=result.specs[metric].to_dict(),
            sources=result.sources.get(metric, {}),
            notes=[n for n in result.notes if n.startswith(f"{metric}:")],
            elapsed=elapsed,
        )


class MetricSuite:
    """Named field metrics (with their dependencies) over ``data``, one cell each (module docstring)."""

    def __init__(
        self,
        names: Sequence[str],
        data: Mapping[str, Sequence[Any]],
        prompt: PromptSetting,
        *,
        dtype: str,
        settings: EvalSettings | None = None,
        retain_log: RetainLog | None = None,
        reference: ModelLike | None = None,
        name: str = "none",
        checkpoint: str = "final",
        roles: tuple[str, ...] = ("post_removal", "control", "pre_removal"),
        log_digest: bool = False,
    ) -> None:
        from remnant.metrics.catalogue import ALIASES, with_dependencies
        from remnant.metrics.evaluate import EvalSettings, required_splits
        from remnant.metrics.rows import as_rows

        if not names:
            raise ConfigError("a metric measurement names no metric", requirement="R23")
        self.settings = settings if settings is not None else EvalSettings(progress=False)
        suite = self.settings.suite
        self.metrics = tuple(dict.fromkeys(ALIASES.get(n, n) for n in names))
        # an unknown name is refused here, before any model runs
        self.computed = tuple(d.name for d in with_dependencies(list(self.metrics), suite))
        splits = required_splits(self.metrics, self.settings)
        missing = [s for s in splits if s not in data]
        if missing:
            raise ConfigError(
                f"metrics {', '.join(self.metrics)} read split(s) {', '.join(missing)}, which the data lacks",
                requirement="R2",
            )
        tofu = suite == "tofu"  # TOFU rows become QARows; MUSE rows stay mappings, as evaluate reads them
        self.data = {s: tuple(as_rows(list(data[s]), split=s) if tofu else data[s]) for s in splits}
        # hashed once here: every cell key reads them (a pool plan computes thousands of keys)
        self.data_digests = {s: rows_digest(rows) for s, rows in self.data.items()}
        self.prompt = prompt
        self.dtype = dtype_name(dtype)
        self.retain_log = retain_log
        self.reference = reference
        self.name = name
        self.checkpoint = checkpoint
        self.roles = roles
        self.log_digest = log_digest
        self.shared = SharedPass(self)

    def cells(self) -> list[MetricMeasurement]:
        """One measurement per computed metric, dependencies first (module docstring)."""
        return [MetricMeasurement(metric, self) for metric in self.computed]

    def narrow(self, recorded: set[str], state: StateKey | None) -> list[MetricMeasurement]:
        """The cells a runner that has ``recorded`` still computes on ``state``; the shared pass runs when the first
        of them does (over the whole suite, :class:`SharedPass`)."""
        cells = [c for c in self.cells() if cell_key_of(c, state) not in recorded]
        self.expect(c.metric for c in cells)
        return cells

    def expect(self, metrics: Iterable[str]) -> None:
        """The metrics whose cells will run on the next state: the shared pass is read by those and no others (a
        resumed run records no metric twice)."""
        wanted = set(metrics)
        self.shared.pending = tuple(m for m in self.computed if m in wanted)


class MetricMeasurement(Measurement):
    """One field metric of a :class:`MetricSuite` on one state: one cell (module docstring)."""

    kind: ClassVar[str] = "metric"

    def __init__(self, metric: str, suite: MetricSuite) -> None:
        self.metric = metric
        self.suite = suite
        self.name = suite.name
        self.surface = SURFACE
        self.checkpoint = suite.checkpoint

    def roles(self) -> tuple[str, ...]:
        return self.suite.roles

    def _defs(self) -> list[MetricDef]:
        from remnant.metrics.catalogue import with_dependencies

        return with_dependencies([self.metric], self.suite.settings.suite)

    def components(self) -> dict[str, dict[str, object]]:
        """The metric's and its dependencies' registered handlers, versions and parameters (R23), by log key."""
        from remnant import registry
        from remnant.metrics.evaluate import effective_params

        s = self.suite.settings
        return {
            d.name: registry.bind("metric", d.handler, effective_params(d, s)).to_dict() for d in self._defs()
        }

    def sources(self) -> dict[str, dict[str, object]]:
        """The items the metric and its dependencies read, by log key and side (R23)."""
        s = self.suite.settings
        return {
            d.name: {
                side: src.resolve(s.forget_split, s.holdout_split, s.question_key).to_dict()
                for side, src in (("items", d.source), ("holdout", d.holdout))
                if src is not None
            }
            for d in self._defs()
        }

    def key_inputs(self) -> dict[str, object]:
        from remnant.metrics.evaluate import required_splits

        suite, defs = self.suite, self._defs()
        # the retain log and the reference model are inputs only of the metrics that read them
        retain = suite.retain_log if any(d.retain_key is not None for d in defs) else None
        reference = suite.reference if any(d.handler == "mia_reference" for d in defs) else None
        splits = required_splits([self.metric], suite.settings)
        return {
            "measurement": self.name,
            "metric": self.metric,
            "components": self.components(),
            "sources": self.sources(),
            "data": {split: suite.data_digests[split] for split in splits},
            "prompt": {"setting": type(suite.prompt).__name__, **asdict(suite.prompt)},
            "batch_size": suite.settings.batch_size,
            "dtype": suite.dtype,
            "retain_log": None if retain is None else canonical_sha256(dict(retain.data)),
            "reference": None if reference is None else _state_digest(reference),
            "checkpoint": self.checkpoint,
        }

    def label(self, role: str) -> str:
        return f"metric {self.metric} on {role}"

    def measure(self, state: State | None, target: CellTarget) -> list[Record]:
        state = loaded(state, self)
        held = dtype_name(next(state.model.parameters()).dtype)
        if held != self.suite.dtype:
            raise ValueError(
                f"the state is loaded in {held}, the measurement declares {self.suite.dtype} (R25)"
            )
        got = self.suite.shared.read(state, self.metric)
        log, spec = got.log, got.spec
        records: list[Record] = [
            observation_record(
                target,
                checkpoint=self.checkpoint,
                seed=SEED,
                item_id=f"{self.metric}/{i}",
                value=None if v is None else float(v),
                willing=None,
                output=text,
            )
            for i, v, text in _item_values(log, spec)
        ]
        params = {
            "agg_value": log.agg_value,
            "requested": self.metric in self.suite.metrics,
            "sources": got.sources,
            "extra": _extra(log.extra),
            "dtype": self.suite.dtype,
            "notes": got.notes,
        }
        if self.suite.log_digest:
            params["log_sha256"] = log_sha256(log.to_json())
        records.append(
            _aggregate_record(target, self.checkpoint, self.metric, log, spec, params, got.elapsed)
        )
        return records


def run_metrics(
    runner: CellRunner, suite: MetricSuite, state: State, *, role: str | None = None
) -> list[CellRecord]:
    """Every cell of ``suite`` on ``state`` through ``runner``: the recorded ones reused, the pending ones read
    from one shared pass. Their cell records, dependencies first."""
    suite.narrow(runner.recorded(), state)
    return [r for cell in suite.cells() for r in run_measurement(runner, cell, state, role=role)]


def _by_index_tables(log: MetricLog) -> Iterable[tuple[str, Mapping[str, Mapping[str, Any]]]]:
    """(prefix, value_by_index) of the entry and of each side it nests (a membership attack's forget, holdout)."""
    if log.value_by_index is not None:
        yield "", log.value_by_index
    for side, entry in sorted(log.extra.items()):
        if isinstance(entry, Mapping) and isinstance(entry.get("value_by_index"), Mapping):
            yield f"{side}/", entry["value_by_index"]


def _item_values(log: MetricLog, spec: Mapping[str, Any]) -> Iterable[tuple[str, float | None, str | None]]:
    """(item suffix, value, generation) of every logged item value (module docstring; ROUGE's aggregate averages
    its handler's ``rouge_type`` field)."""
    rouge_type = spec.get("params", {}).get("rouge_type")
    fields = ITEM_FIELDS if rouge_type is None else (str(rouge_type),)
    for prefix, table in _by_index_tables(log):
        for index, entry in table.items():
            key = next((f for f in fields if f in entry), None)
            if key is None:
                raise ValueError(
                    f"item {prefix}{index} logs none of {list(ITEM_FIELDS)} (fields {sorted(entry)})"
                )
            value, text = entry[key], entry.get("generation")
            if isinstance(value, list):
                texts = text if isinstance(text, list) else [text] * len(value)
                for j, (v, t) in enumerate(zip(value, texts, strict=True)):
                    yield f"{prefix}{index}/{j}", v, t
            else:
                yield f"{prefix}{index}", value, text if isinstance(text, str) else None


def _extra(extra: Mapping[str, object]) -> dict[str, object]:
    """An entry's extra fields, a nested side by its aggregate (its items are observations)."""
    return {k: (v.get("agg_value") if isinstance(v, Mapping) else v) for k, v in sorted(extra.items())}


def _aggregate_record(
    target: CellTarget,
    checkpoint: str,
    metric: str,
    log: MetricLog,
    spec: dict[str, Any],
    params: dict[str, Any],
    elapsed: float,
) -> CellRecord:
    """A metric's aggregate as a cell record: ``k = 0`` and a nominal ``n`` (module docstring), or not run."""
    ran = log.agg_value is not None
    n = sum(len(table) for _, table in _by_index_tables(log))
    return cell_record(
        target,
        metric=metric,
        k=0,
        n=max(n, 1) if ran else 0,
        checkpoint=checkpoint,
        fields={"component": spec},
        params=params,
        elapsed=elapsed,
        status="run" if ran else "not_run",
        reason=None if ran else "; ".join(params["notes"]) or f"{metric}: no item had a value",
    )


@dataclass(frozen=True)
class MetricReading:
    """One metric on one state, rebuilt from records: its aggregate, status and per-item values."""

    metric: str
    value: float | None
    status: str
    cell_key: str
    items: dict[str, float | None] = field(default_factory=dict)


def readings_from_records(
    records: Iterable[AnyRecord], *, name: str | None = None
) -> dict[str, dict[str, MetricReading]]:
    """Every field metric in ``records`` (a run's store), by state then log key; ``name`` keeps only the measurement of
    that name. A metric measured twice on one state keeps the later cell, as a resumed run's reader would."""
    listed = list(records)
    wanted = [
        r
        for r in listed
        if isinstance(r, CellRecord) and r.surface == SURFACE and (name is None or r.attack == name)
    ]
    out: dict[str, dict[str, MetricReading]] = {}
    for cell in wanted:
        prefix = f"{cell.metric}/"
        items = {
            o.item_id[len(prefix) :]: o.score
            for o in listed
            if isinstance(o, Observation)
            and o.cell_key == cell.cell_key
            and o.model_state == cell.model_state
            and o.item_id.startswith(prefix)
        }
        value = cell.params.get("agg_value")
        out.setdefault(cell.model_state, {})[cell.metric] = MetricReading(
            metric=cell.metric,
            value=None if value is None else float(value),
            status=cell.status,
            cell_key=cell.cell_key,
            items=items,
        )
    return out


__all__ = [
    "SURFACE",
    "MetricMeasurement",
    "MetricReading",
    "MetricSuite",
    "PassReading",
    "SharedPass",
    "log_sha256",
    "readings_from_records",
    "rows_digest",
    "run_metrics",
]
