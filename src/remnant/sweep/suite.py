"""The measurement suite every model of a pool gets, as engine measurements (docs/sweep.md; R23).

From the spec's ``[suite]`` and the pack, :func:`suite_measurements` makes the same list for every model and
perturbation, each an engine :class:`~remnant.engine.measurement.Measurement`:

- ``metrics``: the named field metrics in one :class:`~remnant.engine.metric.MetricMeasurement` (one shared pass),
  over the pack's TOFU rows (``pack_to_tofu``: forget = the removal split, ``forget_perturbed`` = P with the
  truth-ratio answers, holdout = the never-installed controls), restricted to the installed attributes;
- ``kappa``: the unattacked baseline on P (:class:`~remnant.engine.attack.AttackMeasurement`): κ and w (R6);
- ``utility``: retain κ (:class:`~remnant.engine.utility.UtilityMeasurement`, R10) unless the utility is a field
  metric (``model_utility``), which then rides in ``metrics``;
- one :class:`AuditMeasurement` per audit (``uds``…; C-H7: against the pool's full and retain references);
- one :class:`~remnant.engine.attack.AttackMeasurement` per attack.

:class:`PoolMeasurement` wraps each for one model and perturbation: the model id and perturbation join the cell
key (two models with equal weights still get a row each) and every cell record carries them in
``params["pool"]``, so the results table is rebuilt from the records alone. A measurement that raises is a
*failed* cell with its error, never a stopped sweep. On the driver the same measurements are built without
models (``runtime=None``), for the cell keys alone.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

from remnant.engine.cell import CellFields, CellTarget, cell_record, status_record
from remnant.engine.measurement import Measurement, Record
from remnant.records import CellRecord, Observation

#: Where a TOFU view of the pack is written (under the sweep folder) and read back from.
FORGET, RETAIN, HOLDOUT = "forget", "retain", "holdout"


@dataclass(frozen=True)
class SuiteData:
    """The inputs every measurement shares, derived from the pack (pure)."""

    rows: dict[str, Any]
    probes: tuple[Any, ...]
    retain_probes: tuple[Any, ...]
    examples: tuple[Any, ...]
    pack_digest: str
    system_prompt: str | None


def attribute_view(pack: Any, attributes: Sequence[str] | None) -> Any:
    """``pack`` with only the items of ``attributes`` (general items kept): what the suite scores."""
    from remnant.packs.schema import Pack

    if attributes is None:
        return pack
    keep = {it.id for it in pack.items if it.attribute is None or it.attribute in attributes}
    splits = {name: [i for i in ids if i in keep] for name, ids in pack.manifest.splits.items()}
    return Pack(
        pack.manifest.model_copy(update={"splits": splits}), tuple(it for it in pack.items if it.id in keep)
    )


def write_tofu_view(pack: Any, attributes: Sequence[str] | None, tofu_dir: Path) -> None:
    """Write the TOFU view of ``pack`` (its installed attributes) that every task reads (driver only)."""
    from remnant.formats.export import pack_to_tofu

    pack_to_tofu(attribute_view(pack, attributes), tofu_dir, forget=FORGET, retain=RETAIN, holdout=HOLDOUT)


def suite_data(
    pack: Any,
    attributes: Sequence[str] | None,
    system_prompt: str | None,
    tofu_dir: Path,
    max_items: int | None,
) -> SuiteData:
    """Rows (read from the TOFU view in ``tofu_dir``), probes and UDS examples of ``pack``'s attributes."""
    from remnant.formats.tofu import read_tofu
    from remnant.latent.inputs import examples_from_items
    from remnant.metrics.rows import as_rows
    from remnant.score.probe import probes_from_pack

    view = attribute_view(pack, attributes)
    splits = sorted(p.stem for p in Path(tofu_dir).glob("*.json"))  # the files write_tofu_view wrote
    data = read_tofu(tofu_dir, splits)
    cap = max_items or None
    rows = {s: as_rows([r.model_dump() for r in data.rows(s)][:cap], split=s) for s in splits}
    kinds = {it.id: it.kind for it in view.items}
    probes = tuple(p for p in probes_from_pack(view, "probe") if kinds[p.item_id] == "fact")[:cap]
    retain = tuple(p for p in probes_from_pack(view, "retain") if kinds[p.item_id] == "fact")[:cap]
    forget = {e.id for e in view.manifest.entities if e.role in ("forget_probe", "forget_relearn")}
    items = [it for it in view.split("install") if it.entity_id in forget and it.kind == "fact"]
    examples = tuple(examples_from_items(items))[:cap]
    return SuiteData(rows, probes, retain, examples, pack.digest, system_prompt)


