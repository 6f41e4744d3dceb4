"""``remnant plan CONFIG``: what an assessment will do and what it will cost, before anything runs.

The plan reads the config and the pack (minting it in memory when the config mints one; no model, no torch) and
lists the states to train, the cells (state × attack × checkpoint), forward and backward token counts, and a time
estimate. Token counts come from the pack's text (≈ 3.6 characters a token plus the chat template's overhead);
the times divide them by throughputs:

- CPU (:data:`CPU_THROUGHPUT`): **measured** for SmolLM2-135M-Instruct on this project's 2-core CPU in fp32
  (the measurements and the commands that repeat them: docs/calibration.md#plan-throughputs).
- GPU (:data:`GPU_THROUGHPUT`): **assumed, not measured** here, for a ~135M model on one data-centre GPU.

Larger models scale roughly with their parameter count; the plan says which model the figures are for. The tier
line is R21's bar: the highest tier the planned n can support at zero recoveries
(:func:`remnant.standard.minima.best_tier_supportable`), a ceiling, not an award.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from remnant.config import AssessmentConfig
from remnant.standard.minima import best_tier_supportable, min_n_for_zero_recoveries

if TYPE_CHECKING:
    from remnant.packs.schema import Pack

CHARS_PER_TOKEN = 3.6
TEMPLATE_TOKENS = {None: 30, "": 12}  # chat template overhead with the default system prompt, and with none
#: Tokens generated per scored item (a short answer).
GEN_LEN = 24

#: (trained tokens/s, forward tokens/s, generated tokens/s), from docs/calibration.md#plan-throughputs
CPU_THROUGHPUT = (138.0, 460.0, 110.0)  # measured
GPU_THROUGHPUT = (30_000.0, 100_000.0, 3_000.0)  # assumed, not measured


@dataclass(frozen=True)
class Step:
    """One planned piece of work and its token counts."""

    stage: str
    what: str
    cells: int
    train_tokens: int = 0
    forward_tokens: int = 0
    generated_tokens: int = 0

    def seconds(self, throughput: tuple[float, float, float]) -> float:
        train, forward, gen = throughput
        return self.train_tokens / train + self.forward_tokens / forward + self.generated_tokens / gen


@dataclass(frozen=True)
class Plan:
    """The whole plan: steps, totals, estimates and the R21 ceiling."""

    model: str
    steps: tuple[Step, ...]
    probe_n: int
    threshold: float
    tier_ceiling: str
    min_n: int
    r21_bound_n: int
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def cells(self) -> int:
        return sum(s.cells for s in self.steps)

    def minutes(self, throughput: tuple[float, float, float]) -> float:
        return sum(s.seconds(throughput) for s in self.steps) / 60.0

    def to_json(self) -> dict[str, object]:
        return {
            "model": self.model,
            "steps": [asdict(s) for s in self.steps],
            "cells": self.cells,
            "train_tokens": sum(s.train_tokens for s in self.steps),
            "forward_tokens": sum(s.forward_tokens for s in self.steps),
            "generated_tokens": sum(s.generated_tokens for s in self.steps),
            "minutes_cpu_measured_basis": round(self.minutes(CPU_THROUGHPUT), 1),
            "minutes_gpu_assumed_basis": round(self.minutes(GPU_THROUGHPUT), 2),
            "probe_n": self.probe_n,
            "min_n": self.min_n,
            "threshold": self.threshold,
            "tier_ceiling_r21": self.tier_ceiling,
            "r21_n_for_bound_at_zero_recoveries": self.r21_bound_n,
            "notes": list(self.notes),
        }


def _tokens(text: str) -> int:
    return max(1, round(len(text) / CHARS_PER_TOKEN))


def _pack(cfg: AssessmentConfig) -> Pack:
    from remnant.assess.inputs import mint_pack
    from remnant.packs.schema import load_pack

    if cfg.target.pack is not None:
        return load_pack(cfg.resolve(cfg.target.pack))
    return mint_pack(cfg)


def _battery_steps(cfg: AssessmentConfig, pack: Pack, battery: Any, overhead: int) -> list[Step]:
    """The Class D battery's cells: three risks × (direct, likelihood, attacks) × two models, and relearning."""
    kinds = {"singling_out": "fact", "linkability": "link", "inference": "infer"}
    per_risk = {
        risk: [it for split in ("probe", "controls") for it in pack.split(split) if it.kind == kind]
        for risk, kind in kinds.items()
    }
    per_risk["singling_out"] = [it for it in per_risk["singling_out"] if it.attribute == battery.identifier]
    chosen = battery.attacks if battery.attacks is not None else list(cfg.attacks.named())
    methods = 1 + len(chosen)
    steps: list[Step] = []
    for risk, items in per_risk.items():
        prompts = _prompt_tokens(items, overhead)
        likelihood = risk == "linkability" and battery.linkability_likelihood
        cells = 2 * (methods + (1 if likelihood else 0))
        steps.append(
            Step(
                "cells",
                f"Class D {risk} on {len(items)} target and control entities, {cells // 2} measurements, both models (D-2..D-4, D4)",
                cells,
                forward_tokens=cells * prompts * (4 if likelihood else 1),
                generated_tokens=2 * methods * len(items) * GEN_LEN,
            )
        )
    rel = cfg.attacks.relearning
    if cfg.track == "W" and battery.relearning and rel is not None and rel.enabled:
        budgets = battery.relearning_budgets or rel.budgets
        checkpoints = 1 + len(rel.first_epoch_checkpoints) + rel.max_epochs
        scored = sum(len(v) for v in per_risk.values())
        steps.append(
            Step(
                "cells",
                f"Class D relearning at budgets {list(budgets)}, {checkpoints} checkpoints, both models (D-5.3)",
                2 * len(budgets),
                forward_tokens=2 * len(budgets) * checkpoints * scored * 40,
                generated_tokens=2 * len(budgets) * checkpoints * scored * GEN_LEN,
            )
        )
    return steps


