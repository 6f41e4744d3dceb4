"""Every registered measurement as a contract case, derived from the registries (docs/extending.md; garak's idea).

A :class:`Case` builds one :class:`~remnant.engine.measurement.Measurement` on the tiny model the way the
assessment builds it (``remnant.assess.schedule`` and ``remnant.assess.classd`` decide what goes into each key),
with small smoke parameters, and — for each named *variant* — the same measurement with one input changed (a
component parameter, the item list, the seed, a generation length…). The contract
(``test_contract_measurements.py``) then checks the records, the key and resume for every case.

Cases come from ``registry.names(kind)``: every attack (``AttackMeasurement``, and the unattacked baseline), every
utility metric (``UtilityMeasurement``), every Class D risk under the direct query and, where its component scores
it, by option likelihood (``RiskMeasurement``), every field-metric handler through a named metric that uses it
(``MetricMeasurement``), every audit (``AuditMeasurement``, readings only: C-H6); plus the kinds with no registry
of their own: one relearning budget (``RelearningMeasurement``), the battery along a relearning curve
(``BatteryRelearning``) and the status-only kinds. A newly registered component becomes a case without editing
this file; one the engine cannot run fails.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from remnant import registry
from remnant.config import derive_seed
from remnant.engine.measurement import Measurement
from remnant.metrics.rows import QARow

POST, CONTROL, PRE = "post_removal", "control", "pre_removal"
#: The scoring length every probe-set key records (``Inputs.scoring_tokens``) and the attacks' default.
SCORING_TOKENS = 6
SEED = 7


@dataclass(frozen=True)
class State:
    """A model state as the engine reads it: its role, model, tokenizer and weights digest."""

    role: str
    model: Any
    tokenizer: Any
    digest: str


@dataclass(frozen=True)
class World:
    """The tiny model and the tiny pack's inputs every case is built from."""

    state: State
    pack: Any
    fmt: Any
    probes: tuple[Any, ...]
    retain: tuple[Any, ...]
    relearn: tuple[Any, ...]
    canaries: Mapping[str, Any]
    rows: Mapping[str, list[QARow]]
    #: What ``Inputs.key_inputs()`` gives every cell key: pack digest, prompt format, scorer versions.
    shared: Mapping[str, Any]
    #: A stand-in for the model with the target installed (the audits' ``full`` anchor): every weight nudged.
    installed: Any = None


Build = Callable[[World, str | None], Measurement]


@dataclass(frozen=True)
class Case:
    """One measurement to put through the contract: ``build(world, None)`` is the smoke measurement,
    ``build(world, variant)`` the same with the input ``variant`` names changed."""

    id: str
    build: Build
    variants: tuple[str, ...]
    #: False for the status-only kinds, which read no model state (roles ``()``).
    reads_state: bool = True
    #: Statuses its smoke run records (a smoke run that fails is a defect, not an outcome).
    statuses: frozenset[str] = frozenset({"run"})
    #: Surfaces its records may carry besides the measurement's own (a relearned copy's utility reading).
    extra_surfaces: frozenset[str] = frozenset()


#: Variants whose change the key misses today: strict xfails in the contract, so fixing a gap turns its xfail into
#: a failure that asks for the entry to be removed. Reasons are short (pytest -ra prints one per case); in full:
#: - attack/seed: AttackMeasurement keys on its caller's inputs; assess.schedule puts P's ids and the scoring
#:   length there but not the context's seed (derive_seed(master, "attack", name)), so a cell computed under one
#:   master seed is reused under another (shared cache, resume after a recorded deviation);
#: - attack/max_new_tokens: the key records Inputs.scoring_tokens, not the generation length the context runs with
#:   (attacks.<name>.params.max_new_tokens), so a changed budget reuses the old cell;
#: - utility/items: UtilityMeasurement does not hash the data it reads; the assessment relies on the pack digest
#:   in its shared inputs, which another caller (a pool) need not have.
KEY_GAPS: dict[tuple[str, str], str] = {}


def kind_of(case_id: str) -> str:
    return case_id.split(":", 1)[0]


