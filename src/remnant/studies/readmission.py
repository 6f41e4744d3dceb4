"""The readmission decision (C-H9, Annex B.4) over an estimator's cells: a pure function of tables.

A *cell* is one (run, configuration) reading of a latent estimator, with every state normalised so the installed
model reads 1 and the never-modified model 0 (Annex B.3 step 2): the post-removal reading, and the two control
states of the deprecated C-H3 that Annex B keeps as the bar — the procedure control (a never-installed model put
through the identical removal) and the content control (a content-shuffled install) — each with a bootstrap
interval. A *configuration* is (layer, token position, hyper-parameter setting). The rule, frozen in the study's
config before the run (:class:`~remnant.studies.config.ReadmissionRule`):

1. a null *holds* in a cell when its interval lies wholly inside ±δ (equivalence, Annex A: not "contains zero");
2. a null holds for a method when it holds in ≥ ``pass_fraction`` of the method's evaluable cells, and overall
   when it holds for every method (B.6: δ = 0.10, 80 %);
3. *design sensitivity* (C-H4): the conclusion — the pair of null readings — is computed per configuration over
   its evaluable cells; it is stable when every configuration reaches the same pair. Coverage must reach
   ``min_layers`` layers, ``min_positions`` positions and, for an estimator with a fitted hyper-parameter,
   ``min_settings`` settings;
4. *predictive value* (B.1 item 5): at the primary configuration, Spearman ρ of the post-removal reading with
   relearning recovery over the runs that cleared their gates; predictive when ρ ≥ ``rho_min`` (and, when
   required, its one-sided p < ``alpha``); reported per configuration too;
5. B.4: **demote** if either null fails or the conclusion is design-sensitive; **not evaluable** if no cell was
   evaluable or the design does not reach the C-H4 coverage (stability was not shown, so nothing can be promoted
   or retained); **promote** if the nulls hold, the design is stable and the reading predicts recovery;
   otherwise **retain (admissible, non-predictive)**.

Whatever it decides, the estimator stays non-adjudicating under v0.3: readmission needs an amendment to the
Standard backed by a published, pre-registered validation on independent models and data; an assessor's own
validation does not make its estimator adjudicating (C-H6, C-H9). The per-cell counting of
:func:`remnant.studies.latent_probe.method_table` (the direction study's B.6 table) is the same as step 2; the design
rule here reads the conclusion per configuration (C-H4's wording) rather than per cell.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from remnant.stats import spearman_test
from remnant.studies.config import PrimaryCell, ReadmissionConfig, ReadmissionRule, StudyModel

NullReading = Literal["held", "failed", "not evaluable"]
Decision = Literal["promote", "retain (admissible, non-predictive)", "demote", "not evaluable"]
NOTE = (
    "Non-adjudicating under Standard v0.3 whatever this study decides: readmission needs an amendment to the "
    "Standard backed by a published, pre-registered validation on models, targets and data independent of the "
    "estimator's design; an assessor's own validation does not readmit its estimator (C-H6, C-H9)."
)


class Reading(StudyModel):
    """A control state's normalised reading with its bootstrap interval."""

    value: float = Field(description="Reading (installed = 1, never-modified = 0).")
    ci95: tuple[float, float] = Field(description="Bootstrap 95 % interval.")


class Cell(StudyModel):
    """One run at one configuration."""

    model: str = Field(description="Model the run started from.")
    method: str = Field(description="Removal method.")
    seed: int = Field(description="Installation and removal seed.")
    layer: int = Field(description="Block index read.")
    position: str = Field(description="Token position (or readout positions).")
    setting: str = Field(default="-", description="Hyper-parameter setting ('-': the estimator has none).")
    removed: float | None = Field(description="Post-removal reading.")
    procedure: Reading | None = Field(description="Procedure control (C-H3a).")
    content: Reading | None = Field(description="Content control (C-H3b).")
    evaluable: bool = Field(description="The run cleared its gates and the cell has a signature.")
    note: str | None = Field(default=None, description="Why a cell is not evaluable.")