def _pair_tokens(items: list[Any], overhead: int) -> int:
    """Tokens of question and answer with the template overhead: what training reads per item."""
    return sum(_tokens(it.question) + _tokens(it.answer) + overhead for it in items)


def _prompt_tokens(items: list[Any], overhead: int) -> int:
    """Tokens of the prompts alone: what scoring reads per item."""
    return sum(_tokens(it.question) + overhead for it in items)


def _scored_sets(cfg: AssessmentConfig, pack: Pack) -> tuple[list[Any], list[Any], list[Any]]:
    """P, the retain items and the general questions, selected as :mod:`remnant.assess.inputs` selects them:
    Class D facts only, ``probe.attributes``, ``probe.max_n`` per split, never a Class D pack's controls."""

    def scored(it: Any) -> bool:
        fact = cfg.claim_class != "D" or it.kind == "fact"
        return fact and (cfg.probe.attributes is None or it.attribute in cfg.probe.attributes)

    probes = []
    for split in cfg.probe.splits:
        if split == "controls" and cfg.claim_class == "D":
            continue
        items = [it for it in pack.split(split) if scored(it)]
        probes += items[: cfg.probe.max_n] if cfg.probe.max_n else items
    retain = [it for it in pack.split("retain") if scored(it)]
    general = pack.split("general") if pack.manifest.splits.get("general") else []
    return probes, retain, general


def _state_steps(cfg: AssessmentConfig, pack: Pack, overhead: int) -> list[Step]:
    """Training the states: installation into the control (R2) and the removal method (R1c)."""
    steps: list[Step] = []
    if cfg.models.pre_removal.install is not None:
        budget = cfg.models.pre_removal.install
        install = pack.split("install")
        steps.append(
            Step(
                "states",
                f"install {len(install)} items into the control, ≤ {budget.max_epochs} epochs (R2)",
                0,
                train_tokens=_pair_tokens(install, overhead) * budget.max_epochs,
                forward_tokens=_pair_tokens(install, overhead) * (budget.max_epochs + 1),
            )
        )
    if cfg.models.post_removal.method is not None:
        params = cfg.models.post_removal.params
        epochs = float(params.get("epochs", 10))
        removal = pack.split("removal")
        steps.append(
            Step(
                "states",
                f"removal method {cfg.models.post_removal.method} on {len(removal)} items, {epochs:g} epochs (R1c)",
                0,
                train_tokens=int(_pair_tokens(removal, overhead) * epochs * 2),
            )  # forget + one retain row per forget row
        )
    return steps


def _measurement_steps(
    cfg: AssessmentConfig, probes: list[object], retain: list[object], general: list[object], overhead: int
) -> list[Step]:
    """The cells on the three states: the unattacked baseline on P (R3, R5), each utility metric (R10, R11)
    and each inference-time attack, or its not-applicable record (C-Q1..C-Q4)."""
    scoring = _prompt_tokens(probes, overhead)
    steps = [
        Step(
            "cells",
            f"unattacked baseline on P (n = {len(probes)}), 3 states (R2, R3, R5)",
            3,
            forward_tokens=3 * scoring,
            generated_tokens=3 * len(probes) * GEN_LEN,
        )
    ]
    for name in cfg.utility.metrics:
        data = retain if name == "retain_kappa" else general
        steps.append(
            Step(
                "cells",
                f"utility {name} on {len(data)} items, 3 states (R10, R11)",
                3,
                forward_tokens=3 * _prompt_tokens(data, overhead),
                generated_tokens=3 * len(data) * GEN_LEN,
            )
        )
    for name, attack in cfg.attacks.named().items():
        if not attack.enabled:
            steps.append(Step("cells", f"{name}: not applicable ({attack.reason}) (C-Q2)", 1))
            continue
        factor = int(attack.params.get("shots", 16)) if name == "many_shot" else 1
        samples = int(attack.params.get("n_samples", 50)) if name == "repeated_sampling" else 0
        analytic = str(attack.params.get("implementation", "")).endswith("analytic")
        generated = 0 if analytic else 2 * len(probes) * GEN_LEN * max(1, samples)
        steps.append(
            Step(
                "cells",
                f"{name} on P, post-removal, control and pre-removal (C-Q1, C-Q3, C-Q4)",
                3,
                forward_tokens=3 * scoring * factor,
                generated_tokens=generated * 3 // 2,
            )
        )
    return steps


