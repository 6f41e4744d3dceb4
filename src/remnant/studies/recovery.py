"""``remnant study recovery POOL_DIR``: does a pre-attack metric predict recovery under relearning (the J-Access paper, Test 2).

Outcomes, per unlearned model (the pool's ``relearn`` row against its ``none`` row, on the outcome metric):

* *excess revival* (``outcome_kind = "revival"``, the paper's): an item revives when its relearned value reaches
  ``revival_fraction`` (½) of the original model's value, having been below that before the attack; the
  model's revival rate is revived / eligible items, and the excess is that rate minus the never-saw models'
  (the gold retain-only model attacked identically). The original model is the unlearned model's ``parent``
  (the target pool's per-item mean when it has none, and for the never-saw models);
* *excess shift* (``"shift"``, needing no items table): the change of the outcome's m minus the never-saw
  models' mean change;
* *steps to recover*: a results column (``steps_column``); a missing value is censored at ``steps_horizon``
  when one is declared, else left out.

Analyses, for every predictor metric (m, higher = more knowledge, read before the attack): Spearman ρ over all
unlearned models with its p-value; the partial ρ controlling for the declared covariates (forget quality and
utility, ranks residualised); ρ within each method pooled by inverse-variance weighting after Fisher's z; ρ with
steps to recover; the item-level AUROC of which facts revive (the predictor's per-item value, median over models
with both classes). Holm adjusts each family of p-values across metrics. Non-adjudicating (C-H6).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import Field

from remnant.errors import ConfigError
from remnant.results import PoolTable
from remnant.stats import fisher_pool, holm, partial_spearman, roc_auc, spearman_test
from remnant.studies.config import RecoveryConfig, StudyModel
from remnant.studies.orientation import DEFAULT_ORIENTATION, Orientation, orient, oriented_shift, resolve

_AUTO_OUTCOMES = ("kappa", "forget_Q_A_ROUGE", "forget_Q_A_Prob")


class Correlation(StudyModel):
    """A rank correlation with its p-value, Holm-adjusted across metrics."""

    rho: float | None = Field(description="Spearman ρ (None: too few models or a constant input).")
    p: float | None = Field(description="Two-sided p-value.")
    p_holm: float | None = Field(default=None, description="Holm-adjusted across the study's metrics.")
    n: int = Field(description="Models behind ρ.")
    significant: bool = Field(default=False, description="p_holm < alpha.")


class WithinMethod(Correlation):
    """ρ per method and their Fisher-z pooled value."""

    ci95: tuple[float, float] | None = Field(default=None, description="Pooled interval.")
    per_method: dict[str, tuple[float | None, int]] = Field(description="ρ and n per method.")


class ItemLevel(StudyModel):
    """Which facts come back: the median per-model AUROC of the predictor's item values."""

    median_auroc: float | None = Field(description="Median over models with both classes.")
    n_models: int = Field(description="Models with revived and non-revived eligible items.")
    per_model: dict[str, float] = Field(default_factory=dict, description="AUROC per model.")


class PredictorResult(StudyModel):
    """Every analysis for one predictor metric."""

    metric: str = Field(description="Predictor.")
    orientation: Orientation = Field(description="How m was formed.")
    pooled: Correlation = Field(description="ρ with recovery over all unlearned models.")
    partial: Correlation = Field(description="ρ controlling for the covariates.")
    covariates: list[str] = Field(description="Covariates the partial ρ used.")
    within_method: WithinMethod = Field(description="Fisher-z pooled within-method ρ.")
    steps: Correlation = Field(description="ρ with steps to recover (negative: predicts faster recovery).")
    item_level: ItemLevel | None = Field(description="Item-level AUROC (revival outcome with item values).")
    values: dict[str, float] = Field(
        default_factory=dict, description="m before the attack, per scored model."
    )


class ModelOutcome(StudyModel):
    """One unlearned model's outcome."""

    model: str = Field(description="Model id.")
    method: str | None = Field(description="Removal method.")
    recovery: float | None = Field(
        description="Excess revival (or excess shift): net of the never-saw level when the pool gives one "
        "(RecoveryResult.gold_rate), else the raw revival rate (or shift)."
    )
    rate: float | None = Field(default=None, description="Raw revival rate (revival outcome).")
    steps: float | None = Field(description="Steps to recover (censored at the horizon when declared).")


