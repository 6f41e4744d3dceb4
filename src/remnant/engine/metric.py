"""Field-metric measurements: a suite of the field's metrics on one state, through one shared pass.

The metrics themselves: docs/metrics.md.

A :class:`MetricMeasurement` runs named metrics of :mod:`remnant.metrics` (OpenUnlearning's definitions and log
keys: ``forget_truth_ratio``, ``forget_Q_A_ROUGE``, ``extraction_strength``, ``mia_min_k``…) on a state over
given TOFU-style rows, by calling :func:`remnant.metrics.evaluate.evaluate` — one teacher-forced pass over the
deduplicated sequences, one greedy generation per prompt — so a pool of models is evaluated through the same cell
runner as an assessment (cache, ``--resume``, one record store) and its results are rebuilt from the records
(:func:`readings_from_records`). Research measurements: none adjudicates a verdict or moves a tier.

What a cell writes, for every metric computed (requested ones and their dependencies, as ``remnant eval`` logs
them), in this order:

- an :class:`~remnant.records.Observation` per logged item value, ``score`` = the value the aggregate averages
  (``score``; ``prob`` for the probabilities; the ``rouge_type`` field for ROUGE, with the generation as the
  excerpt), ``kappa`` null (R6: a graded value, not a κ); ``item_id`` = ``METRIC/INDEX``, ``METRIC/SIDE/INDEX``
  for a membership attack's forget and holdout sides, and ``…/J`` for the J-th of several answers;
- one :class:`~remnant.records.CellRecord` with ``metric`` = the log key and the aggregate as utility records a
  value that is not a proportion (:mod:`remnant.engine.utility`): ``k = 0`` and a nominal ``n`` (the items the
  metric read, at least 1; R19), its registered handler as ``component`` (R23), and in ``params`` what no typed
  field holds: ``agg_value`` (OpenUnlearning's name; the typed ``value`` is a utility reading's, R10),
  ``requested``, ``sources``, ``extra`` (a membership attack's per-side aggregates and AUC), the ``dtype`` the
  state was evaluated in (R25) and ``notes``. A metric with no value (forget quality without a retain model's
  log) is ``not_run`` with the note as its reason (R19: it counts nothing).

The key (:meth:`MetricMeasurement.key_inputs`) covers every computed metric's registered name, version and
parameters, the sources they read, a digest of each split's rows (content and order), the prompt setting, the run
settings, the declared dtype (a state loaded in another is refused), and the retain log and the reference model
where a computed metric reads them (R23, R24, R25).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from remnant.engine.cell import CellTarget, cell_record, observation_record
from remnant.engine.measurement import Measurement, Record
from remnant.errors import ConfigError
from remnant.records import CellRecord, Observation

#: The surface field metrics' records carry: none of the Standard's (they never adjudicate).
SURFACE = "metric"
#: Observations of a greedy, deterministic evaluation carry this seed (nothing is sampled).
SEED = 0
#: Per-item fields an aggregate averages, in the order they are looked for (ROUGE's is its ``rouge_type``).
ITEM_FIELDS = ("score", "prob")
#: Declared dtypes by torch name (``remnant eval --dtype`` spellings are kept as they are).
DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def rows_digest(rows: Sequence[Any]) -> str:
    """sha256 of a split's rows (every field, in order) as canonical JSON: changes with any row or its order."""
    from remnant.statement.canonical import canonical_json

    return hashlib.sha256(canonical_json([asdict(r) for r in rows])).hexdigest()


def _state_digest(state: Any) -> str:
    digest = getattr(state, "digest", None)
    return str(digest if digest is not None else state.identity.digest)


def _dtype_name(dtype: str) -> str:
    name = str(dtype).removeprefix("torch.")
    return DTYPES.get(name, name)