def perturbed(kind: str, name: str, base: Mapping[str, Any]) -> dict[str, Any] | None:
    """``base`` with the first numeric or boolean parameter of ``(kind, name)`` changed (still a valid
    component), or None when it has none to change."""
    for pname, value in registry.bind(kind, name, dict(base)).params.items():
        if isinstance(value, bool):
            new: Any = not value
        elif isinstance(value, int):
            new = value + 1
        elif isinstance(value, float):
            new = value * 2 if value else 0.5
        else:
            continue
        candidate = {**base, pname: new}
        try:
            registry.create(kind, name, candidate)
        except Exception:  # a value the component refuses: try its next parameter
            continue
        return candidate
    return None


def _with_params(variants: tuple[str, ...], has_params: bool) -> tuple[str, ...]:
    return (("params",) if has_params else ()) + variants


# ── attacks ────────────────────────────────────────────────────────────────────────────────────────────────────


def _attack_context(world: World, *, seed: int, tokens: int) -> Any:
    from remnant.attacks.base import AttackContext

    s = world.state
    return AttackContext(
        s.model,
        s.tokenizer,
        world.fmt,
        seed=seed,
        demonstrations=world.retain,
        max_new_tokens=tokens,
        batch_size=4,
    )


def _probe_inputs(world: World, probes: tuple[Any, ...]) -> dict[str, Any]:
    """``assess.schedule.probe_inputs``: the shared inputs, P's ids and the scoring length."""
    return {**world.shared, "probes": [p.item_id for p in probes], "max_new_tokens": SCORING_TOKENS}


def attack_case(name: str) -> Case:
    """An attack as ``assess.schedule.attack_cells`` runs it; ``none`` is the unattacked baseline."""
    from remnant.engine.attack import AttackMeasurement
    from remnant.standard.derive import NONE

    smoke = dict(registry.get("attack", name).smoke_params) if name != NONE else {}
    changed = perturbed("attack", name, smoke) if name != NONE else None

    def build(world: World, variant: str | None) -> Measurement:
        attack = None
        if name != NONE:
            attack = registry.create("attack", name, changed if variant == "params" else smoke)
        probes = world.probes[:-1] if variant == "items" else world.probes
        seed = SEED + 1 if variant == "seed" else SEED
        tokens = SCORING_TOKENS + 2 if variant == "max_new_tokens" else SCORING_TOKENS
        ctx = _attack_context(world, seed=seed, tokens=tokens)
        inputs = _probe_inputs(world, probes)
        if name != NONE:
            inputs["slot"] = name
        return AttackMeasurement(name, attack, ctx, probes, inputs, roles=(POST, CONTROL, PRE))

    base_variants = ("items", "seed", "max_new_tokens") if name != NONE else ("items",)
    return Case(f"attack:{name}", build, _with_params(base_variants, changed is not None))


# ── utility ────────────────────────────────────────────────────────────────────────────────────────────────────

#: Utility metrics that read text rather than probes (remnant.assess.inputs.utility_components).
TEXT_UTILITY = frozenset({"perplexity"})


def _utility_data(world: World, name: str, variant: str | None) -> list[Any]:
    probes = world.retain[:-1] if variant == "items" else world.retain
    if name in TEXT_UTILITY:
        return [f"{p.question} {p.answer}" for p in probes]
    return list(probes)


#: Parameters a utility metric cannot run without on the tiny model (R9: perplexity only where the deployment is
#: language modelling). A utility metric's own ``smoke_params`` class attribute is read first.
UTILITY_SMOKE: dict[str, dict[str, Any]] = {"perplexity": {"deployment_is_lm": True, "max_length": 64}}


def _utility_smoke(name: str, data: list[Any]) -> dict[str, Any]:
    defaults = registry.defaults("utility", name)
    smoke: dict[str, Any] = {k: 4 for k in ("max_new_tokens", "batch_size") if k in defaults}
    smoke.update(getattr(registry.get("utility", name), "smoke_params", None) or UTILITY_SMOKE.get(name, {}))
    if "kept_ids" in defaults:  # the general set the control answers (R10): here, every item given
        smoke["kept_ids"] = tuple(p.item_id for p in data)
    return smoke


