"""The studies' reports: what a researcher would put in a paper, beside the published figures.

Each builder turns a study's result into a :class:`~remnant.studies.document.Document` (Markdown and HTML): the
headline table beside the paper's numbers, the figures (ROC curves; before/after scatters with y = x and the
reference shift; predictor against recovery), the filters and exclusions, and the pre-registration with every
deviation in force (R14, R15). Every report says the measurements are non-adjudicating (C-H6).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from remnant.studies.document import Document, Section, Table, column_table, fmt, fmt_ci
from remnant.studies.goodhart_core import GoodhartResult
from remnant.studies.meta_eval import MetaEvalResult, MetricResult, PaperRow
from remnant.studies.published import (
    ANNEX_B6_DECISION,
    ANNEX_B6_METHODS,
    ANNEX_B6_RHO,
    JACCESS_GOODHART,
    JACCESS_ITEM_AUROC,
    JACCESS_RECOVERY,
    UDS_PAPER_SOURCE,
)
from remnant.studies.readmission import ReadmissionResult
from remnant.studies.recovery import Correlation, PredictorResult, RecoveryResult, WithinMethod

NON_ADJUDICATING = (
    "Non-adjudicating: these figures rank and validate measurements; none of them moves a verdict or a tier "
    "(C-H6). A latent audit's rank here does not readmit it (C-H9)."
)


def registration_section(registration: dict[str, Any] | None, config: Any) -> Section:
    """The pre-registration (digest, time, whether this run froze it), the config, and the deviations (R14, R15)."""
    section = Section("Pre-registration and deviations")
    if registration is None:
        section.text.append("Not pre-registered (the study was computed in memory, not through the command).")
    else:
        when = (
            "frozen by this run, before the table was read"
            if registration["frozen_by_this_run"]
            else ("frozen before this run")
        )
        section.text.append(
            f"Config digest {registration['digest']}, registered {registration['registered_at']} ({when})."
        )
        deviations = registration.get("deviations") or []
        if deviations:
            keys = ["field", "old", "new", "reason", "stage"]
            section.tables.append(Table(keys, [[str(d[k]) for k in keys] for d in deviations]))
        else:
            section.text.append("Deviations: none.")
    values = config.model_dump(mode="json")
    section.tables.append(Table(["field", "value"], [[k, str(v)] for k, v in values.items()]))
    return section


# -- meta-eval ---------------------------------------------------------------------------------------------------


def _paper_cells(p: PaperRow | None, fields: tuple[str, ...]) -> list[str]:
    """A metric's published figures (``fields`` of its UDS paper row), an em dash where the paper has none."""
    return [fmt(getattr(p, f)) if p else "—" for f in fields]


def _meta_row(r: MetricResult) -> list[str]:
    f, rb = r.faithfulness, r.robustness
    return [
        str(r.rank) if r.rank is not None else "—",
        r.metric,
        r.orientation,
        fmt_ci(f.auc, f.ci95),
        f"{fmt(rb.quantization.value)} (n={rb.quantization.n})",
        f"{fmt(rb.relearning.value)} (n={rb.relearning.n})",
        fmt(rb.hm),
        fmt(r.overall),
        *_paper_cells(r.paper, ("auc", "q", "r", "hm", "overall")),
    ]


_THRESHOLD_RULES = {
    "accuracy": "the accuracy-maximising midpoint (the UDS reference code)",
    "youden": "the cut maximising Youden's J (declared; not the reference code's)",
}


def _meta_choices(result: MetaEvalResult) -> str:
    """The declared choices that move Q, R and the filter (docs/studies.md lists them beside the reference code's)."""
    cfg = result.config
    if cfg.reference_shift == "retain_model":
        model = next(
            (r.robustness.reference_model for r in result.metrics if r.robustness.reference_model), None
        )
        shift = f"one retain model's shift ({model or 'none in the pool'}), as the UDS reference code"
    else:
        shift = (
            f"the never-saw pool's {cfg.reference_shift} shift (declared; the reference code uses one model)"
        )
    return (
        f"Choices (pre-registered): faithfulness threshold {_THRESHOLD_RULES[cfg.threshold_rule]}, a model with "
        f"m ≤ threshold read as unlearned; Δ_ret = {shift}; ε = {cfg.epsilon:g} in Q and R."
    )