class RunOutcome(StudyModel):
    """One run's gates and relearning recovery (the predictive criterion)."""

    model: str = Field(description="Model.")
    method: str = Field(description="Removal method.")
    seed: int = Field(description="Seed.")
    gates: dict[str, bool] = Field(
        description="Removal gates (installed, suppressed, utility_kept, not_diverged)."
    )
    recovery: float | None = Field(description="Share of the removed gap relearning restored (None: no gap).")


class Cells(StudyModel):
    """What a readmission run produces and the decision reads (``readmission-cells.json``)."""

    estimator: str = Field(description="Estimator name.")
    fitted_hyperparameters: list[str] = Field(description="Hyper-parameters the settings vary (C-H4).")
    cells: list[Cell] = Field(description="Every cell.")
    runs: list[RunOutcome] = Field(description="Every run.")
    provenance: dict[str, Any] = Field(default_factory=dict, description="Design and estimator parameters.")


class MethodNulls(StudyModel):
    """Annex B.6's table row for one method."""

    method: str = Field(description="Removal method.")
    evaluable_cells: int = Field(description="Evaluable cells.")
    content_held: int = Field(description="Cells where the content null held.")
    procedure_held: int = Field(description="Cells where the procedure null held.")
    content_null: NullReading = Field(description="Method-level reading.")
    procedure_null: NullReading = Field(description="Method-level reading.")


class Configuration(StudyModel):
    """The conclusion at one configuration."""

    layer: int = Field(description="Layer.")
    position: str = Field(description="Position.")
    setting: str = Field(description="Setting.")
    evaluable_cells: int = Field(description="Evaluable cells here.")
    content_null: NullReading = Field(description="Reading over this configuration's cells.")
    procedure_null: NullReading = Field(description="Reading over this configuration's cells.")
    rho: float | None = Field(description="ρ(reading, recovery) over runs evaluable here.")
    n_rho: int = Field(description="Runs behind ρ.")


class Coverage(StudyModel):
    """C-H4's design coverage."""

    layers: list[int] = Field(description="Layers with an evaluable cell.")
    positions: list[str] = Field(description="Positions with an evaluable cell.")
    settings: list[str] = Field(description="Settings with an evaluable cell.")
    complete: bool = Field(description="Every minimum reached.")
    missing: list[str] = Field(description="What falls short.")


class ReadmissionResult(StudyModel):
    """The study's record and decision."""

    study: Literal["readmission"] = Field(default="readmission", description="Study kind.")
    adjudicating: Literal[False] = Field(default=False, description="Always false (C-H6, C-H9).")
    estimator: str = Field(description="Estimator.")
    config: ReadmissionConfig = Field(description="The pre-registered config.")
    registration: dict[str, Any] | None = Field(default=None, description="prereg digest, time, deviations.")
    methods: list[MethodNulls] = Field(description="B.6-shaped table.")
    content_null: NullReading = Field(description="Held only if it held for every method.")
    procedure_null: NullReading = Field(description="Held only if it held for every method.")
    configurations: list[Configuration] = Field(description="Per configuration.")
    design_stable: bool = Field(description="Every configuration reaches the same null readings.")
    coverage: Coverage = Field(description="C-H4 coverage.")
    primary: PrimaryCell | None = Field(description="The configuration the predictive test read.")
    rho: float | None = Field(description="ρ at the primary configuration.")
    p_one_sided: float | None = Field(description="One-sided p of ρ > 0.")
    n_rho: int = Field(description="Runs behind ρ.")
    predictive: bool = Field(description="ρ ≥ rho_min (and p < alpha when required).")
    predictive_stable: bool = Field(
        description="Every configuration with a ρ reaches the same predictive reading."
    )
    decision: Decision = Field(description="B.4 decision under the pre-registered rule.")
    reasons: list[str] = Field(description="Why.")
    note: str = Field(default=NOTE, description="What the decision does and does not license.")
    cells: Cells = Field(description="The cells decided on.")


def held(reading: Reading | None, margin: float) -> bool:
    """Equivalence to zero: the whole interval inside (−δ, δ)."""
    return reading is not None and -margin < reading.ci95[0] and reading.ci95[1] < margin