class MetricMeasurement(Measurement):
    """Named field metrics (with their dependencies) on one state over ``data`` (module docstring)."""

    kind: ClassVar[str] = "metric"

    def __init__(
        self,
        names: Sequence[str],
        data: Mapping[str, Sequence[Any]],
        prompt: Any,
        *,
        dtype: str,
        settings: Any | None = None,
        retain_log: Any | None = None,
        reference: Any | None = None,
        name: str = "none",
        checkpoint: str = "final",
        roles: tuple[str, ...] = ("post_removal", "control", "pre_removal"),
    ) -> None:
        from remnant.metrics.catalogue import ALIASES, lookup
        from remnant.metrics.evaluate import EvalSettings, required_splits
        from remnant.metrics.rows import as_rows

        if not names:
            raise ConfigError("a metric measurement names no metric", requirement="R23")
        self.metrics = tuple(dict.fromkeys(ALIASES.get(n, n) for n in names))
        for metric in self.metrics:
            lookup(metric)  # an unknown name is refused before any model runs
        self.settings = settings if settings is not None else EvalSettings(progress=False)
        splits = required_splits(self.metrics, self.settings)
        missing = [s for s in splits if s not in data]
        if missing:
            raise ConfigError(
                f"metrics {', '.join(self.metrics)} read split(s) {', '.join(missing)}, which the data lacks",
                requirement="R2",
            )
        self.data = {s: tuple(as_rows(list(data[s]), split=s)) for s in splits}
        self.prompt = prompt
        self.dtype = _dtype_name(dtype)
        self.retain_log = retain_log
        self.reference = reference
        self.name = name
        self.surface = SURFACE
        self.checkpoint = checkpoint
        self._roles = roles

    def roles(self) -> tuple[str, ...]:
        return self._roles

    def components(self) -> dict[str, dict[str, Any]]:
        """Every computed metric's registered handler, version and parameters (R23), by log key."""
        from remnant import registry
        from remnant.metrics.catalogue import with_dependencies
        from remnant.metrics.evaluate import effective_params

        return {
            d.name: registry.bind("metric", d.handler, effective_params(d, self.settings)).to_dict()
            for d in with_dependencies(list(self.metrics))
        }

    def key_inputs(self) -> dict[str, Any]:
        from remnant.metrics.catalogue import with_dependencies
        from remnant.statement.canonical import canonical_json

        s = self.settings
        defs = with_dependencies(list(self.metrics))
        sources = {
            d.name: {
                side: src.resolve(s.forget_split, s.holdout_split, s.question_key).to_dict()
                for side, src in (("items", d.source), ("holdout", d.holdout))
                if src is not None
            }
            for d in defs
        }
        # the retain log and the reference model are inputs only of the metrics that read them
        retain = self.retain_log if any(d.retain_key is not None for d in defs) else None
        reference = self.reference if any(d.handler == "mia_reference" for d in defs) else None
        return {
            "measurement": self.name,
            "metrics": sorted(self.metrics),
            "components": self.components(),
            "sources": sources,
            "data": {split: rows_digest(rows) for split, rows in sorted(self.data.items())},
            "prompt": {"setting": type(self.prompt).__name__, **asdict(self.prompt)},
            "settings": {
                "forget_split": s.forget_split,
                "holdout_split": s.holdout_split,
                "question_key": s.question_key,
                "batch_size": s.batch_size,
                "max_new_tokens": s.max_new_tokens,
            },
            "dtype": self.dtype,
            "retain_log": None
            if retain is None
            else hashlib.sha256(canonical_json(dict(retain.data))).hexdigest(),
            "reference": None if reference is None else _state_digest(reference),
            "checkpoint": self.checkpoint,
        }

    def label(self, role: str) -> str:
        return f"metrics {','.join(self.metrics)} on {role}"

    def measure(self, state: Any, target: CellTarget) -> list[Record]:
        from remnant.metrics.evaluate import evaluate

        loaded = _dtype_name(str(next(state.model.parameters()).dtype))
        if loaded != self.dtype:
            raise ValueError(f"the state is loaded in {loaded}, the measurement declares {self.dtype} (R25)")
        start = time.perf_counter()
        result = evaluate(
            state,
            self.data.__getitem__,
            self.metrics,
            prompt=self.prompt,
            settings=self.settings,
            retain_log=self.retain_log,
            reference=self.reference,
        )
        elapsed = time.perf_counter() - start
        records: list[Record] = []
        for metric, log in result.logs.items():
            spec = result.specs[metric].to_dict()
            items = list(_item_values(log, _item_field(spec)))
            records += [
                observation_record(
                    target,
                    checkpoint=self.checkpoint,
                    seed=SEED,
                    item_id=f"{metric}/{i}",
                    value=None if v is None else float(v),
                    willing=None,
                    output=text,
                )
                for i, v, text in items
            ]
            notes = [n for n in result.notes if n.startswith(f"{metric}:")]
            params = {
                "agg_value": log.agg_value,
                "requested": metric in self.metrics,
                "sources": result.sources.get(metric, {}),
                "extra": _extra(log.extra),
                "dtype": self.dtype,
                "notes": notes,
            }
            records.append(_aggregate_record(target, self.checkpoint, metric, log, spec, params, elapsed))
        return records