def _meta_ranking(result: MetaEvalResult) -> str:
    if result.rankable is None:
        return "Ranking support: not checked (written before remnant checked it)."
    if result.rankable:
        return f"Ranking supported: {result.rankable_reason}."
    return (
        f"**No ranking is supported**: {result.rankable_reason}. The order below is the computed order only; "
        "it does not tell these metrics apart."
    )


def meta_eval_document(result: MetaEvalResult) -> Document:
    doc = Document("Meta-evaluation: which audit can be trusted (faithfulness and robustness)")
    pools = ", ".join(f"{k} {v}" for k, v in result.pools.items())
    doc.sections.append(
        Section(
            "Pool",
            [
                f"Results table {result.pool} ({result.pool_digest}); models per pool: {pools}.",
                _meta_ranking(result),
                "Faithfulness: AUC-ROC of m (higher = more knowledge) over the target pool against the never-saw "
                "pool, stratified bootstrap 95 % interval. Robustness (symmetric, the UDS paper §4): Q after NF4, R "
                "after one epoch of relearning against the reference shift Δ_ret, over unlearned "
                f"models with utility ≥ {result.config.utility_floor:g} × the full model's"
                + (
                    " and classified unlearned by the metric's faithfulness threshold"
                    if result.config.faithfulness_filter
                    else ""
                )
                + "; HM = HM(Q, R); overall = HM(AUC, HM).",
                _meta_choices(result),
                NON_ADJUDICATING,
            ],
        )
    )
    order = {True: "rank", False: "order (not a supported ranking)", None: "rank (support not checked)"}
    header = [order[result.rankable], "metric", "m", "AUC [95% CI]", "Q", "R", "HM", "overall"]
    header += ["paper AUC", "paper Q", "paper R", "paper HM", "paper overall"]
    doc.sections.append(
        Section(
            "Metrics beside the UDS paper's published figures",
            [f"Paper: {UDS_PAPER_SOURCE}. Ours: this pool."],
            [Table(header, [_meta_row(r) for r in result.metrics], frozenset(range(8, 13)))],
        )
    )
    filters = Section("Robustness filters and counts")
    filters.tables.append(
        column_table(
            result.metrics,
            [
                ("metric", lambda r: r.metric),
                ("threshold (m ≤ it: unlearned)", lambda r: fmt(r.faithfulness.threshold)),
                ("candidates", lambda r: str(r.robustness.candidates)),
                ("no utility", lambda r: str(r.robustness.excluded["no_utility"])),
                ("utility < floor", lambda r: str(r.robustness.excluded["utility"])),
                ("not unlearned", lambda r: str(r.robustness.excluded["faithfulness"])),
                ("Δ_ret (n)", lambda r: f"{fmt(r.robustness.reference_shift)} ({r.robustness.n_reference})"),
                (
                    "NF4 rose/fell",
                    lambda r: f"{r.robustness.quantization.rose}/{r.robustness.quantization.fell}",
                ),
                (
                    "relearn over/under",
                    lambda r: f"{r.robustness.relearning.rose}/{r.robustness.relearning.fell}",
                ),
            ],
        )
    )
    if result.skipped:
        filters.text.append("Left out: " + "; ".join(f"{k}: {v}" for k, v in result.skipped.items()) + ".")
    doc.sections.append(filters)
    doc.sections.append(_meta_figures(result))
    doc.sections.append(registration_section(result.registration, result.config))
    return doc


def _meta_figures(result: MetaEvalResult) -> Section:
    from remnant.studies.plots import roc_svg, scatter_svg

    section = Section("Figures")
    curves = {
        f"{r.metric} (AUC {r.faithfulness.auc:.3f})": r.faithfulness.roc
        for r in result.metrics
        if r.faithfulness.auc is not None
    }
    if curves:
        section.figures.append(
            ("ROC, target vs never-saw", roc_svg(curves, plot_id="roc", title="ROC curves"))
        )
    for i, r in enumerate(result.metrics):
        rob = r.robustness
        arms = (
            (rob.quantization, "Q", "NF4", "m after NF4", None),
            (rob.relearning, "R", "relearning", "m after one epoch of relearning", rob.reference_shift),
        )
        for arm, letter, attack, ylabel, shift in arms:
            if arm.points:
                pts = [(p.before, p.after, p.method or "—") for p in arm.points]
                svg = scatter_svg(
                    pts,
                    plot_id=f"{letter.lower()}{i}",
                    title=f"{r.metric} under {attack}",
                    xlabel="m before",
                    ylabel=ylabel,
                    shift=shift,
                )
                label = f"{r.metric}: before/after {attack} ({letter} = {fmt(arm.value)}, n = {arm.n})"
                section.figures.append((label, svg))
    return section


