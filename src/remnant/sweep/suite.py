"""The measurement suite every model of a pool gets, as engine measurements (docs/sweep.md; R23).

From the spec's ``[suite]`` and the pack, :func:`suite_measurements` makes the same list for every model and
perturbation: the named field metrics (one :class:`~remnant.metrics.measurement.MetricMeasurement` cell each, one
shared pass over the pack's TOFU rows, restricted to the installed attributes: forget = the removal split,
``forget_perturbed`` = P with the truth-ratio answers, holdout = the never-installed controls); ``kappa``, the
unattacked baseline on P (κ and w, R6); ``utility``, retain κ (R10) unless the utility is a field metric
(``model_utility``), which then rides in the metrics; one audit per audit (:func:`audit_measurement`; C-H7:
against the pool's full and retain references, writing readings, C-H6); one attack measurement per attack.

:class:`PoolMeasurement` wraps each for one model and perturbation: both join the cell key (two models with equal
weights still get a row each) and every cell record carries them in ``params["pool"]``, so the results table is
rebuilt from the records alone. A measurement that raises is a *failed* cell with its error, never a stopped
sweep. On the driver the same measurements are built without models (``runtime=None``), for the cell keys alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from remnant.engine.audit_base import Keeper
from remnant.engine.cell import CellTarget
from remnant.engine.measurement import Measurement, Record, State, StateView
from remnant.records import CellRecord

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from remnant.engine.audit_base import Keep
    from remnant.latent.inputs import EntityExample
    from remnant.metrics.measurement import MetricMeasurement
    from remnant.metrics.rows import QARow
    from remnant.models.prompts import PromptFormat
    from remnant.packs.schema import Pack
    from remnant.score.probe import Probe
    from remnant.sweep.spec import Suite

#: Where a TOFU view of the pack is written (under the sweep folder) and read back from.
FORGET, RETAIN, HOLDOUT = "forget", "retain", "holdout"


@dataclass(frozen=True)
class SuiteData:
    """The inputs every measurement shares, derived from the pack (pure)."""

    rows: dict[str, list[QARow]]
    probes: tuple[Probe, ...]
    retain_probes: tuple[Probe, ...]
    examples: tuple[EntityExample, ...]
    pack_digest: str
    system_prompt: str | None


def attribute_view(pack: Pack, attributes: Sequence[str] | None) -> Pack:
    """``pack`` with only the items of ``attributes`` (general items kept): what the suite scores."""
    from remnant.packs.schema import Pack

    if attributes is None:
        return pack
    keep = {it.id for it in pack.items if it.attribute is None or it.attribute in attributes}
    splits = {name: [i for i in ids if i in keep] for name, ids in pack.manifest.splits.items()}
    return Pack(
        pack.manifest.model_copy(update={"splits": splits}), tuple(it for it in pack.items if it.id in keep)
    )


def write_tofu_view(pack: Pack, attributes: Sequence[str] | None, tofu_dir: Path) -> None:
    """Write the TOFU view of ``pack`` (its installed attributes) that every task reads (driver only)."""
    from remnant.formats.export import pack_to_tofu

    pack_to_tofu(attribute_view(pack, attributes), tofu_dir, forget=FORGET, retain=RETAIN, holdout=HOLDOUT)


def suite_data(
    pack: Pack,
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


def _uds_inputs(data: SuiteData) -> tuple[dict[str, object], dict[str, object]]:
    from remnant.statement.canonical import canonical_sha256

    examples: dict[str, object] = {
        "examples": canonical_sha256([asdict(e) for e in data.examples]),
        "system_prompt": data.system_prompt,
    }
    return {"examples": list(data.examples)}, examples


#: Audit family (``Audit.family``) -> the suite's inputs for it and what of them its cell key hashes: a sweep
#: builds the UDS family's entity-span examples (C-H7); an audit of another family is refused by the spec check.
AUDIT_INPUTS: dict[str, Callable[[SuiteData], tuple[dict[str, object], dict[str, object]]]] = {
    "uds": _uds_inputs
}


def audit_measurement(
    name: str, params: Mapping[str, object], data: SuiteData, refs: dict[str, str], runtime: Runtime | None
) -> Measurement:
    """The engine's :class:`~remnant.engine.audit.AuditMeasurement` of audit ``name`` against the pool's references
    (``refs``: reference -> state digest; the weights from ``runtime``, None on the driver). It writes readings
    (C-H6), each with its references named (C-H7b); a pool model's readings carry the role ``removed``."""
    from remnant import registry
    from remnant.engine.audit import ANCHOR_OF, AuditMeasurement, AuditPlan
    from remnant.latent.block import Anchors

    audit = registry.create("audit", name, params)
    models = {} if runtime is None else {"full": runtime.full, "retain": runtime.retain}
    # each reference as an audit reads it: its state and its weights (None on the driver)
    anchors = {ANCHOR_OF.get(ref, ref): StateView(ref, state, models.get(ref)) for ref, state in refs.items()}
    inputs, key = AUDIT_INPUTS[audit.family](data)
    plan = AuditPlan(
        table=name,
        name=name,
        audit=audit,
        anchors=anchors,
        labels=Anchors(),
        data=inputs,
        inputs=key,
        roles={},
        tokenizer=None if runtime is None else runtime.tokenizer,
        cache_dir=None if runtime is None else runtime.cache_dir,
        reference_role="retain",
        keep=Keeper() if runtime is None else runtime.keep,
    )
    return AuditMeasurement(plan)