def tally(count: int, evaluable: int, pass_fraction: float) -> NullReading:
    """held when the null held in ≥ pass_fraction of the evaluable cells."""
    if evaluable == 0:
        return "not evaluable"
    return "held" if count >= pass_fraction * evaluable else "failed"


def overall(values: Sequence[NullReading], *, every: bool = False) -> NullReading:
    """A null over every method: held when it held for each method it could be read on (``every``: for each
    method, the latent-probe study's stricter reading), not evaluable when it could be read on none."""
    if not values or all(v == "not evaluable" for v in values):
        return "not evaluable"
    return "held" if all(v == "held" or (v == "not evaluable" and not every) for v in values) else "failed"


def null_row(method: str, held_in: Sequence[tuple[bool, bool]], pass_fraction: float) -> MethodNulls:
    """Step 2 over a method's evaluable cells, ``held_in`` saying per cell whether (content, procedure) held."""
    content, procedure = (sum(h[i] for h in held_in) for i in (0, 1))
    return MethodNulls(
        method=method,
        evaluable_cells=len(held_in),
        content_held=content,
        procedure_held=procedure,
        content_null=tally(content, len(held_in), pass_fraction),
        procedure_null=tally(procedure, len(held_in), pass_fraction),
    )


def _nulls(method: str, cells: Sequence[Cell], rule: ReadmissionRule) -> MethodNulls:
    """Steps 1-2 over ``cells``: evaluable cells, the cells each null held in, and each null's reading."""
    ev = [c for c in cells if c.evaluable]
    return null_row(
        method,
        [(held(c.content, rule.margin), held(c.procedure, rule.margin)) for c in ev],
        rule.pass_fraction,
    )


def _rho(cells: Sequence[Cell], runs: Sequence[RunOutcome]) -> tuple[float | None, float | None, int]:
    """ρ of the post-removal reading with recovery over gated, evaluable runs; one-sided p of ρ > 0."""
    outcome = {(r.model, r.method, r.seed): r for r in runs}
    pairs = []
    for c in cells:
        run = outcome.get((c.model, c.method, c.seed))
        gated = run is not None and run.recovery is not None and all(run.gates.values())
        if gated and c.evaluable and c.removed is not None and run is not None and run.recovery is not None:
            pairs.append((c.removed, run.recovery))
    if len(pairs) < 3:
        return None, None, len(pairs)
    rho, p = spearman_test([a for a, _ in pairs], [b for _, b in pairs])
    if math.isnan(rho):
        return None, None, len(pairs)
    return rho, (p / 2 if rho > 0 else 1 - p / 2), len(pairs)


def configurations(data: Cells, rule: ReadmissionRule) -> list[Configuration]:
    keys = list(dict.fromkeys((c.layer, c.position, c.setting) for c in data.cells))
    out = []
    for layer, position, setting in keys:
        cells = [c for c in data.cells if (c.layer, c.position, c.setting) == (layer, position, setting)]
        nulls = _nulls("", cells, rule)  # every method's cells at this configuration (step 3)
        rho, _, n_rho = _rho(cells, data.runs)
        out.append(
            Configuration(
                layer=layer,
                position=position,
                setting=setting,
                evaluable_cells=nulls.evaluable_cells,
                content_null=nulls.content_null,
                procedure_null=nulls.procedure_null,
                rho=rho,
                n_rho=n_rho,
            )
        )
    return out


def coverage(data: Cells, rule: ReadmissionRule) -> Coverage:
    ev = [c for c in data.cells if c.evaluable]
    layers = sorted({c.layer for c in ev})
    positions = list(dict.fromkeys(c.position for c in ev))
    settings = list(dict.fromkeys(c.setting for c in ev))
    missing = []
    if len(layers) < rule.min_layers:
        missing.append(f"{len(layers)} layer(s) of the {rule.min_layers} C-H4 asks for")
    if len(positions) < rule.min_positions:
        missing.append(f"{len(positions)} position(s) of the {rule.min_positions} C-H4 asks for")
    if data.fitted_hyperparameters and len(settings) < rule.min_settings:
        missing.append(
            f"{len(settings)} setting(s) of {', '.join(data.fitted_hyperparameters)}, "
            f"of the {rule.min_settings} C-H4 asks for"
        )
    return Coverage(
        layers=layers, positions=positions, settings=settings, complete=not missing, missing=missing
    )