# -- recovery ----------------------------------------------------------------------------------------------------


def _corr(c: Correlation) -> str:
    if c.rho is None:
        return f"— (n={c.n})"
    star = "*" if c.significant else ""
    return f"{c.rho:+.3f}{star} (p_Holm {fmt(c.p_holm)}, n={c.n})"


def recovery_kind(result: RecoveryResult) -> str:
    """The outcome's name as the record supports it: *excess* only when a never-saw level was subtracted."""
    kind = "revival" if result.config.outcome_kind == "revival" else "shift"
    return f"excess {kind}" if result.gold_rate is not None else f"{kind} (not net of fresh learning)"


def _recovery_support(result: RecoveryResult) -> str:
    if result.rankable is None:
        return "Comparison support: not checked (written before remnant checked it)."
    if result.rankable:
        return f"The pool supports comparing the predictors: {result.rankable_reason}."
    return f"**No comparison of the predictors is supported**: {result.rankable_reason}."


def _recovery_outcome(result: RecoveryResult, kind: str) -> Section:
    """What the outcome is and how each predictor column reads."""
    net = (
        f"net of the never-saw models' level ({fmt(result.gold_rate)})"
        if result.gold_rate is not None
        else "not net of the never-saw models' level: the pool gives none (see below)"
    )
    return Section(
        "Outcome",
        [
            f"Results table {result.pool} ({result.pool_digest}). Outcome: {kind} of {result.outcome!r} after "
            f"one epoch of relearning, {net}.",
            "Each ρ cell: Spearman ρ between the predictor's m before the attack and the outcome over the "
            "unlearned models, its Holm-adjusted p and n; partial: ranks residualised on the covariates; "
            "within-method: per-method ρ pooled by Fisher's z; steps: ρ with steps to recover (negative = "
            "predicts faster recovery); item-level AUROC: how well the predictor's per-item value tells the items "
            "that revive from those that do not, median over models with both. * = significant after Holm across "
            f"metrics (α = {result.config.alpha:g}).",
            _recovery_support(result),
            *result.notes,
            NON_ADJUDICATING,
        ],
    )


def _recovery_predictors(result: RecoveryResult) -> Section:
    """One row per pre-attack metric: its correlations with recovery and its item-level AUROC."""
    covariates = ", ".join(result.predictors[0].covariates) if result.predictors else ""

    def within(w: WithinMethod) -> str:
        return fmt_ci(w.rho, w.ci95) + (f" (p_Holm {fmt(w.p_holm)})" if w.rho is not None else "")

    columns: list[tuple[str, Callable[[PredictorResult], str]]] = [
        ("metric (m read before the attack)", lambda p: p.metric),
        (f"Spearman ρ(m, {recovery_kind(result)})", lambda p: _corr(p.pooled)),
        (f"partial ρ given {covariates or 'no covariate'}", lambda p: _corr(p.partial)),
        ("within-method ρ, Fisher-z pooled [95% CI]", lambda p: within(p.within_method)),
        ("Spearman ρ(m, steps to recover)", lambda p: _corr(p.steps)),
        (
            "item-level AUROC of revival (median over n models)",
            lambda p: f"{fmt(i.median_auroc)} (n={i.n_models})" if (i := p.item_level) else "—",
        ),
    ]
    return Section("Predictors", [], [column_table(result.predictors, columns)])


def _recovery_published(result: RecoveryResult) -> Section:
    """J-Access's published recovery correlations and item-level AUROCs (the J-Access paper Tables 2 and 3)."""
    compare = (
        "compare with the j_access row above."
        if result.gold_rate is not None
        else "the paper's outcome is net of its never-saw models and ours is not (no never-saw level), so the "
        "j_access row above is not its like."
    )
    return Section(
        "Published (J-Access, the J-Access paper Table 2, Table 3)",
        [f"398 OpenUnlearning models, identity-level J-Access; {compare}"],
        [
            Table(
                ["analysis", "paper"],
                [[c.analysis, f"{c.value:+.2f}"] for c in JACCESS_RECOVERY],
                frozenset({1}),
            ),
            Table(
                ["item-level predictor", "paper AUROC"],
                [[c.analysis, f"{c.value:.3f}"] for c in JACCESS_ITEM_AUROC],
                frozenset({1}),
            ),
        ],
    )


