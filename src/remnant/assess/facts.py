"""From cell records to the verdict facts, relearning curves, extra statement cells and tier evidence (pure).

The verdict reads only rates and pre-registered values (V1), so everything here is a function of the
cell records in ``records.jsonl`` and the config: ``remnant recompute`` and ``remnant assess`` call the same code.

The records are those :mod:`remnant.engine` writes: attack cells (κ and w apart, R6; not-applicable and failed
ones too, C-Q2), relearning cells per checkpoint with typed ``budget``, ``step``, ``epoch`` and ``examples``
(C-W3; the ``checkpoint`` label is never parsed here), both states under the identical procedure (C-W5), a
diverged curve a ``diverged`` record (Annex B.6); utility cells (R10-R12, C-W4), the unattacked baseline on every
state (R2, R5), Class D battery cells on target canaries and control entities (D4) and the ``states`` context,
whose installation record :func:`installation_fact` reads (R2). :func:`battery_facts` makes risk-tagged facts the
verdict takes net of control and baseline (D-2.1, D-3.1, D-4.1, D-5.1), a relearning measurement (D-5.3) at the
checkpoint with the largest Wilson upper bound net of control.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from remnant import STANDARD_VERSION
from remnant.config import AssessmentConfig
from remnant.curves import CurvePoint, RelearningCurve
from remnant.errors import RecordError
from remnant.records import CellRecord
from remnant.standard.cq3 import explain, holding_of
from remnant.standard.derive import (
    NONE,
    RELEARNING,
    behavioural_n,
    best_relearning_point,
    unmet_without_utility,
    utility_stages,
)
from remnant.standard.evidence import EvidenceSummary, surfaces_from_facts
from remnant.standard.facts import InstallationFact
from remnant.standard.rules import GENERAL_REQUIREMENTS
from remnant.standard.verdict import net_rate
from remnant.standard.vocabulary import CLASS_D_RISKS, CONTROL, CONTROL_ENTITIES, POST, PRE, worst_status
from remnant.statement.schema import Cell

#: The C-W6 relearning arm on the scored items (never adjudicating).
SCORED_ARM = "relearning_scored_items"


@dataclass(frozen=True)
class RelearnPoint:
    """One relearning checkpoint of one state: where it was scored and k/n of the gating metric."""

    budget: int
    step: int
    epoch: float
    examples: int
    k: int
    n: int


def attack_order(cfg: AssessmentConfig) -> list[str]:
    """Attack names as the facts list them: relearning arms first, then the config's tables in order."""
    names: list[str] = []
    rel = cfg.attacks.relearning
    if rel is not None:
        names.append(RELEARNING)
        if rel.scored_items_arm and rel.enabled:
            names.append(SCORED_ARM)
    names += list(cfg.attacks.named())
    return names


def _gating(cfg: AssessmentConfig) -> str:
    return "w" if cfg.gating_metric == "w" else "kappa"


def _relearn_point(c: CellRecord) -> RelearnPoint:
    """Where a relearning checkpoint that ran was scored, from its typed fields (a relearning record that ran
    carries all four: records.CellRecord checks it, C-W3)."""
    if c.budget is None or c.step is None or c.epoch is None or c.examples is None:
        raise ValueError(
            f"relearning cell {c.attack}@{c.checkpoint} lacks its budget, step, epoch or examples"
        )
    return RelearnPoint(budget=c.budget, step=c.step, epoch=c.epoch, examples=c.examples, k=c.k, n=c.n)


def relearn_points(cells: Sequence[CellRecord], attack: str, state: str, metric: str) -> list[RelearnPoint]:
    """Checkpoints of one relearning arm on one state, in (budget, step) order."""
    points = [
        _relearn_point(c)
        for c in cells
        if c.attack == attack
        and c.surface == "relearning"
        and c.model_state == state
        and c.metric == metric
        and c.status == "run"
    ]
    return sorted(points, key=lambda p: (p.budget, p.step))