class RecoveryResult(StudyModel):
    """The study's record."""

    study: Literal["recovery"] = Field(default="recovery", description="Study kind.")
    adjudicating: Literal[False] = Field(default=False, description="Never moves a verdict (C-H6).")
    config: RecoveryConfig = Field(description="The pre-registered config.")
    pool: str = Field(description="The results table read.")
    pool_digest: str = Field(description="sha256 of the results table.")
    registration: dict[str, Any] | None = Field(default=None, description="prereg digest, time, deviations.")
    outcome: str = Field(description="The metric recovery was read on.")
    gold_rate: float | None = Field(description="The never-saw models' mean revival rate (or shift).")
    outcomes: list[ModelOutcome] = Field(description="Per unlearned model.")
    predictors: list[PredictorResult] = Field(description="Per predictor metric.")
    skipped: dict[str, str] = Field(description="Metrics left out, with the reason.")
    notes: list[str] = Field(default_factory=list, description="What could not be computed and why.")
    rankable: bool | None = Field(
        default=None,
        description="Whether the pool supports comparing the predictors (None: written before this was checked).",
    )
    rankable_reason: str = Field(default="", description="Why the comparison is, or is not, supported.")


def resolve_outcome(table: PoolTable, cfg: RecoveryConfig) -> tuple[str, Orientation]:
    """The outcome metric (``auto``: the first of kappa, forget_Q_A_ROUGE, forget_Q_A_Prob present)."""
    name = cfg.outcome
    if name == "auto":
        name = next((m for m in _AUTO_OUTCOMES if m in table.metric_columns), "")
        if not name:
            raise ConfigError(
                f"{table.source}: no outcome column ({', '.join(_AUTO_OUTCOMES)}); set outcome in the study config",
                requirement="R14",
            )
    elif name not in table.metric_columns:
        raise ConfigError(f"{table.source}: outcome {name!r} is not a column", requirement="R14")
    how = cfg.orientation.get(name, DEFAULT_ORIENTATION.get(name))
    if how is None:
        raise ConfigError(
            f"outcome {name!r}: orientation unknown; declare orientation.{name}", requirement="R14"
        )
    return name, how


class _Revival:
    """Item-level revival of the outcome: per model, eligible items and which revived."""

    def __init__(self, table: PoolTable, metric: str, how: Orientation, fraction: float) -> None:
        self.table, self.fraction = table, fraction
        self.before = {
            m: {i: orient(v, how) for i, v in d.items()} for m, d in table.item_values(metric).items()
        }
        self.after = {
            m: {i: orient(v, how) for i, v in d.items()}
            for m, d in table.item_values(metric, "relearn").items()
        }
        self.target_models = set(table.models("target"))
        targets = [self.before[m] for m in sorted(self.target_models) if m in self.before]
        keys = sorted(set().union(*targets)) if targets else []
        self.target_mean = {k: float(np.mean([t[k] for t in targets if k in t])) for k in keys}

    def original(self, model: str) -> dict[str, float]:
        """The model that held the target: the parent when it is in the target pool (an unlearned model's
        install), else the target pool's per-item mean (a never-saw model's parent is the base model, which never
        held it, so its items would never be eligible)."""
        row = self.table.row(model, "none")
        if row is not None and row.parent in self.target_models and row.parent in self.before:
            return self.before[row.parent]
        return self.target_mean

    def eligible(self, model: str) -> list[str]:
        """Items the original model holds (> 0) on which ``model`` was below the bar before the attack."""
        before, orig = self.before.get(model, {}), self.original(model)
        return [i for i, o in orig.items() if o > 0 and i in before and before[i] < self.fraction * o]

    def labels(self, model: str) -> dict[str, bool]:
        """Eligible items (original > 0, below the bar before) → revived after the attack."""
        after, orig = self.after.get(model, {}), self.original(model)
        return {i: after[i] >= self.fraction * orig[i] for i in self.eligible(model) if i in after}

    def rate(self, model: str) -> float | None:
        labels = self.labels(model)
        return sum(labels.values()) / len(labels) if labels else None


def _steps(table: PoolTable, model: str, cfg: RecoveryConfig) -> float | None:
    for perturbation in ("relearn", "none"):
        row = table.row(model, perturbation)
        if row is not None and row.ok and cfg.steps_column in row.metrics:
            value = row.metrics[cfg.steps_column]
            if value is not None:
                return value
    return cfg.steps_horizon