def _recovery_figures(result: RecoveryResult, kind: str) -> Section:
    """Each predictor before the attack against the recovery it should forecast, one point per model."""
    from remnant.studies.plots import xy_svg

    figures = Section("Figures")
    for i, p in enumerate(result.predictors):
        method = {o.model: o.method or "—" for o in result.outcomes}
        recovered = {o.model: o.recovery for o in result.outcomes}
        pts = [
            (v, float(recovered[m] or 0.0), method[m])
            for m, v in p.values.items()
            if recovered.get(m) is not None
        ]
        if pts:
            figures.figures.append(
                (
                    f"{p.metric} before the attack against {kind}",
                    xy_svg(
                        pts,
                        plot_id=f"rec{i}",
                        title=f"{p.metric} vs recovery",
                        xlabel=f"{p.metric} (m, before)",
                        ylabel=kind,
                    ),
                )
            )
    return figures


def _recovery_models(result: RecoveryResult, kind: str) -> Section:
    """The outcome of every model: its recovery, its raw revival rate (revival outcome) and steps to recover."""
    revival = result.config.outcome_kind == "revival"
    net = f" (never-saw level {fmt(result.gold_rate)} subtracted)" if result.gold_rate is not None else ""
    horizon = result.config.steps_horizon
    header = ["model", "method", kind + net]
    header += ["revival rate after relearning (revived / eligible items)"] if revival else []
    header += ["steps to recover" + (f" (censored at {horizon:g})" if horizon is not None else "")]
    rows = [
        [o.model, o.method or "—", fmt(o.recovery), *([fmt(o.rate)] if revival else []), fmt(o.steps, 1)]
        for o in result.outcomes
    ]
    return Section("Per model", [], [Table(header, rows)])


def recovery_document(result: RecoveryResult) -> Document:
    doc = Document("Recovery prediction: does a pre-attack metric forecast relearning recovery")
    kind = recovery_kind(result)
    doc.sections += [
        _recovery_outcome(result, kind),
        _recovery_predictors(result),
        _recovery_published(result),
        _recovery_figures(result, kind),
        _recovery_models(result, kind),
        registration_section(result.registration, result.config),
    ]
    return doc


# -- readmission -------------------------------------------------------------------------------------------------


def _readmission_decision(result: ReadmissionResult) -> Section:
    """The decision under the pre-registered rule, its reasons, and the rule itself (C-H4, C-H9)."""
    rule = result.config.rule
    return Section(
        "Decision",
        [
            f"Decision under the pre-registered rule: **{result.decision}**.",
            *result.reasons,
            f"Rule: δ = {rule.margin:g} for both nulls (equivalence), each null held in ≥ {rule.pass_fraction:.0%} "
            f"of a method's evaluable cells; C-H4 coverage ≥ {rule.min_layers} layers, ≥ {rule.min_positions} "
            f"positions, ≥ {rule.min_settings} settings of a fitted hyper-parameter; promote needs ρ ≥ {rule.rho_min:g}"
            + (f" with one-sided p < {rule.alpha:g}" if rule.require_significance else "")
            + " at the primary configuration.",
            result.note,
        ],
    )


def _readmission_nulls(result: ReadmissionResult) -> Section:
    """Each method's nulls in Annex B.6's table shape, beside B.6's own row for the direction probe."""
    b6 = ANNEX_B6_METHODS
    return Section(
        "Nulls per method (Annex B.6's table shape)",
        [
            f"Content null: {result.content_null}; procedure null: {result.procedure_null}; design stable: "
            f"{'yes' if result.design_stable else 'no'}. Annex B.6 (the direction probe): {ANNEX_B6_DECISION}, "
            f"ρ ≈ {ANNEX_B6_RHO}."
        ],
        [
            column_table(
                result.methods,
                [
                    ("method", lambda m: m.method),
                    ("evaluable", lambda m: str(m.evaluable_cells)),
                    ("content held", lambda m: str(m.content_held)),
                    ("procedure held", lambda m: str(m.procedure_held)),
                    ("content null", lambda m: m.content_null),
                    ("procedure null", lambda m: m.procedure_null),
                    (
                        "B.6 evaluable/content/procedure",
                        lambda m: "/".join(
                            "—" if v is None else str(v) for v in b6.get(m.method, (None,) * 3)
                        ),
                    ),
                ],
                frozenset({6}),
            )
        ],
    )