def _item_field(spec: Mapping[str, Any]) -> str | None:
    """The per-item field ROUGE's aggregate averages (its ``rouge_type``); None for every other handler."""
    rouge_type = spec.get("params", {}).get("rouge_type")
    return str(rouge_type) if rouge_type is not None else None


def _by_index_tables(log: Any) -> Iterable[tuple[str, Mapping[str, Mapping[str, Any]]]]:
    """(prefix, value_by_index) of the entry and of each side it nests (a membership attack's forget, holdout)."""
    if log.value_by_index is not None:
        yield "", log.value_by_index
    for side, entry in sorted(log.extra.items()):
        if isinstance(entry, Mapping) and isinstance(entry.get("value_by_index"), Mapping):
            yield f"{side}/", entry["value_by_index"]


def _item_values(log: Any, rouge_field: str | None) -> Iterable[tuple[str, float | None, str | None]]:
    """(item suffix, value, generation) of every logged item value (module docstring)."""
    for prefix, table in _by_index_tables(log):
        for index, entry in table.items():
            key = (
                rouge_field if rouge_field is not None else next((f for f in ITEM_FIELDS if f in entry), None)
            )
            if key is None or key not in entry:
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


def _extra(extra: Mapping[str, Any]) -> dict[str, Any]:
    """An entry's extra fields, a nested side by its aggregate (its items are observations)."""
    return {k: (v.get("agg_value") if isinstance(v, Mapping) else v) for k, v in sorted(extra.items())}


def _aggregate_record(
    target: CellTarget,
    checkpoint: str,
    metric: str,
    log: Any,
    spec: dict[str, Any],
    params: dict[str, Any],
    elapsed: float,
) -> CellRecord:
    """A metric's aggregate as a cell record: ``k = 0`` and a nominal ``n`` (module docstring), or not run."""
    if log.agg_value is None:
        reason = "; ".join(params["notes"]) or f"{metric}: no item had a value"
        return cell_record(
            target,
            metric=metric,
            checkpoint=checkpoint,
            fields={"component": spec},
            params=params,
            elapsed=elapsed,
            status="not_run",
            reason=reason,
        )
    n = sum(len(table) for _, table in _by_index_tables(log))
    return cell_record(
        target,
        metric=metric,
        k=0,
        n=max(n, 1),
        checkpoint=checkpoint,
        fields={"component": spec},
        params=params,
        elapsed=elapsed,
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
    records: Iterable[Any], *, name: str | None = None
) -> dict[str, dict[str, MetricReading]]:
    """Every field metric in ``records`` (a run's store), by state then log key (the results of a pool).

    ``name`` keeps only the measurement of that name. A metric measured twice on one state (two cells) keeps the
    later cell, as a resumed run's reader would."""
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


__all__ = ["SURFACE", "MetricMeasurement", "MetricReading", "readings_from_records", "rows_digest"]