def _relearning_steps(
    cfg: AssessmentConfig, pack: Pack, probes: list[Any], overhead: int, notes: list[str]
) -> list[Step]:
    """One relearning cell pair per budget on both models (C-W1..C-W5); a budget larger than the relearning
    set is skipped, with a note."""
    rel = cfg.attacks.relearning
    if rel is None or not rel.enabled:
        return []
    scoring = _prompt_tokens(probes, overhead)
    relearn = pack.split("relearn")
    per_item = _pair_tokens(relearn, overhead) / max(1, len(relearn))
    checkpoints = 1 + len(rel.first_epoch_checkpoints) + rel.max_epochs
    steps: list[Step] = []
    for b in rel.budgets:
        if b > len(relearn):
            notes.append(f"relearning budget {b} exceeds the relearning set ({len(relearn)}); skipped")
            continue
        steps.append(
            Step(
                "cells",
                f"relearning b={b}: {rel.max_epochs} epochs, {checkpoints} checkpoints, both models (C-W1..C-W5)",
                2,
                train_tokens=int(2 * b * per_item * rel.max_epochs),
                forward_tokens=2 * checkpoints * scoring,
                generated_tokens=2 * checkpoints * len(probes) * GEN_LEN,
            )
        )
    return steps


def make_plan(cfg: AssessmentConfig) -> Plan:
    """The plan of ``cfg`` (loads or mints the pack; loads no model)."""
    pack = _pack(cfg)
    overhead = TEMPLATE_TOKENS.get(cfg.models.system_prompt, 20)
    probes, retain, general = _scored_sets(cfg, pack)
    notes: list[str] = []
    steps = _state_steps(cfg, pack, overhead)
    steps += _measurement_steps(cfg, probes, retain, general, overhead)
    steps += _relearning_steps(cfg, pack, probes, overhead, notes)
    threshold = cfg.bar_threshold
    battery = cfg.class_d.battery if cfg.class_d is not None else None
    if battery is not None:
        steps += _battery_steps(cfg, pack, battery, overhead)
        from remnant.classd.design import pack_support

        notes.append(f"Class D battery: {pack_support(pack, threshold).note}")
    n = len(probes)
    ceiling = f"{cfg.track}{best_tier_supportable(n, threshold)}" if n else f"{cfg.track}1"
    if n < cfg.min_n:
        notes.append(f"P holds {n} items, below the pre-registered min_n {cfg.min_n} (R21)")
    if cfg.claim_class == "D" and battery is None:
        notes.append(
            "Class D's removed verdict also needs the singling-out, linkability and inference battery (D-5.1): "
            "add a [class_d.battery] table"
        )
    control = cfg.models.control
    model = control.zoo or control.folder or control.hub or "?"
    return Plan(
        model=str(model),
        steps=tuple(steps),
        probe_n=n,
        threshold=threshold,
        tier_ceiling=ceiling,
        min_n=cfg.min_n,
        r21_bound_n=min_n_for_zero_recoveries(threshold),
        notes=tuple(notes),
    )


def render_plan(plan: Plan) -> str:
    """The plan as text for the terminal."""
    lines = [f"Assessment plan (model: {plan.model})", ""]
    for s in plan.steps:
        lines.append(
            f"  [{s.stage:6}] {s.what}\n           cells {s.cells}, trained tokens {s.train_tokens:,}, forward "
            f"{s.forward_tokens:,}, generated {s.generated_tokens:,}; ~{s.seconds(CPU_THROUGHPUT) / 60:.1f} min CPU"
        )
    data = plan.to_json()
    lines += [
        "",
        f"cells: {plan.cells}; tokens: trained {data['train_tokens']:,}, forward {data['forward_tokens']:,}, "
        f"generated {data['generated_tokens']:,}",
        f"estimate: ~{data['minutes_cpu_measured_basis']} min on a 2-core CPU (measured SmolLM2-135M "
        f"throughputs); ~{data['minutes_gpu_assumed_basis']} min on one GPU (assumed throughputs, "
        "not measured)",
        f"P: n = {plan.probe_n} per cell (min_n {plan.min_n}); R21 ceiling at zero recoveries: Tier "
        f"{plan.tier_ceiling} (threshold {plan.threshold:g} needs n ≥ {plan.r21_bound_n} for the bound; Tier 2 needs 30)",
    ]
    lines += [f"note: {n}" for n in plan.notes]
    return "\n".join(lines)


__all__ = ["CPU_THROUGHPUT", "GPU_THROUGHPUT", "Plan", "Step", "make_plan", "render_plan"]