def no_gold_reason(table: PoolTable, outcome: str, revival: _Revival | None) -> str:
    """Why the pool gives no never-saw level, as the table shows it: no never-saw model, none relearned, or
    relearned with no eligible item (revival) or no value before and after (shift)."""
    never = table.models("never_saw")
    if not never:
        return "the pool has no never-saw model"
    relearned = [m for m in never if (row := table.row(m, "relearn")) is not None and row.ok]
    if not relearned:
        return f"no never-saw model was relearned ({len(never)} in the pool, no finished relearn row)"
    done = f"{len(relearned)} never-saw model{'s were' if len(relearned) > 1 else ' was'} relearned"
    if revival is None:
        return f"{done}, but none has a value of {outcome!r} both before and after relearning"
    if not any(revival.eligible(m) for m in relearned):
        return (
            f"{done}, but none had an eligible item (one the original model holds on which the never-saw model "
            f"was below the revival bar, {revival.fraction:g} × the original's value, before the attack), so "
            "there is no never-saw revival rate"
        )
    return f"{done}, but none has item values of {outcome!r} after relearning on its eligible items"


def model_outcomes(
    table: PoolTable, cfg: RecoveryConfig, outcome: str, how: Orientation
) -> tuple[list[ModelOutcome], float | None, _Revival | None, list[str]]:
    """Per unlearned model: excess recovery and steps; the gold (never-saw) level; notes."""
    notes: list[str] = []
    revival = None
    if cfg.outcome_kind == "revival":
        if not table.item_values(outcome):
            raise ConfigError(
                f"{table.source}: outcome_kind 'revival' needs item values of {outcome!r} (items table); "
                "use outcome_kind = 'shift'",
                requirement="R14",
            )
        revival = _Revival(table, outcome, how, cfg.revival_fraction)

    def level(model: str) -> float | None:
        if revival is not None:
            return revival.rate(model)
        return oriented_shift(
            table.value(model, outcome, "none"), table.value(model, outcome, "relearn"), how
        )

    gold_levels = [v for m in table.models("never_saw") if (v := level(m)) is not None]
    gold = float(np.mean(gold_levels)) if gold_levels else None
    if gold is None:
        notes.append(f"{no_gold_reason(table, outcome, revival)}: recovery is not net of fresh learning")
    if cfg.steps_column not in table.metric_columns:
        notes.append(f"no {cfg.steps_column!r} column: the steps-to-recover analysis is not available")
    out = []
    for model in table.models("unlearned"):
        raw = level(model)
        row = table.row(model, "none")
        out.append(
            ModelOutcome(
                model=model,
                method=row.method if row is not None else None,
                recovery=None if raw is None else raw - (gold or 0.0),
                rate=raw if revival is not None else None,
                steps=_steps(table, model, cfg) if cfg.steps_column in table.metric_columns else None,
            )
        )
    return out, gold, revival, notes


def _corr(x: Sequence[float], y: Sequence[float]) -> Correlation:
    if len(x) < 3:
        return Correlation(rho=None, p=None, n=len(x))
    rho, p = spearman_test(x, y)
    return Correlation(rho=None if math.isnan(rho) else rho, p=None if math.isnan(p) else p, n=len(x))


def _within(pairs: dict[str, list[tuple[float, float]]], min_n: int) -> WithinMethod:
    per: dict[str, tuple[float | None, int]] = {}
    rhos, ns = [], []
    for method, xy in sorted(pairs.items()):
        c = (
            _corr([a for a, _ in xy], [b for _, b in xy])
            if len(xy) >= min_n
            else Correlation(rho=None, p=None, n=len(xy))
        )
        per[method] = (c.rho, c.n)
        if c.rho is not None:
            rhos.append(c.rho)
            ns.append(c.n)
    if not rhos:
        return WithinMethod(rho=None, p=None, n=0, per_method=per)
    rho, lo, hi, p = fisher_pool(rhos, ns)
    return WithinMethod(rho=rho, p=p, n=sum(ns), ci95=(lo, hi), per_method=per)


def _item_level(
    table: PoolTable, revival: _Revival, metric: str, how: Orientation, models: list[str]
) -> ItemLevel:
    values = table.item_values(metric)
    per_model = {}
    for model in models:
        labels, pred = revival.labels(model), values.get(model, {})
        pos = [orient(pred[i], how) for i, revived in labels.items() if revived and i in pred]
        neg = [orient(pred[i], how) for i, revived in labels.items() if not revived and i in pred]
        if pos and neg:
            per_model[model] = roc_auc(neg, pos)
    median = statistics.median(per_model.values()) if per_model else None
    return ItemLevel(median_auroc=median, n_models=len(per_model), per_model=per_model)


def _partial(table: PoolTable, points: list[tuple[str, float, float]], covariates: list[str]) -> Correlation:
    """Partial ρ over the models whose every covariate has a value (n ≥ covariates + 4)."""
    xs: list[float] = []
    ys: list[float] = []
    cols: list[list[float]] = [[] for _ in covariates]
    for model, xi, yi in points:
        values = [table.value(model, c, "none") for c in covariates]
        if all(v is not None for v in values):
            xs.append(xi)
            ys.append(yi)
            for col, v in zip(cols, values, strict=True):
                col.append(float(v or 0.0))
    if len(xs) < len(covariates) + 4:
        return Correlation(rho=None, p=None, n=len(xs))
    rho, p = partial_spearman(xs, ys, cols)
    return Correlation(rho=None if math.isnan(rho) else rho, p=None if math.isnan(p) else p, n=len(xs))


