"""``remnant study meta-eval POOL_DIR``: which audit can be trusted — faithfulness, robustness, the ranking.

For every metric of the pool's results table (oriented so higher = more knowledge): faithfulness
(:mod:`.faithfulness`: AUC of the target pool against the never-saw pool, with its interval and threshold),
robustness (:mod:`.robustness`: Q under NF4, R under one epoch of relearning, HM(Q, R), with the UDS paper's
filters and reference shift) and overall = HM(AUC, robustness), ranked, beside the UDS paper's figures
(:mod:`.published`). Pure computation over the table: no model is loaded. A meta-evaluation ranks measurements;
it never moves a verdict (C-H6: a latent audit stays non-adjudicating whatever its rank, C-H9).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Literal

from pydantic import Field, model_validator

from remnant.results import PoolTable
from remnant.stats import harmonic_mean
from remnant.studies.config import MetaEvalConfig, StudyModel, with_legacy_values
from remnant.studies.faithfulness import Faithfulness, faithfulness
from remnant.studies.orientation import Orientation, resolve
from remnant.studies.published import UDS_PAPER, UDS_PAPER_SOURCE
from remnant.studies.robustness import Robustness, retain_model, robustness


class PaperRow(StudyModel):
    """The UDS paper's figures for the same metric (the UDS paper §4)."""

    label: str = Field(description="The paper's metric label.")
    auc: float = Field(description="Published AUC.")
    q: float | None = Field(description="Published Q.")
    r: float | None = Field(description="Published R.")
    hm: float | None = Field(description="Published HM(Q, R).")
    overall: float | None = Field(description="HM(AUC, HM).")


class MetricResult(StudyModel):
    """One metric's meta-evaluation."""

    metric: str = Field(description="Metric (results-table column).")
    orientation: Orientation = Field(description="How m was formed (higher = more knowledge).")
    faithfulness: Faithfulness = Field(description="AUC of target vs never-saw.")
    robustness: Robustness = Field(description="Q, R, HM.")
    overall: float | None = Field(description="HM(AUC, robustness HM).")
    rank: int | None = Field(description="Rank by overall (1 = best), ties by AUC.")
    paper: PaperRow | None = Field(description="The UDS paper's row for this metric, when it has one.")


class MetaEvalResult(StudyModel):
    """The study's record: config, pool, registration, one row per metric, what was left out and why."""

    study: Literal["meta-eval"] = Field(default="meta-eval", description="Study kind.")
    adjudicating: Literal[False] = Field(default=False, description="Never moves a verdict (C-H6).")
    config: MetaEvalConfig = Field(description="The pre-registered config.")
    pool: str = Field(description="The results table read.")
    pool_digest: str = Field(description="sha256 of the results table's bytes.")
    registration: dict[str, Any] | None = Field(default=None, description="prereg digest, time, deviations.")
    pools: dict[str, int] = Field(description="Models per pool in the table.")
    metrics: list[MetricResult] = Field(description="Per metric, in ranking order.")
    skipped: dict[str, str] = Field(description="Metrics left out, with the reason.")
    rankable: bool | None = Field(
        default=None,
        description="Whether the pools support ranking the metrics (None: written before this was checked).",
    )
    rankable_reason: str = Field(default="", description="Why the ranking is, or is not, supported.")
    paper_source: str = Field(default=UDS_PAPER_SOURCE, description="Where the paper's figures come from.")

    @model_validator(mode="before")
    @classmethod
    def _legacy_config(cls, data: Any) -> Any:
        # a result written before a config field existed was computed under its old value (LEGACY_VALUES)
        if isinstance(data, dict) and isinstance(data.get("config"), dict):
            return {**data, "config": with_legacy_values("meta-eval", data["config"])}
        return data


def evaluate_metric(table: PoolTable, metric: str, how: Orientation, cfg: MetaEvalConfig) -> MetricResult:
    """Faithfulness, robustness and overall of one metric."""
    faith = faithfulness(
        table,
        metric,
        how,
        seed=cfg.seed,
        n_resamples=cfg.n_resamples,
        level=cfg.level,
        min_per_pool=cfg.min_per_pool,
        threshold_rule=cfg.threshold_rule,
    )
    robust = robustness(
        table,
        metric,
        how,
        faith.threshold,
        seed=cfg.seed,
        utility_floor=cfg.utility_floor,
        faithfulness_filter=cfg.faithfulness_filter,
        shift_rule=cfg.reference_shift,
        reference_model=retain_model(table, cfg.retain_model)
        if cfg.reference_shift == "retain_model"
        else None,
        eps=cfg.epsilon,
        n_resamples=cfg.n_resamples,
        level=cfg.level,
    )
    overall = None
    if faith.auc is not None and robust.hm is not None:
        overall = harmonic_mean([faith.auc, robust.hm])
    return MetricResult(
        metric=metric,
        orientation=how,
        faithfulness=faith,
        robustness=robust,
        overall=overall,
        rank=None,
        paper=PaperRow(**asdict(row), overall=row.overall) if (row := UDS_PAPER.get(metric)) else None,
    )


def rank(results: list[MetricResult]) -> list[MetricResult]:
    """Sorted by overall (then AUC, then name); ranks given to those with an overall score."""

    def key(r: MetricResult) -> tuple[float, float, str]:
        return (
            -(r.overall if r.overall is not None else -1.0),
            -(r.faithfulness.auc if r.faithfulness.auc is not None else -1.0),
            r.metric,
        )

    ordered = sorted(results, key=key)
    position = 0
    for r in ordered:
        if r.overall is not None:
            position += 1
            r.rank = position
    return ordered


def rankability(pools: dict[str, int], ranked: list[MetricResult], min_pool: int) -> tuple[bool, str]:
    """Whether an order of the metrics is supported: every studied pool holds ``min_pool`` models, and at least
    two ranked metrics have AUC intervals that do not overlap (the overall score has no interval of its own)."""
    small = [
        f"{p} {pools.get(p, 0)}" for p in ("target", "never_saw", "unlearned") if pools.get(p, 0) < min_pool
    ]
    if small:
        return False, f"pools too small to rank: {', '.join(small)} models, fewer than min_pool = {min_pool}"
    cis = [r.faithfulness.ci95 for r in ranked if r.rank is not None and r.faithfulness.ci95 is not None]
    if len(cis) < 2:
        return False, f"{len(cis)} metric(s) with an overall score and an AUC interval: nothing to rank"
    if not any(a[0] > b[1] for a in cis for b in cis):
        return False, "every pair of metrics' AUC intervals overlaps: no order of the metrics is supported"
    return True, f"every pool holds ≥ {min_pool} models and some AUC intervals are disjoint"


def meta_eval(
    table: PoolTable, cfg: MetaEvalConfig, *, registration: dict[str, object] | None = None
) -> MetaEvalResult:
    """The whole study over one pool table."""
    metrics, skipped = resolve(table.metric_columns, cfg.metrics, cfg.orientation)
    ranked = rank([evaluate_metric(table, m, how, cfg) for m, how in metrics.items()])
    pools = {p: len(table.models(p)) for p in ("target", "never_saw", "unlearned", "base")}
    rankable, reason = rankability(pools, ranked, cfg.min_pool)
    return MetaEvalResult(
        config=cfg,
        pool=table.source,
        pool_digest=table.digest,
        registration=registration,
        pools=pools,
        metrics=ranked,
        skipped=skipped,
        rankable=rankable,
        rankable_reason=reason,
    )


__all__ = [
    "MetaEvalResult",
    "MetricResult",
    "PaperRow",
    "evaluate_metric",
    "meta_eval",
    "rank",
    "rankability",
]