class AuditMeasurement(Measurement):
    """A UDS-family audit of one state against the pool's full and retain references (C-H7; non-adjudicating)."""

    kind: ClassVar[str] = "audit"

    def __init__(
        self, name: str, params: dict[str, Any], data: SuiteData, refs: dict[str, str], runtime: Any
    ) -> None:
        from remnant import registry

        self.name = name
        self.surface = "latent"
        self.component = registry.bind("audit", name, params).to_dict()
        self.examples = data.examples
        self.refs = dict(refs)
        self.runtime = runtime
        self._system_prompt = data.system_prompt

    def roles(self) -> tuple[str, ...]:
        return ("none",)

    def key_inputs(self) -> dict[str, Any]:
        from remnant.sweep.pool import digest

        return {
            "audit": self.component,
            "examples": digest([asdict(e) for e in self.examples]),
            "references": self.refs,
            "system_prompt": self._system_prompt,
        }

    def measure(self, state: Any, target: CellTarget) -> list[Record]:
        from remnant import registry

        rt = self.runtime
        audit = registry.create("audit", self.name, self.component["params"])
        start = time.perf_counter()
        if self.name == "uds_no_retain":
            result = audit.run_no_retain(rt.full, state.model, state.tokenizer, list(self.examples))
        else:
            result = audit.run(
                rt.full, rt.retain, state.model, state.tokenizer, list(self.examples), cache_dir=rt.cache_dir
            )
        elapsed = time.perf_counter() - start
        out: list[Record] = [
            Observation(
                run_id=target.run_id,
                cell_key=target.key,
                model_state=target.state,
                attack=target.attack,
                surface=target.surface,
                item_id=f"{self.name}/{ex.idx}",
                checkpoint="final",
                score=ex.uds,
                seed=0,
            )
            for ex in result.examples
        ]
        params = {"n_scored": result.n_scored, "coverage": result.coverage, "layers": result.layers}
        if result.score is None:
            fields: CellFields = {"component": self.component}
            reason = "no example had a knowledge-encoding layer (Δ1 > τ)"
            out.append(status_record(target, status="not_run", reason=reason, fields=fields))
        else:
            fields = {"component": self.component, "value": float(result.score)}
            n = max(result.n_scored, 1)
            out.append(
                cell_record(
                    target,
                    metric=self.name,
                    k=0,
                    n=n,
                    checkpoint="final",
                    fields=fields,
                    params=params,
                    elapsed=elapsed,
                )
            )
        return out


@dataclass
class Runtime:
    """What measuring needs in a worker: the tokenizer, prompt format, audit references and cache folder."""

    tokenizer: Any
    fmt: Any
    full: Any = None
    retain: Any = None
    cache_dir: Any = None


def _inputs(suite: Any, data: SuiteData) -> dict[str, Any]:
    from remnant.score.normalise import NORMALISATION_VERSION
    from remnant.score.scorer import SCORER_VERSION
    from remnant.sweep.pool import digest

    return {
        "pack": data.pack_digest,
        "system_prompt": data.system_prompt,
        "scorer": SCORER_VERSION,
        "normalisation": NORMALISATION_VERSION,
        "max_new_tokens": suite.max_new_tokens,
        "probes": digest([p.item_id for p in data.probes]),
        "retain": digest([p.item_id for p in data.retain_probes]),
    }


def _metrics(suite: Any, data: SuiteData, dtype: str) -> Measurement | None:
    from remnant.engine.metric import MetricMeasurement
    from remnant.metrics.encoding import RemnantPrompt
    from remnant.metrics.evaluate import EvalSettings

    names = list(suite.metrics)
    if suite.utility != "retain_kappa" and suite.utility not in names:
        names.append(suite.utility)
    if not names:
        return None
    settings = EvalSettings(
        forget_split=FORGET,
        holdout_split=HOLDOUT,
        batch_size=suite.batch_size,
        max_new_tokens=suite.max_new_tokens,
        progress=False,
    )
    prompt = RemnantPrompt(system_prompt=data.system_prompt)
    return MetricMeasurement(
        names, data.rows, prompt, dtype=dtype, settings=settings, name="metrics", roles=("none",)
    )