def predictor(
    table: PoolTable,
    metric: str,
    how: Orientation,
    outcomes: list[ModelOutcome],
    cfg: RecoveryConfig,
    revival: _Revival | None,
) -> PredictorResult:
    """Every analysis of one predictor (p-values unadjusted; :func:`recovery` applies Holm)."""
    rows = [(o, table.value(o.model, metric, "none")) for o in outcomes]
    scored = [(o, orient(v, how)) for o, v in rows if v is not None and o.recovery is not None]
    x, y = [m for _, m in scored], [float(o.recovery or 0.0) for o, _ in scored]
    covariates = [c for c in cfg.covariates if c != metric and (c == "utility" or c in table.metric_columns)]
    partial = _partial(
        table, [(o.model, xi, yi) for (o, _), xi, yi in zip(scored, x, y, strict=True)], covariates
    )
    by_method: dict[str, list[tuple[float, float]]] = {}
    for (o, m), yi in zip(scored, y, strict=True):
        by_method.setdefault(o.method or "(none)", []).append((m, yi))
    steps = [(orient(v, how), float(o.steps)) for o, v in rows if v is not None and o.steps is not None]
    return PredictorResult(
        metric=metric,
        orientation=how,
        pooled=_corr(x, y),
        partial=partial,
        covariates=covariates,
        within_method=_within(by_method, cfg.min_per_method),
        steps=_corr([a for a, _ in steps], [b for _, b in steps]),
        item_level=_item_level(table, revival, metric, how, [o.model for o in outcomes]) if revival else None,
        values={o.model: m for o, m in scored},
    )


def _adjust(results: list[PredictorResult], family: str, alpha: float) -> None:
    cells = [getattr(r, family) for r in results]
    tested = [c for c in cells if c.p is not None]
    for c, adjusted in zip(tested, holm([c.p for c in tested]), strict=True):
        c.p_holm = adjusted
        c.significant = adjusted < alpha


def rankability(
    outcomes: Sequence[ModelOutcome], results: Sequence[PredictorResult], min_pool: int
) -> tuple[bool, str]:
    """Whether the predictors can be told apart: ``min_pool`` unlearned models with an outcome, and two predictors
    whose pooled ρ have disjoint Fisher-z 95 % intervals."""
    n = sum(o.recovery is not None for o in outcomes)
    if n < min_pool:
        return (
            False,
            f"pool too small: {n} unlearned models with an outcome, fewer than min_pool = {min_pool}",
        )
    cis = [fisher_pool([c.rho], [c.n])[1:3] for r in results if (c := r.pooled).rho is not None and c.n >= 4]
    if not any(a[0] > b[1] for a in cis for b in cis):
        return False, "every pair of predictors' ρ intervals (Fisher z, 95 %) overlaps"
    return True, f"{n} unlearned models with an outcome (≥ {min_pool}) and some ρ intervals are disjoint"


def recovery(
    table: PoolTable, cfg: RecoveryConfig, *, registration: dict[str, object] | None = None
) -> RecoveryResult:
    """The whole study over one pool table."""
    outcome, how = resolve_outcome(table, cfg)
    outcomes, gold, revival, notes = model_outcomes(table, cfg, outcome, how)
    metrics, skipped = resolve(
        [c for c in table.metric_columns if c != cfg.steps_column], cfg.metrics, cfg.orientation
    )
    results = [predictor(table, m, o, outcomes, cfg, revival) for m, o in metrics.items()]
    for family in ("pooled", "partial", "within_method", "steps"):
        _adjust(results, family, cfg.alpha)
    rankable, reason = rankability(outcomes, results, cfg.min_pool)
    return RecoveryResult(
        config=cfg,
        pool=table.source,
        pool_digest=table.digest,
        registration=registration,
        outcome=outcome,
        gold_rate=gold,
        outcomes=outcomes,
        predictors=results,
        skipped=skipped,
        notes=notes,
        rankable=rankable,
        rankable_reason=reason,
    )


__all__ = [
    "Correlation",
    "ItemLevel",
    "ModelOutcome",
    "PredictorResult",
    "RecoveryResult",
    "WithinMethod",
    "model_outcomes",
    "no_gold_reason",
    "rankability",
    "recovery",
    "resolve_outcome",
]