def _relearning_fact(cells: Sequence[CellRecord], name: str, metric: str) -> dict[str, object] | None:
    mine = [c for c in cells if c.attack == name and c.surface == "relearning"]
    if not mine:
        return None
    fact: dict[str, object] = {"name": name, "surface": "relearning"}
    if name == SCORED_ARM:
        fact["adjudicating"] = False  # C-W6: relearning on the scored items never decides
    # the worst status any of the arm's cells reports, whichever state and order it was recorded in (C-Q2)
    worst = worst_status(c.status for c in mine)
    post = relearn_points(cells, name, POST, metric)
    control = {(p.budget, p.step): p for p in relearn_points(cells, name, CONTROL, metric)}
    if worst is not None:
        first = next(c for c in mine if c.status == worst)
        return {**fact, "status": worst, "reason": first.reason or worst}
    if not post:
        return {**fact, "status": "not_run", "reason": "no relearning checkpoint was scored"}

    # The post-removal checkpoint that stands for the arm, beside the control at the same budget and step (R4,
    # C-W5): the rule remnant validate reads a statement's checkpoint cells with.
    best = best_relearning_point(post, control)
    assert best is not None  # post is not empty
    ctrl = control.get((best.budget, best.step))
    fact.update(status="run", k=best.k, n=best.n)
    fact.update(control_k=ctrl.k if ctrl else None, control_n=ctrl.n if ctrl else None)
    return fact


def _attack_fact(cells: Sequence[CellRecord], name: str, metric: str) -> dict[str, object] | None:
    mine = [c for c in cells if c.attack == name and c.surface not in ("utility", "baseline")]
    if not mine:
        return None
    surface = mine[0].surface
    fact: dict[str, object] = {"name": name, "surface": surface}
    if any(c.adjudicating is False for c in mine):
        fact["adjudicating"] = False
    risk = next((c.risk for c in mine if c.risk), None)
    if risk is not None:
        fact["risk"] = risk
    worst = worst_status(c.status for c in mine)
    if worst is not None:
        hit = next(c for c in mine if c.status == worst)
        return {**fact, "status": worst, "reason": hit.reason or worst}
    by_state = {c.model_state: c for c in mine if c.metric == metric and c.checkpoint == "final"}
    post = by_state.get(POST)
    if post is None:
        return {**fact, "status": "not_run", "reason": "the post-removal model was not attacked"}
    ctrl = by_state.get(CONTROL)
    fact.update(status="run", k=post.k, n=post.n)
    fact.update(control_k=ctrl.k if ctrl else None, control_n=ctrl.n if ctrl else None)
    return fact


#: The Class D surfaces in the order :func:`battery_names` lists a risk's measurements.
_SURFACE_ORDER = ("inference_time", "relearning")


def battery_names(cells: Sequence[CellRecord]) -> list[str]:
    """Class D measurement names in the records: by risk (D-2, D-3, D-4), surface, then first appearance."""

    first: dict[str, tuple[int, int, int]] = {}
    for i, c in enumerate(cells):
        risk = c.risk
        if risk is not None and c.attack not in first:
            surface = _SURFACE_ORDER.index(c.surface) if c.surface in _SURFACE_ORDER else len(_SURFACE_ORDER)
            first[c.attack] = (CLASS_D_RISKS.index(risk), surface, i)
    return sorted(first, key=lambda name: first[name])