def _readmission_configurations(result: ReadmissionResult) -> Section:
    """C-H4's coverage, the primary configuration's ρ, and each (layer, position, setting) configuration."""
    return Section(
        "Configurations (C-H4)",
        [
            f"Coverage: layers {result.coverage.layers}, positions {result.coverage.positions}, settings "
            f"{result.coverage.settings}"
            + ("" if result.coverage.complete else "; short: " + "; ".join(result.coverage.missing))
            + ".",
            f"Primary: {result.primary.model_dump() if result.primary else '—'}; ρ = {fmt(result.rho)} "
            f"(one-sided p {fmt(result.p_one_sided)}, n = {result.n_rho}); predictive: {'yes' if result.predictive else 'no'}; "
            f"same reading at every configuration: {'yes' if result.predictive_stable else 'no'}.",
        ],
        [
            column_table(
                result.configurations,
                [
                    ("layer", lambda c: str(c.layer)),
                    ("position", lambda c: c.position),
                    ("setting", lambda c: c.setting),
                    ("evaluable", lambda c: str(c.evaluable_cells)),
                    ("content null", lambda c: c.content_null),
                    ("procedure null", lambda c: c.procedure_null),
                    ("ρ (n)", lambda c: f"{fmt(c.rho)} ({c.n_rho})"),
                ],
            )
        ],
    )


def _readmission_cells(result: ReadmissionResult) -> Section:
    """Every cell: the removed model's reading and both controls' with their intervals, and why one is not
    evaluable."""
    return Section(
        "Cells",
        [],
        [
            column_table(
                result.cells.cells,
                [
                    ("model", lambda c: c.model),
                    ("method", lambda c: c.method),
                    ("seed", lambda c: str(c.seed)),
                    ("layer", lambda c: str(c.layer)),
                    ("position", lambda c: c.position),
                    ("setting", lambda c: c.setting),
                    ("removed", lambda c: fmt(c.removed)),
                    (
                        "procedure [CI]",
                        lambda c: fmt_ci(c.procedure.value, c.procedure.ci95) if c.procedure else "—",
                    ),
                    ("content [CI]", lambda c: fmt_ci(c.content.value, c.content.ci95) if c.content else "—"),
                    ("evaluable", lambda c: "yes" if c.evaluable else f"no ({c.note or ''})"),
                ],
            )
        ],
    )


def readmission_document(result: ReadmissionResult) -> Document:
    doc = Document(f"Readmission study: {result.estimator} through the Standard's bar (C-H9, Annex B.4)")
    doc.sections += [
        _readmission_decision(result),
        _readmission_nulls(result),
        _readmission_configurations(result),
        _readmission_cells(result),
        registration_section(result.registration, result.config),
    ]
    return doc


# -- goodhart ----------------------------------------------------------------------------------------------------


def _goodhart_reading(result: GoodhartResult, audit: str) -> Section:
    """The finding, the trend over λ beside the published J-Access figures, and the per-λ and per-run
    tables."""
    return Section(
        "Reading",
        [
            result.finding,
            f"Surrogate minimised: {result.surrogate}. Audit reads better when {result.audit_direction}.",
            f"Trend over completed runs: ρ(λ, audit) = {fmt(result.rho_audit)}, ρ(λ, recovery) = {fmt(result.rho_recovery)}.",
            f"Published (J-Access, WD-Train): λ {JACCESS_GOODHART['lambda'][0]:g} → {JACCESS_GOODHART['lambda'][1]:g} "
            f"lowered J-Access {JACCESS_GOODHART['j_access'][0]} → {JACCESS_GOODHART['j_access'][1]} and raised "
            f"post-attack revival {JACCESS_GOODHART['revival'][0]} → {JACCESS_GOODHART['revival'][1]}.",
            "This objective is a study instrument: it is not a registered removal method and is never offered "
            "in an assessment (C-H6).",
        ],
        [_goodhart_weights(result, audit), _goodhart_runs(result, audit)],
    )


def _goodhart_weights(result: GoodhartResult, audit: str) -> Table:
    """One row per penalty weight λ: the audit, recovery and κ over its runs."""
    return column_table(
        result.by_weight,
        [
            ("λ", lambda w: f"{w.weight:g}"),
            ("runs", lambda w: str(w.n)),
            (audit, lambda w: fmt(w.audit)),
            ("recovery", lambda w: fmt(w.recovery)),
            ("κ_P removed", lambda w: fmt(w.kappa_forget)),
            ("retain κ", lambda w: fmt(w.kappa_retain)),
        ],
    )