def primary_cell(data: Cells, rule: ReadmissionRule) -> PrimaryCell | None:
    """The declared primary configuration, or the middle layer, first position and middle setting read."""
    if rule.primary is not None:
        return rule.primary
    if not data.cells:
        return None
    layers = sorted({c.layer for c in data.cells})
    positions = list(dict.fromkeys(c.position for c in data.cells))
    settings = list(dict.fromkeys(c.setting for c in data.cells))
    return PrimaryCell(
        layer=layers[len(layers) // 2], position=positions[0], setting=settings[len(settings) // 2]
    )


def b4_decision(
    content: NullReading, procedure: NullReading, stable: bool, cover: Coverage | None, predictive: bool
) -> tuple[Decision, list[str]]:
    """Step 5 (B.4) and its reasons; ``cover`` None: no C-H4 coverage asked for (the latent-probe study)."""
    if content == "not evaluable" and procedure == "not evaluable":
        return "not evaluable", ["no evaluable cell: no run cleared its gates with a signature"]
    failed = [name for name, r in (("content", content), ("procedure", procedure)) if r == "failed"]
    if failed or not stable:
        reasons = [f"the {name} null failed (C-H3{'b' if name == 'content' else 'a'})" for name in failed]
        if not stable:
            reasons.append("the conclusion differs across configurations: design-sensitive (C-H4)")
        return "demote", reasons
    if cover is not None and not cover.complete:
        return "not evaluable", [
            "both nulls held, but the design does not reach C-H4's coverage: " + "; ".join(cover.missing)
        ]
    if predictive:
        return "promote", [
            "both nulls held, the design is stable, and the reading predicts relearning recovery"
        ]
    return "retain (admissible, non-predictive)", [
        "both nulls held and the design is stable, but the reading does not predict relearning recovery (B.1.5)"
    ]


def decide(
    data: Cells, config: ReadmissionConfig, *, registration: dict[str, object] | None = None
) -> ReadmissionResult:
    """The B.4 decision over ``data`` under the pre-registered rule."""
    rule = config.rule
    order = dict.fromkeys(c.method for c in data.cells)
    methods = [_nulls(m, [c for c in data.cells if c.method == m], rule) for m in order]
    content = overall([m.content_null for m in methods])
    procedure = overall([m.procedure_null for m in methods])
    confs = configurations(data, rule)
    stable = len({(c.content_null, c.procedure_null) for c in confs if c.evaluable_cells}) <= 1
    cover = coverage(data, rule)
    primary = primary_cell(data, rule)
    at = [
        c
        for c in data.cells
        if primary is not None
        and (c.layer, c.position, c.setting) == (primary.layer, primary.position, primary.setting)
    ]
    rho, p_one, n_rho = _rho(at, data.runs)
    predictive = rho is not None and rho >= rule.rho_min
    if rule.require_significance:
        predictive = predictive and p_one is not None and p_one < rule.alpha
    readings = {c.rho >= rule.rho_min for c in confs if c.rho is not None}
    decision, reasons = b4_decision(content, procedure, stable, cover, predictive)
    return ReadmissionResult(
        estimator=data.estimator,
        config=config,
        registration=registration,
        methods=methods,
        content_null=content,
        procedure_null=procedure,
        configurations=confs,
        design_stable=stable,
        coverage=cover,
        primary=primary,
        rho=rho,
        p_one_sided=p_one,
        n_rho=n_rho,
        predictive=predictive,
        predictive_stable=len(readings) <= 1,
        decision=decision,
        reasons=reasons,
        cells=data,
    )


__all__ = [
    "NOTE",
    "Cell",
    "Cells",
    "Configuration",
    "Coverage",
    "Decision",
    "MethodNulls",
    "ReadmissionResult",
    "Reading",
    "RunOutcome",
    "b4_decision",
    "configurations",
    "coverage",
    "decide",
    "held",
    "null_row",
    "overall",
    "primary_cell",
    "tally",
]