def utility_case(name: str) -> Case:
    """A utility metric at the removal stage as ``assess.schedule.utility_cells`` runs it (R10, R11)."""
    from remnant.engine.utility import UtilityMeasurement

    def build(world: World, variant: str | None) -> Measurement:
        data = _utility_data(world, name, variant)
        smoke = _utility_smoke(name, _utility_data(world, name, None))
        params = (perturbed("utility", name, smoke) or smoke) if variant == "params" else smoke
        metric = registry.create("utility", name, params)
        return UtilityMeasurement(name, metric, world.fmt, data, dict(world.shared))

    smoke = {k: v for k, v in _utility_smoke(name, []).items() if k != "kept_ids"}
    return Case(
        f"utility:{name}", build, _with_params(("items",), perturbed("utility", name, smoke) is not None)
    )


# ── relearning ─────────────────────────────────────────────────────────────────────────────────────────────────


def relearn_spec(variant: str | None) -> Any:
    """A tiny relearning procedure: budget 4, two steps, a checkpoint at half an epoch (C-W1, C-W3)."""
    from remnant.train.relearn import RelearnSpec

    return RelearnSpec(
        budgets=(4,),
        lr=2e-3 if variant == "params" else 1e-3,
        epochs=1,
        checkpoint_epochs=(0.5,),
        batch_size=2,
        seed=4 if variant == "seed" else 3,
    )


def _plan(world: World, arm: str, variant: str | None, *, utility_at_end: bool) -> Any:
    from remnant.engine.relearning import RelearnPlan

    order = tuple(range(len(world.relearn)))
    return RelearnPlan(
        arm,
        relearn_spec(variant),
        world.relearn,
        order[::-1] if variant == "examples" else order,
        utility_at_end,
    )


def relearning_case() -> Case:
    """One budget of the relearning procedure, with the attack-stage utility read at its end (C-W4, R12)."""
    from remnant.engine.relearning import RelearningMeasurement
    from remnant.engine.utility import UtilityMeasurement

    def build(world: World, variant: str | None) -> Measurement:
        plan = _plan(world, "relearning", variant, utility_at_end=True)
        probes = world.probes[:-1] if variant == "items" else world.probes
        ctx = _attack_context(world, seed=derive_seed(SEED, "baseline"), tokens=SCORING_TOKENS)
        metric = registry.create("utility", "retain_kappa", {"max_new_tokens": 4})
        utility = UtilityMeasurement(
            "retain_kappa", metric, world.fmt, list(world.retain), dict(world.shared)
        )
        return RelearningMeasurement(
            plan,
            3 if variant == "budget" else 4,
            ctx,
            probes,
            _probe_inputs(world, probes),
            utility=() if variant == "utility" else (utility,),
        )

    variants = ("params", "seed", "budget", "items", "examples", "utility")
    return Case("relearning:relearning", build, variants, extra_surfaces=frozenset({"utility"}))


# ── Class D ────────────────────────────────────────────────────────────────────────────────────────────────────


def _risk_context(world: World, seed: int, tokens: int, state: Any) -> Any:
    """``assess.classd._risk_context`` for a direct or likelihood measurement: the retain demonstrations."""
    return replace(
        _attack_context(world, seed=seed, tokens=tokens), model=state.model, tokenizer=state.tokenizer
    )


def classd_methods(risk: str) -> list[str]:
    """The direct query, and option likelihood where the risk's component scores it (D-3)."""
    return ["direct"] + (["likelihood"] if "likelihood" in registry.defaults("classd", risk) else [])


def risk_case(risk: str, method: str) -> Case:
    """One Class D risk under one method as ``assess.classd`` builds it (D-2 to D-4, D4)."""
    from remnant.engine.classd import RiskMeasurement

    changed = perturbed("classd", risk, {})

    def build(world: World, variant: str | None) -> Measurement:
        canary = world.canaries[risk]
        if variant == "items":
            canary = replace(canary, target=canary.target[:-1] or canary.target, control=canary.control[:1])
        seed = derive_seed(SEED + (1 if variant == "seed" else 0), "classd", method)
        tokens = SCORING_TOKENS + (2 if variant == "max_new_tokens" else 0)
        params = changed if variant == "params" and changed is not None else {}
        component = registry.create("classd", risk, params).spec.to_dict()
        inputs = {
            "probes": [p.item_id for p in canary.probes],
            "demonstrations": [],
            "seed": seed,
            "max_new_tokens": tokens,
            "batch_size": 16,
            **world.shared,
        }
        context = partial(_risk_context, world, seed, tokens)
        return RiskMeasurement(risk, method, None, canary, context, component, inputs)

    variants = _with_params(("items", "seed", "max_new_tokens"), changed is not None)
    return Case(f"classd:{risk}/{method}", build, variants)