def suite_measurements(
    suite: Any, data: SuiteData, refs: dict[str, str], dtype: str, runtime: Runtime | None = None
) -> list[tuple[str, Measurement]]:
    """The suite's measurements, each with its entry name (module docstring); ``runtime`` None on the driver."""
    from remnant import registry
    from remnant.attacks.base import AttackContext
    from remnant.engine.attack import AttackMeasurement
    from remnant.engine.utility import UtilityMeasurement
    from remnant.errors import ConfigError

    inputs = _inputs(suite, data)
    # on the driver the context has no model: only what the cell keys hash (seed, budgets, demonstrations)
    fmt: Any = None if runtime is None else runtime.fmt
    ctx = AttackContext(
        model=None,
        tokenizer=None if runtime is None else runtime.tokenizer,
        fmt=fmt,
        seed=0,
        demonstrations=data.retain_probes,
        max_new_tokens=suite.max_new_tokens,
        batch_size=suite.batch_size,
    )
    out: list[tuple[str, Measurement]] = []
    metrics = _metrics(suite, data, dtype)
    if metrics is not None:
        out.append(("metrics", metrics))
    if (suite.kappa or suite.attacks) and not data.probes:
        raise ConfigError("the pack has no probe items (P) for the suite's attributes", requirement="R16")
    if suite.kappa:
        out.append(("kappa", AttackMeasurement("none", None, ctx, data.probes, inputs, roles=("none",))))
    if suite.utility == "retain_kappa":
        if not data.retain_probes:
            raise ConfigError(
                "utility retain_kappa: the pack has no retain items to score", requirement="R10"
            )
        metric = registry.create(
            "utility",
            "retain_kappa",
            {"max_new_tokens": suite.max_new_tokens, "batch_size": suite.batch_size},
        )
        fmt = runtime.fmt if runtime is not None else None
        out.append(
            (
                "utility",
                UtilityMeasurement(
                    "retain_kappa",
                    metric,
                    fmt,
                    data.retain_probes,
                    inputs,
                    attack="utility",
                    checkpoint="final",
                    roles=("none",),
                ),
            )
        )
    for name in suite.audits:
        out.append((name, AuditMeasurement(name, suite.audit_params.get(name, {}), data, refs, runtime)))
    for name in suite.attacks:
        attack = registry.create("attack", name, suite.attack_params.get(name, {}))
        out.append((name, AttackMeasurement(name, attack, ctx, data.probes, inputs, roles=("none",))))
    return out


class PoolMeasurement(Measurement):
    """One suite measurement for one model and perturbation (module docstring)."""

    failure_is_outcome: ClassVar[bool] = True

    def __init__(self, entry: str, inner: Measurement, model: str, perturbation: str) -> None:
        self.entry = entry
        self.inner = inner
        self.model = model
        self.perturbation = perturbation
        self.name = inner.name
        self.surface = inner.surface
        self.kind = inner.kind  # type: ignore[misc]  # an instance attribute is enough for cell_key_of

    def roles(self) -> tuple[str, ...]:
        return (self.perturbation,)

    def key_inputs(self) -> dict[str, Any]:
        return {**self.inner.key_inputs(), "pool_model": self.model, "perturbation": self.perturbation}

    def label(self, role: str) -> str:
        return f"{self.model} [{self.perturbation}] {self.entry}"

    def _tag(self, records: list[Record]) -> list[Record]:
        tag = {"model": self.model, "perturbation": self.perturbation, "measurement": self.entry}
        return [
            r.model_copy(update={"params": {**r.params, "pool": tag}}) if isinstance(r, CellRecord) else r
            for r in records
        ]

    def measure(self, state: Any, target: CellTarget) -> list[Record]:
        return self._tag(self.inner.measure(state, target))

    def failed(self, target: CellTarget, exc: BaseException, elapsed: float) -> list[Record]:
        return self._tag(super().failed(target, exc, elapsed))

    def status(self, target: CellTarget, status: str, reason: str) -> list[Record]:
        """The record of a cell that could not run on this model (a diverged or failed build)."""
        return self._tag([status_record(target, status=status, reason=reason)])  # type: ignore[arg-type]


__all__ = [
    "AuditMeasurement",
    "PoolMeasurement",
    "Runtime",
    "SuiteData",
    "attribute_view",
    "suite_data",
    "suite_measurements",
    "write_tofu_view",
]