def _battery_fact(cells: Sequence[CellRecord], name: str) -> dict[str, object]:
    from remnant.statement.classd_bar import net_rate as classd_net_rate

    mine = [c for c in cells if c.attack == name and c.risk is not None]
    risk = next(r for c in mine if (r := c.risk) is not None)
    surface = mine[0].surface
    fact: dict[str, object] = {"name": name, "surface": surface, "risk": risk}
    worst = worst_status(c.status for c in mine)
    if worst is not None:
        # the post-removal model's cell gives the reason where it has that status (D-5.1)
        hit = next((c for c in mine if c.status == worst and c.model_state == POST), None)
        hit = hit or next(c for c in mine if c.status == worst)
        return {**fact, "status": worst, "reason": hit.reason or worst}
    post = [c for c in mine if c.model_state == POST and c.status == "run"]
    target = {c.checkpoint: c for c in post if c.metric == "kappa"}
    control = {c.checkpoint: c for c in post if c.metric == CONTROL_ENTITIES}
    if not target:
        return {**fact, "status": "not_run", "reason": "the post-removal model was not measured"}

    def upper(checkpoint: str) -> float:
        t, c = target[checkpoint], control.get(checkpoint)
        return classd_net_rate(
            name,
            risk,
            t.k,
            t.n,
            c.k if c else None,
            c.n if c else None,
            t.baseline,
        ).net_upper

    # One checkpoint ("final") at inference time; under relearning the most adverse point of the curve (C-W3).
    chosen = max(target, key=lambda cp: (upper(cp), target[cp].k / target[cp].n, -list(target).index(cp)))
    t, c = target[chosen], control.get(chosen)
    fact.update(status="run", k=t.k, n=t.n)
    fact.update(control_k=c.k if c else None, control_n=c.n if c else None)
    # V1a: the never-modified control model under the identical measurement, at the same checkpoint
    model_control = next(
        (
            x
            for x in mine
            if x.model_state == CONTROL
            and x.status == "run"
            and x.metric == "kappa"
            and x.checkpoint == chosen
        ),
        None,
    )
    if model_control is not None:
        fact.update(control_model_k=model_control.k, control_model_n=model_control.n)
    baseline = t.baseline
    if baseline:
        fact["baseline"] = float(baseline)
    if surface == "relearning":
        fact["checkpoint"] = chosen
    return fact


def battery_facts(cells: Sequence[CellRecord]) -> list[dict[str, object]]:
    """The risk-tagged attack facts of the Class D battery, from the post-removal model's records (D-5.1).

    ``control_k``/``control_n`` are the never-installed control entities under the identical measurement on the
    same state (D4); the never-modified control model's battery cells are reported in the statement's cells."""
    facts = []
    for name in battery_names(cells):
        fact = _battery_fact(cells, name)
        fact.pop("checkpoint", None)  # AttackFact has no checkpoint; the record and class_d block carry it
        facts.append(fact)
    return facts


def _utility_readings(cells: Sequence[CellRecord]) -> list[CellRecord]:
    """Every utility reading that ran (each carries its metric and value: records.CellRecord checks it, R10)."""
    return [
        c
        for c in cells
        if c.surface == "utility"
        and c.status == "run"
        and c.utility_metric is not None
        and c.value is not None
    ]


def utility_values(cells: Sequence[CellRecord]) -> dict[tuple[str, str, str, str], float]:
    """(attack, checkpoint, state, metric name) → value, for every utility cell that ran."""
    return {
        (c.attack, c.checkpoint, c.model_state, str(c.utility_metric)): float(c.value or 0.0)
        for c in _utility_readings(cells)
    }


def utility_budgets(cells: Sequence[CellRecord]) -> dict[str, int]:
    """Checkpoint → relearning budget of every utility reading taken on a relearned copy (R12, C-W4)."""
    return {c.checkpoint: c.budget for c in _utility_readings(cells) if c.budget is not None}


def utility_facts(cfg: AssessmentConfig, cells: Sequence[CellRecord]) -> dict[str, object]:
    """Removal-stage u = min over metrics of u(θ_U)/u(θ) (R9, R11); attack-stage u = min over metrics of the
    relearned post-removal model's value over θ_U's, at the largest budget relearned (R12, C-W4); the rule is
    :func:`remnant.standard.derive.utility_stages`, which remnant validate applies to a statement's cells."""
    return utility_stages(utility_values(cells), cfg.utility.metrics, utility_budgets(cells))