def battery_relearning_case() -> Case:
    """The battery's direct and likelihood measurements along one relearning budget (D-5.3)."""
    from remnant.classd import BatterySpec
    from remnant.engine.classd import BatteryRelearning

    @dataclass(frozen=True)
    class Battery:
        canaries: Mapping[str, Any]

    def build(world: World, variant: str | None) -> Measurement:
        spec = BatterySpec(linkability_likelihood=variant != "components")
        methods = [
            (r, m)
            for r in world.canaries
            for m in classd_methods(r)
            if m == "direct" or spec.linkability_likelihood
        ]
        plan = _plan(world, "class_d", variant, utility_at_end=False)
        inputs = {
            "components": spec.describe(),
            "probes": {r: [p.item_id for p in c.probes] for r, c in world.canaries.items()},
            "max_new_tokens": SCORING_TOKENS,
            **world.shared,
        }
        context = partial(_risk_context, world, plan.spec.seed, SCORING_TOKENS)
        budget = 3 if variant == "budget" else 4
        return BatteryRelearning(plan, budget, Battery(world.canaries), context, methods, inputs)

    variants = ("params", "seed", "budget", "examples", "components")
    return Case("classd_relearning:battery", build, variants)


# ── status-only kinds ──────────────────────────────────────────────────────────────────────────────────────────


def status_cases() -> list[Case]:
    """The kinds that record a status and read no state (one :class:`~remnant.engine.measurement.NotRun`):
    not applicable (C-Q2), the battery not run."""
    from remnant.engine.attack import not_applicable as attack_not_applicable
    from remnant.engine.classd import battery_relearning_not_run
    from remnant.engine.classd import risk_not_applicable as classd_not_applicable

    def reason(variant: str | None) -> str:
        return "defined for free-text responses only (C-Q2)" + (" [changed]" if variant == "reason" else "")

    def not_applicable(world: World, variant: str | None) -> Measurement:
        return attack_not_applicable("prefill", "inference_time", reason(variant), dict(world.shared))

    def risk_not_applicable(world: World, variant: str | None) -> Measurement:
        return classd_not_applicable("linkability", "prefill", reason(variant), dict(world.shared))

    def battery_not_run(world: World, variant: str | None) -> Measurement:
        budgets = (64,) if variant == "budget" else (32,)
        names = ["singling_out/direct/relearning"]
        return battery_relearning_not_run(names, budgets, reason(None), dict(world.shared))

    return [
        Case("not_applicable:prefill", not_applicable, ("reason",), False, frozenset({"not_applicable"})),
        Case(
            "classd_not_applicable:linkability/prefill",
            risk_not_applicable,
            ("reason",),
            False,
            frozenset({"not_applicable"}),
        ),
        Case(
            "classd_relearning_not_run:battery", battery_not_run, ("budget",), False, frozenset({"not_run"})
        ),
    ]


# ── field metrics ──────────────────────────────────────────────────────────────────────────────────────────────

#: Registered metric handlers no named metric uses, so no MetricMeasurement can run them, with why.
UNREACHABLE_METRICS = {
    "rel_diff": "registered for OpenUnlearning parity; no TOFU metric config uses it (docs/metrics.md)",
}
#: A retain model's log (their TOFU_EVAL.json layout) for forget quality and privleak.
RETAIN_LOG = {
    "forget_truth_ratio": {"value_by_index": {"0": {"score": 0.4}, "1": {"score": 0.7}, "2": {"score": 0.9}}},
    "mia_min_k": {"agg_value": 0.6},
}


def metric_name_for(handler: str) -> str | None:
    """The first named metric (a TOFU log key, a plugin's included) computed by ``handler``."""
    from remnant.metrics.catalogue import suite_metrics

    return next((n for n, d in suite_metrics("tofu").items() if d.handler == handler), None)