def _goodhart_runs(result: GoodhartResult, audit: str) -> Table:
    """One row per (λ, seed) run: its status, audit, κ before and after removal, and relearning."""
    return column_table(
        result.rows,
        [
            ("λ", lambda r: f"{r.weight:g}"),
            ("seed", lambda r: str(r.seed)),
            ("status", lambda r: r.status),
            (audit, lambda r: fmt(r.audit)),
            ("κ_P installed→removed", lambda r: f"{fmt(r.kappa_forget_installed)}→{fmt(r.kappa_forget)}"),
            (
                "retain κ installed→removed",
                lambda r: f"{fmt(r.kappa_retain_installed)}→{fmt(r.kappa_retain)}",
            ),
            ("relearned κ_P", lambda r: fmt(r.relearned)),
            ("recovery", lambda r: fmt(r.recovery)),
            ("control relearned", lambda r: fmt(r.control_relearned)),
        ],
    )


def _goodhart_figures(result: GoodhartResult, audit: str) -> Section:
    """The audit and the relearning recovery against λ, one point per run."""
    from remnant.studies.plots import xy_svg

    figs = Section("Figures")
    for name, field, plot_id, ylabel in (
        (audit, "audit", "gh-audit", audit),
        ("recovery", "recovery", "gh-rec", "relearning recovery"),
    ):
        pts = [(r.weight, v, f"seed {r.seed}") for r in result.rows if (v := getattr(r, field)) is not None]
        if pts:
            svg = xy_svg(pts, plot_id=plot_id, title=f"{name} vs λ", xlabel="λ", ylabel=ylabel)
            figs.figures.append((f"{name} against λ", svg))
    return figs


def goodhart_document(result: GoodhartResult) -> Document:
    audit = "J-Access" if result.config.audit == "j_access" else "UDS"
    doc = Document(f"Goodhart arm: minimising the {audit} audit during removal (the J-Access paper, Test 3)")
    doc.sections += [
        _goodhart_reading(result, audit),
        _goodhart_figures(result, audit),
        registration_section(result.registration, result.config),
    ]
    return doc


# -- summary -----------------------------------------------------------------------------------------------------


def summary_document(meta: MetaEvalResult | None, rec: RecoveryResult | None) -> Document:
    """The paper table: metrics × (AUC, Q, R, HM, overall, ρ) beside the published figures."""
    doc = Document("Audit metrics: faithfulness, robustness and recovery prediction")
    rho = {p.metric: p.pooled for p in rec.predictors} if rec else {}
    metrics = [r.metric for r in meta.metrics] if meta else list(rho)
    by_meta = {r.metric: r for r in meta.metrics} if meta else {}
    jaccess = {c.analysis: c.value for c in JACCESS_RECOVERY}
    header = ["metric", "AUC", "Q", "R", "HM", "overall"]
    header += [f"Spearman ρ(m, {recovery_kind(rec)})" if rec else "ρ with recovery"]
    header += ["paper AUC", "paper Q", "paper R", "paper HM", "paper ρ"]
    rows = []
    for m in metrics:
        r = by_meta.get(m)
        ours: list[float | None] = [None] * 5  # fmt: an em dash for each
        if r:
            rb = r.robustness
            ours = [r.faithfulness.auc, rb.quantization.value, rb.relearning.value, rb.hm, r.overall]
        rows.append(
            [
                m,
                *map(fmt, ours),
                _corr(rho[m]) if m in rho else "—",
                *_paper_cells(r.paper if r else None, ("auc", "q", "r", "hm")),
                f"{jaccess['pooled ρ with excess revival']:+.2f}" if m == "j_access" else "—",
            ]
        )
    doc.sections.append(
        Section(
            "Metrics",
            [
                f"Ours: meta-evaluation {meta.pool if meta else '—'}; recovery {rec.pool if rec else '—'}"
                + (f" (ρ with {recovery_kind(rec)} of {rec.outcome!r})" if rec else "")
                + ".",
                f"Paper columns: {UDS_PAPER_SOURCE}; ρ from the J-Access paper Table 2 (J-Access only).",
                *([_meta_ranking(meta)] if meta else []),
                NON_ADJUDICATING,
            ],
            [Table(header, rows, frozenset(range(7, 12)))],
        )
    )
    return doc


__all__ = [
    "goodhart_document",
    "meta_eval_document",
    "readmission_document",
    "recovery_document",
    "recovery_kind",
    "registration_section",
    "summary_document",
]