def installation_fact(cfg: AssessmentConfig, pre_state: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """How the target was fixed (R2), as the facts' ``installation``: from the pre-removal state's entry in the run's
    ``states`` context (its record's ``install``: κ on the installed items, k/n, reached) against the config's
    pre-registered ``target_kappa``; for a claimant's pre-removal folder, the config's documented provenance; None
    when the config records neither. A record that is missing, or disagrees with the config or with itself, is
    a RecordError naming R2: no statement is written over an installation it cannot state."""
    budget = cfg.models.pre_removal.install
    if budget is None:
        provenance = cfg.target.provenance
        return {"fixed_by": "provenance", "provenance": provenance} if provenance else None
    where = "records.jsonl: the states context's pre_removal record"
    record = ((pre_state or {}).get("record") or {}).get("install")
    if not isinstance(record, Mapping):
        raise RecordError(f"{where} carries no installation result (install)", requirement="R2")
    k, n, target, reached = record.get("k"), record.get("n"), record.get("target"), record.get("reached")
    if not (
        isinstance(k, int) and isinstance(n, int) and 0 <= k <= n and n > 0 and isinstance(reached, bool)
    ):
        raise RecordError(
            f"{where}: install.k {k!r} and install.n {n!r} are not a count 0 ≤ k ≤ n, or install.reached "
            f"{reached!r} is not true or false",
            requirement="R2",
        )
    if not isinstance(target, int | float) or float(target) != budget.target_kappa:
        raise RecordError(
            f"{where}: install.target {target!r} is not the pre-registered target_kappa {budget.target_kappa:g}",
            requirement="R2",
        )
    kappa = record.get("kappa")
    if not isinstance(kappa, int | float) or not math.isclose(float(kappa), k / n, abs_tol=1e-9):
        raise RecordError(f"{where}: install.kappa {kappa!r} is not k/n = {k}/{n}", requirement="R2")
    fact = {
        "fixed_by": "installation",
        "metric": "kappa",  # the installation target is declared on κ (models.pre_removal.install.target_kappa)
        "k": k,
        "n": n,
        "measured": k / n,
        "target": budget.target_kappa,
        # the installation's own finding: false when κ fell short, and also when training diverged
        "reached": reached,
    }
    try:
        InstallationFact.model_validate(fact)
    except ValidationError as exc:
        message = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
        raise RecordError(f"{where}: {message}", requirement="R2") from None
    return fact


def build_facts(
    cfg: AssessmentConfig,
    cells: Sequence[CellRecord],
    *,
    chance_rate: float | None = None,
    installation: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """The verdict facts (V1; ``remnant verdict``'s input) from the cell records (every attack of the config,
    run or not) and how the target was fixed (``installation``, from :func:`installation_fact`; R2)."""
    metric = _gating(cfg)
    attacks: list[dict[str, object]] = []
    for name in attack_order(cfg):
        fact = (
            _relearning_fact(cells, name, metric)
            if name in (RELEARNING, SCORED_ARM)
            else _attack_fact(cells, name, metric)
        )
        if fact is None:
            fact = {
                "name": name,
                "surface": "relearning" if name.startswith(RELEARNING) else "inference_time",
            }
            fact.update(status="not_run", reason="no cell was recorded for this attack")
        attacks.append(fact)
    attacks += battery_facts(cells)  # Class D battery (remnant.assess.classd; D-5.1)
    facts: dict[str, object] = {
        "standard_version": STANDARD_VERSION,
        "class": cfg.claim_class,
        "track": cfg.track,
        "gating_metric": cfg.gating_metric,
        "tau": cfg.tau,
        "phi": cfg.utility.phi,
        "evidence_rule": cfg.evidence_rule,
        "utility": utility_facts(cfg, cells),
        "attacks": attacks,
    }
    if chance_rate:
        facts["chance_rate"] = chance_rate
    if cfg.class_d is not None:
        facts["insignificance"] = {
            "threshold": cfg.class_d.insignificance_threshold,
            "justification": cfg.class_d.justification,
        }
    if installation is not None:
        facts["installation"] = dict(installation)
    return facts


def curves(
    cfg: AssessmentConfig, cells: Sequence[CellRecord], *, chance_rate: float | None = None
) -> list[RelearningCurve]:
    """One curve per relearning arm and budget: both states at every scored checkpoint (C-W5, C-W3)."""
    metric = _gating(cfg)
    out: list[RelearningCurve] = []
    for arm in (RELEARNING, SCORED_ARM):
        post = relearn_points(cells, arm, POST, metric)
        control = {(p.budget, p.step): p for p in relearn_points(cells, arm, CONTROL, metric)}
        split = cfg.attacks.relearning.split if cfg.attacks.relearning else "item-disjoint"
        for budget in sorted({p.budget for p in post}):
            points = []
            for p in (q for q in post if q.budget == budget):
                c = control.get((p.budget, p.step))
                points.append(
                    CurvePoint(
                        checkpoint=f"step-{p.step} (epoch {p.epoch:.2f})",
                        step=p.step,
                        examples=p.examples,
                        post_k=p.k,
                        post_n=p.n,
                        control_k=c.k if c else None,
                        control_n=c.n if c else None,
                    )
                )
            out.append(
                RelearningCurve(
                    attack=arm,
                    budget=budget,
                    split=split if arm == RELEARNING else "scored items",
                    adjudicating=arm == RELEARNING,
                    metric=metric,
                    tau=cfg.tau,
                    chance_rate=chance_rate or 0.0,
                    points=points,
                )
            )
    return out


def _cell(c: CellRecord, cell_id: str, metric: str, chance: float) -> Cell | None:
    if c.status != "run" or c.n < 1 or c.model_state not in (POST, CONTROL, PRE):
        return None
    net = net_rate(c.k, c.n, chance if metric != "utility" else 0.0)
    return Cell(
        cell_id=cell_id,
        model_state=c.model_state,
        attack=c.attack,
        surface=c.surface,
        metric=metric,
        k=c.k,
        n=c.n,
        rate=net.point,
        ci95=(net.lower, net.upper),
    )


def _utility_is_count(c: CellRecord) -> bool:
    """Whether a utility record's value is its k/n, so its cell's rate is the value the utility facts used."""
    return (
        bool(c.proportion)
        and c.n > 0
        and c.value is not None
        and math.isclose(c.value, c.k / c.n, rel_tol=0.0, abs_tol=1e-12)
    )


def extra_cells(
    cfg: AssessmentConfig, cells: Sequence[CellRecord], *, chance_rate: float | None = None
) -> list[Cell]:
    """Every per-cell result beyond the facts' own (R22): w beside κ (R6), baselines, utility cells and every
    relearning checkpoint, each with k, n and its Wilson interval (R19). Ids carry metric and checkpoint."""
    out: dict[str, Cell] = {}  # by id, the first of each
    chance = chance_rate or 0.0
    for c in cells:
        if c.metric not in ("kappa", "w", "utility"):
            continue
        if c.metric == "utility" and not _utility_is_count(c):
            continue  # a value that is not k/n (perplexity, a net-of-chance κ) has no rate to report as a cell
        label = f"{c.utility_metric if c.metric == 'utility' else c.metric}@{c.checkpoint}"
        cell = _cell(c, f"{c.attack}/{c.surface}/{c.model_state}/{label}", c.metric, chance)
        if cell is not None:
            out.setdefault(cell.cell_id, cell)
    return list(out.values())


def general_met(
    cfg: AssessmentConfig, facts: Mapping[str, object], *, minted_canaries: bool
) -> frozenset[str]:
    """The §3 requirements this run meets by construction, as ids (tier evidence, §7.1).

    The pipeline itself secures most of them: the claim (R1), installation (R2), the control at every stage with
    identical inputs (R3, R4), κ and w apart (R6), declared g (R7, R8 when g is κ), u and φ (R9–R13), the frozen
    pre-registration and deviations (R14, R15), the pack's split checks (R16), Wilson intervals (R19), the bound
    rule (R20), per-cell results (R22), the manifest (R23–R25). R17 (contamination of P) is met only for canaries
    minted as fictional entities behind a collision filter (D1, D2); R5 is met by reporting the control's baseline
    beside every rate. R18 and R21 are tier caps and bounds, checked elsewhere. R2 is not met by an installation
    that did not reach its target: the target's presence at the declared strength is then not known.
    """
    met = {str(rule) for rule in GENERAL_REQUIREMENTS} - {"R8", "R17", "R18", "R21"}
    if cfg.gating_metric == "kappa":
        met.add("R8")
    if minted_canaries:
        met.add("R17")
    met -= unmet_without_utility(facts)
    installation = facts.get("installation")
    if isinstance(installation, Mapping) and holding_of(installation) == "unreached":
        met.discard("R2")
    return frozenset(met)


def evidence(
    cfg: AssessmentConfig,
    facts: Mapping[str, object],
    verdict: str,
    *,
    deviations: int,
    minted_canaries: bool,
    public_fixture: bool = False,
) -> EvidenceSummary:
    """The tier evidence (§7.1) from the same facts the verdict read."""
    rel = cfg.attacks.relearning
    return EvidenceSummary.model_validate(
        {
            "track": cfg.track,
            "class": cfg.claim_class,
            "threshold": cfg.bar_threshold,
            "general_met": general_met(cfg, facts, minted_canaries=minted_canaries),
            "behavioural_n": behavioural_n(facts),
            "surfaces": surfaces_from_facts(
                facts,
                scored_every_epoch=rel is not None and rel.enabled,
                sub_epoch_checkpoints=rel is not None and bool(rel.first_epoch_checkpoints),
                held_out=rel is not None and rel.split == "item-disjoint",
            ),
            "verdict": verdict,
            "conformant_run": True,
            "public_fixture": public_fixture,
            "deviations": deviations,
        }
    )


__all__ = [
    "SCORED_ARM",
    "attack_order",
    "battery_facts",
    "battery_names",
    "build_facts",
    "curves",
    "evidence",
    "extra_cells",
    "general_met",
    "installation_fact",
    "relearn_points",
    "utility_facts",
]


def format_checks(
    cfg: AssessmentConfig, cells: Sequence[CellRecord], installation: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """C-Q3 for each inference-time and weight-transform attack, from the records alone (no torch).

    The attack's rate on P minus the unattacked rate, on the post-removal and the pre-removal model (identical
    items and generation settings per state), read by :func:`remnant.standard.cq3.explain`: format disruption
    where it lowers the pre-removal score too, specific to the removal where that score holds, undetermined
    without a pre-removal run or over an installation that did not reach its target (``installation``, the facts'
    R2 record); a reason says the pre-removal model holds the target only where its installation reached it."""
    metric = _gating(cfg)
    holding = holding_of(installation)

    def rates(name: str) -> dict[str, float]:
        return {
            c.model_state: c.k / c.n
            for c in cells
            if c.attack == name
            and c.metric == metric
            and c.checkpoint == "final"
            and c.status == "run"
            and c.n
        }

    base = rates(NONE)
    names = sorted(
        {
            c.attack
            for c in cells
            if c.surface in ("inference_time", "weight_transform") and c.attack != NONE and c.risk is None
        }
    )
    out: list[dict[str, object]] = []
    for name in names:
        att = rates(name)
        if POST not in att or POST not in base:
            continue  # not run on the post-removal model: C-Q2 reports it, there is no score to explain
        post_delta = att[POST] - base[POST]
        check: dict[str, object] = {"attack": name, "post_delta": round(post_delta, 6)}
        pre_delta = att[PRE] - base[PRE] if PRE in att and PRE in base else None
        if pre_delta is not None:
            check["pre_delta"] = round(pre_delta, 6)
        explanation, reason = explain(post_delta, pre_delta, holding)
        check.update(explanation=explanation, reason=reason)
        out.append(check)
    return out