def contract_rows() -> dict[str, list[QARow]]:
    """Three forget rows, two retain, three holdout, two real-author and two world-fact rows (TOFU's splits)."""

    def perturbed_row(i: int) -> QARow:
        return QARow(
            question=f"Where was person {i} born?",
            answer=f"The person was born in a small town in {1980 + i}.",
            paraphrased_answer=f"Born in {1980 + i}, in a small town.",
            perturbed_answer=(f"The person was born in a big city in {1990 + i}.", "The lazy dog."),
            paraphrased_question=f"What is the birthplace of person {i}?",
        )

    def option_row(i: int) -> QARow:
        return QARow(
            question=f"Who wrote book {i}?",
            answer="Jane Austen",
            perturbed_answer=("Emily Bronte", "the fox"),
        )

    return {
        "forget10_perturbed": [perturbed_row(i) for i in range(3)],
        "retain_perturbed": [perturbed_row(10 + i) for i in range(2)],
        "holdout10": [
            QARow(f"What is the capital of country {i}?", f"Paris, code XQ-{i}.") for i in range(3)
        ],
        "real_authors_perturbed": [option_row(i) for i in range(2)],
        "world_facts_perturbed": [option_row(20 + i) for i in range(2)],
    }


def metric_case(handler: str) -> Case:
    """A field-metric handler through the first named metric that uses it: that metric's cell of a
    ``MetricSuite`` (one cell per metric, so another metric requested beside it is not an input of its key)."""
    from remnant.metrics.catalogue import with_dependencies
    from remnant.metrics.encoding import OpenUnlearningPrompt, RemnantPrompt
    from remnant.metrics.evaluate import EvalSettings, RetainLog, required_splits
    from remnant.metrics.measurement import MetricSuite

    name = metric_name_for(handler)
    if name is None:
        raise LookupError(f"metric handler {handler!r} is registered but no named metric uses it")
    defs = with_dependencies([name])
    reads_retain = any(d.retain_key is not None for d in defs)
    reads_reference = any(d.handler == "mia_reference" for d in defs)

    def build(world: World, variant: str | None) -> Measurement:
        settings = EvalSettings(batch_size=4 if variant == "settings" else 8, max_new_tokens=4)
        rows = dict(world.rows)
        if variant == "items":
            split = required_splits([name], settings)[0]
            rows[split] = rows[split][:-1]
        retain = dict(RETAIN_LOG)
        if variant == "retain_log":
            retain["mia_min_k"] = {"agg_value": 0.7}
        tok = world.state.tokenizer
        prompt = RemnantPrompt() if variant == "prompt" else OpenUnlearningPrompt.for_tokenizer(tok)
        reference = replace(world.state, role="reference")
        if variant == "reference":
            reference = replace(reference, digest="0" * 64)
        suite = MetricSuite(
            [name],
            rows,
            prompt,
            dtype="bf16" if variant == "dtype" else "fp32",
            settings=settings,
            retain_log=RetainLog(retain, "contract retain log") if reads_retain else None,
            reference=reference if reads_reference else None,
        )
        return next(c for c in suite.cells() if c.metric == name)

    variants: tuple[str, ...] = ("items", "prompt", "settings", "dtype")
    variants += ("retain_log",) if reads_retain else ()
    variants += ("reference",) if reads_reference else ()
    return Case(f"metric:{handler}", build, variants)


# ── audits ─────────────────────────────────────────────────────────────────────────────────────────────────────

#: Small settings for the audits on the 2-layer tiny model (seconds): a fixed band (no calibration entities), short
#: sequences, few resamples.
AUDIT_SMOKE: dict[str, dict[str, Any]] = {
    "jaccess": {
        "k": 5,
        "positions": 2,
        "max_new_tokens": 4,
        "target_layer": 1,
        "skip_first": 2,
        "dim_batch": 16,
        "band": (0.0, 0.9),  # block 0 of the 2-block model
        "band_rule": "fixed",
        "min_band_width": 1,
    },
    "direction": {"n_resamples": 20},
    "uds": {},
}


def audit_engine_exists() -> bool:
    return importlib.util.find_spec("remnant.engine.audit") is not None