@dataclass
class Runtime:
    """What measuring needs in a worker: the tokenizer, prompt format, audit references and cache folder."""

    tokenizer: PreTrainedTokenizerBase
    fmt: PromptFormat
    full: Any = None
    retain: Any = None
    cache_dir: Path | None = None
    keep: Keep = field(default_factory=Keeper)  # a worker's: what audits reuse between the pool's models


def _inputs(suite: Suite, data: SuiteData) -> dict[str, object]:
    from remnant.score.normalise import NORMALISATION_VERSION
    from remnant.score.scorer import SCORER_VERSION
    from remnant.statement.canonical import canonical_sha256

    return {
        "pack": data.pack_digest,
        "system_prompt": data.system_prompt,
        "scorer": SCORER_VERSION,
        "normalisation": NORMALISATION_VERSION,
        "max_new_tokens": suite.max_new_tokens,
        "probes": canonical_sha256([p.item_id for p in data.probes]),
        "retain": canonical_sha256([p.item_id for p in data.retain_probes]),
    }


def _metrics(suite: Suite, data: SuiteData, dtype: str) -> list[MetricMeasurement]:
    """The named field metrics, one cell each (entry ``metrics/METRIC``), computed on a state in one shared pass
    (remnant.metrics.measurement)."""
    from remnant.metrics.encoding import RemnantPrompt
    from remnant.metrics.evaluate import EvalSettings
    from remnant.metrics.measurement import MetricSuite

    names = list(suite.metrics)
    if suite.utility != "retain_kappa" and suite.utility not in names:
        names.append(suite.utility)
    if not names:
        return []
    settings = EvalSettings(
        forget_split=FORGET,
        holdout_split=HOLDOUT,
        batch_size=suite.batch_size,
        max_new_tokens=suite.max_new_tokens,
        progress=False,
    )
    prompt = RemnantPrompt(system_prompt=data.system_prompt)
    metrics = MetricSuite(
        names, data.rows, prompt, dtype=dtype, settings=settings, name="metrics", roles=("none",)
    )
    return metrics.cells()


def suite_measurements(
    suite: Suite, data: SuiteData, refs: dict[str, str], dtype: str, runtime: Runtime | None = None
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
    out += [(f"metrics/{cell.metric}", cell) for cell in _metrics(suite, data, dtype)]
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
        out.append((name, audit_measurement(name, suite.audit_params.get(name, {}), data, refs, runtime)))
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

    def key_inputs(self) -> dict[str, object]:
        return {**self.inner.key_inputs(), "pool_model": self.model, "perturbation": self.perturbation}

    def label(self, role: str) -> str:
        return f"{self.model} [{self.perturbation}] {self.entry}"

    def _tag(self, records: list[Record]) -> list[Record]:
        tag = {"model": self.model, "perturbation": self.perturbation, "measurement": self.entry}
        return [
            r.model_copy(update={"params": {**r.params, "pool": tag}}) if isinstance(r, CellRecord) else r
            for r in records
        ]

    def measure(self, state: State | None, target: CellTarget) -> list[Record]:
        return self._tag(self.inner.measure(state, target))

    def failed(self, target: CellTarget, exc: BaseException, elapsed: float) -> list[Record]:
        """The inner measurement's own failure records: an audit's are failed readings, as in an assessment (C-H6)."""
        return self._tag(self.inner.failed(target, exc, elapsed))


__all__ = [
    "AUDIT_INPUTS",
    "PoolMeasurement",
    "Runtime",
    "SuiteData",
    "attribute_view",
    "audit_measurement",
    "suite_data",
    "suite_measurements",
    "write_tofu_view",
]
