"""``remnant study meta-eval POOL_DIR``: which audit can be trusted — faithfulness, robustness, the ranking.

For every metric of the pool's results table (oriented so higher = more knowledge): faithfulness
(:mod:`.faithfulness`: AUC of the target pool against the never-saw pool, with its interval and threshold),
robustness (:mod:`.robustness`: Q under NF4, R under one epoch of relearning, HM(Q, R), with the UDS paper's
filters and reference shift) and overall = HM(AUC, robustness), ranked, beside the UDS paper's figures
(:mod:`.published`). Pure computation over the table: no model is loaded. A meta-evaluation ranks measurements;
it never moves a verdict (C-H6: a latent audit stays non-adjudicating whatever its rank, C-H9).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from remnant.stats import harmonic_mean
from remnant.studies.config import MetaEvalConfig
from remnant.studies.faithfulness import Faithfulness, faithfulness
from remnant.studies.orientation import Orientation, resolve
from remnant.studies.published import UDS_PAPER, UDS_PAPER_SOURCE
from remnant.studies.robustness import Robustness, robustness
from remnant.studies.tables import PoolTable


class PaperRow(BaseModel):
    """The UDS paper's figures for the same metric (the UDS paper §4)."""

    model_config = ConfigDict(extra="forbid")

    label: str = Field(description="The paper's metric label.")
    auc: float = Field(description="Published AUC.")
    q: float | None = Field(description="Published Q.")
    r: float | None = Field(description="Published R.")
    hm: float | None = Field(description="Published HM(Q, R).")
    overall: float | None = Field(description="HM(AUC, HM).")


class MetricResult(BaseModel):
    """One metric's meta-evaluation."""

    model_config = ConfigDict(extra="forbid")

    metric: str = Field(description="Metric (results-table column).")
    orientation: Orientation = Field(description="How m was formed (higher = more knowledge).")
    faithfulness: Faithfulness = Field(description="AUC of target vs never-saw.")
    robustness: Robustness = Field(description="Q, R, HM.")
    overall: float | None = Field(description="HM(AUC, robustness HM).")
    rank: int | None = Field(description="Rank by overall (1 = best), ties by AUC.")
    paper: PaperRow | None = Field(description="The UDS paper's row for this metric, when it has one.")


class MetaEvalResult(BaseModel):
    """The study's record: config, pool, registration, one row per metric, what was left out and why."""

    model_config = ConfigDict(extra="forbid")

    study: Literal["meta-eval"] = Field(default="meta-eval", description="Study kind.")
    adjudicating: Literal[False] = Field(default=False, description="Never moves a verdict (C-H6).")
    config: MetaEvalConfig = Field(description="The pre-registered config.")
    pool: str = Field(description="The results table read.")
    pool_digest: str = Field(description="sha256 of the results table's bytes.")
    registration: dict[str, Any] | None = Field(default=None, description="prereg digest, time, deviations.")
    pools: dict[str, int] = Field(description="Models per pool in the table.")
    metrics: list[MetricResult] = Field(description="Per metric, in ranking order.")
    skipped: dict[str, str] = Field(description="Metrics left out, with the reason.")
    paper_source: str = Field(default=UDS_PAPER_SOURCE, description="Where the paper's figures come from.")


def _paper(metric: str) -> PaperRow | None:
    row = UDS_PAPER.get(metric)
    if row is None:
        return None
    return PaperRow(label=row.label, auc=row.auc, q=row.q, r=row.r, hm=row.hm, overall=row.overall)


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
        paper=_paper(metric),
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


def meta_eval(
    table: PoolTable, cfg: MetaEvalConfig, *, registration: dict[str, Any] | None = None
) -> MetaEvalResult:
    """The whole study over one pool table."""
    metrics, skipped = resolve(table.metric_columns, cfg.metrics, cfg.orientation)
    results = [evaluate_metric(table, m, how, cfg) for m, how in metrics.items()]
    return MetaEvalResult(
        config=cfg,
        pool=table.source,
        pool_digest=table.digest,
        registration=registration,
        pools={p: len(table.models(p)) for p in ("target", "never_saw", "unlearned", "base")},
        metrics=rank(results),
        skipped=skipped,
    )


__all__ = ["MetaEvalResult", "MetricResult", "PaperRow", "evaluate_metric", "meta_eval", "rank"]