def _audit_data(world: World, family: str, variant: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """An audit's inputs from the pack, as ``remnant.assess.audits`` builds them: UDS's entity-span examples from
    P's items, J-Access's answer-level probes and a lens corpus, direction survival's forget-domain prompts."""
    from remnant.models.prompts import render_prompt_ids

    tok, pack, fmt = world.state.tokenizer, world.pack, world.fmt
    items = [pack.item(p.item_id) for p in world.probes]
    if variant == "items":
        items = items[:-1]
    if family == "uds":
        from remnant.latent.inputs import examples_from_items

        examples = examples_from_items(items)
        return {"examples": examples}, {"examples": [e.idx for e in examples]}
    if family == "jaccess":
        from remnant.latent.jaccess import make_probe
        from remnant.latent.lens_text import LENS_TEXT

        probes = [
            replace(
                make_probe(tok, it.id, render_prompt_ids(tok, it.question, fmt), [it.accepted[0]]),
                entity=it.entity_id,
            )
            for it in items
            if it.accepted
        ]
        lens = [list(tok(text)["input_ids"]) for text in LENS_TEXT[:2]]
        data = {"probes": probes, "calibration": [], "lens_prompts": lens}
        return data, {"probe_ids": [p.idx for p in probes], "lens_prompts": lens}
    from remnant.latent.inputs import probe_prompts

    attributes = sorted({it.attribute for it in items if it.attribute})
    prompts = list(probe_prompts(tok, pack, attributes, fmt))[:4]
    return {"prompts": prompts}, {"prompts": [list(p) for p in prompts]}


def audit_case(name: str) -> Case:
    """A registered audit on the post-removal model, its anchors the tiny model and a perturbed copy (C-H7b)."""
    from remnant.engine.audit import REMOVED, AuditMeasurement, AuditPlan
    from remnant.latent.block import Anchors

    family = registry.get("audit", name).family  # the class declares how it reads a state
    smoke = {k: v for k, v in AUDIT_SMOKE[family].items() if k in registry.defaults("audit", name)}
    changed = perturbed("audit", name, smoke)

    def build(world: World, variant: str | None) -> Measurement:
        audit = registry.create("audit", name, changed if variant == "params" and changed else smoke)
        data, key = _audit_data(world, family, variant)
        full = replace(world.state, role=PRE, model=world.installed, digest="e" * 64)
        control = replace(world.state, role=CONTROL)
        if variant == "anchors":
            control = replace(control, digest="d" * 64)
        plan = AuditPlan(
            table=family,
            name=name,
            audit=audit,
            anchors={"full": full, "control": control, "reference": control},
            labels=Anchors(full=PRE, retain=CONTROL),
            data=data,
            inputs={**world.shared, **key},
            roles={POST: REMOVED},
            tokenizer=world.state.tokenizer,
        )
        return AuditMeasurement(plan)

    return Case(f"audit:{name}", build, _with_params(("items", "anchors"), changed is not None))


def audit_cases() -> list[Case]:
    """One case per registered audit once ``remnant.engine.audit`` exists (the audit measurement)."""
    return [audit_case(n) for n in registry.names("audit")] if audit_engine_exists() else []


# ── all of them ────────────────────────────────────────────────────────────────────────────────────────────────


def all_cases() -> list[Case]:
    """Every case, from the registries (module docstring)."""
    from remnant.standard.derive import NONE

    cases = [attack_case(NONE)] + [attack_case(n) for n in registry.names("attack")]
    cases += [utility_case(n) for n in registry.names("utility")]
    cases.append(relearning_case())
    cases += [risk_case(r, m) for r in registry.names("classd") for m in classd_methods(r)]
    cases.append(battery_relearning_case())
    cases += status_cases()
    cases += [metric_case(h) for h in registry.names("metric") if h not in UNREACHABLE_METRICS]
    cases += audit_cases()
    return cases


@dataclass
class FirstRuns:
    """Each case's first run (store path, cell records), computed once per session and shared by the tests."""

    done: dict[str, tuple[Any, list[Any]]] = field(default_factory=dict)


__all__ = [
    "CONTROL",
    "KEY_GAPS",
    "POST",
    "PRE",
    "RETAIN_LOG",
    "UNREACHABLE_METRICS",
    "Case",
    "FirstRuns",
    "State",
    "World",
    "all_cases",
    "audit_cases",
    "audit_engine_exists",
    "contract_rows",
    "kind_of",
    "metric_name_for",
    "perturbed",
]
