"""The readmission decision (C-H9, Annex B.4) as a pure function of cells: each branch of the rule, on planted
cells."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from remnant.studies.config import PrimaryCell, ReadmissionConfig, ReadmissionRule
from remnant.studies.readmission import Cell, Cells, Reading, RunOutcome, decide, held

NULL = Reading(value=0.0, ci95=(-0.05, 0.05))
FAIL = Reading(value=0.9, ci95=(0.8, 1.0))
LAYERS, POSITIONS, SETTINGS = (4, 8, 12), ("last", "mean"), ("k=5", "k=10")


def cells(
    n_runs: int = 6,
    content: Callable[[int, str, str], Reading] = lambda *_: NULL,
    procedure: Callable[[int, str, str], Reading] = lambda *_: NULL,
    removed: Callable[[int], float] = lambda run: run / 10,
    recovery: Callable[[int], float] = lambda run: run / 10,
    layers: tuple[int, ...] = LAYERS,
) -> Cells:
    out, runs = [], []
    for run in range(n_runs):
        method = "npo" if run % 2 else "task_vector"
        gates = {"installed": True, "suppressed": True, "utility_kept": True, "not_diverged": True}
        runs.append(RunOutcome(model="m", method=method, seed=run, gates=gates, recovery=recovery(run)))
        for layer in layers:
            for position in POSITIONS:
                for setting in SETTINGS:
                    out.append(
                        Cell(
                            model="m",
                            method=method,
                            seed=run,
                            layer=layer,
                            position=position,
                            setting=setting,
                            removed=removed(run),
                            procedure=procedure(layer, position, setting),
                            content=content(layer, position, setting),
                            evaluable=True,
                        )
                    )
    return Cells(estimator="j_access", fitted_hyperparameters=["k"], cells=out, runs=runs)


CFG = ReadmissionConfig(estimator="j_access")


def test_equivalence_not_contains_zero() -> None:
    assert held(NULL, 0.1)
    assert not held(Reading(value=0.03, ci95=(-0.05, 0.12)), 0.1)  # holds zero, but not inside ±δ
    assert not held(None, 0.1)


def test_promote_when_nulls_hold_design_is_stable_and_reading_predicts() -> None:
    result = decide(cells(), CFG)
    assert result.decision == "promote"
    assert result.content_null == result.procedure_null == "held" and result.design_stable
    assert result.coverage.complete
    assert result.primary == PrimaryCell(layer=8, position="last", setting="k=10")
    assert result.rho == pytest.approx(1.0) and result.n_rho == 6 and result.predictive
    assert result.adjudicating is False and "C-H9" in result.note


def test_retain_when_the_reading_does_not_predict_recovery() -> None:
    result = decide(cells(recovery=lambda run: [0.3, 0.1, 0.5, 0.2, 0.6, 0.0][run]), CFG)
    assert result.decision == "retain (admissible, non-predictive)"
    assert result.rho is not None and result.rho < 0.5


def test_predictive_value_needs_significance_when_declared() -> None:
    close = cells(recovery=lambda run: [0.0, 0.2, 0.1, 0.4, 0.3, 0.5][run])  # ρ ≈ 0.886 over six runs
    assert decide(close, CFG).predictive  # one-sided p ≈ 0.0094 < 0.05
    strict = CFG.model_copy(update={"rule": ReadmissionRule(alpha=0.005)})
    assert not decide(close, strict).predictive
    lax = CFG.model_copy(update={"rule": ReadmissionRule(alpha=0.005, require_significance=False)})
    assert decide(close, lax).predictive


def test_demote_when_a_null_fails() -> None:
    result = decide(cells(content=lambda *_: FAIL), CFG)
    assert result.decision == "demote" and result.content_null == "failed" and result.procedure_null == "held"
    assert any("C-H3b" in r for r in result.reasons)
    assert [m.content_held for m in result.methods] == [0, 0]


def test_demote_when_the_conclusion_depends_on_the_layer() -> None:
    """The null fails at one of three layers only: it still holds in 2/3 < 80 % of cells → failed, and the
    per-configuration conclusion differs → design-sensitive (C-H4)."""
    result = decide(cells(procedure=lambda layer, *_: FAIL if layer == 12 else NULL), CFG)
    assert result.decision == "demote" and not result.design_stable
    lenient = CFG.model_copy(update={"rule": ReadmissionRule(pass_fraction=0.6)})
    result = decide(cells(procedure=lambda layer, *_: FAIL if layer == 12 else NULL), lenient)
    assert result.procedure_null == "held" and not result.design_stable and result.decision == "demote"
    assert any("design-sensitive" in r for r in result.reasons)


def test_not_evaluable_without_c_h4_coverage_or_evaluable_cells() -> None:
    short = decide(cells(layers=(4, 8)), CFG)
    assert short.decision == "not evaluable" and short.coverage.missing == [
        "2 layer(s) of the 3 C-H4 asks for"
    ]
    # a failing null is conclusive even on a short design
    assert decide(cells(layers=(4, 8), content=lambda *_: FAIL), CFG).decision == "demote"
    none = cells()
    none = none.model_copy(update={"cells": [c.model_copy(update={"evaluable": False}) for c in none.cells]})
    assert decide(none, CFG).decision == "not evaluable"


def test_gated_runs_only_enter_the_predictive_test() -> None:
    data = cells()
    runs = [r.model_copy(update={"gates": {**r.gates, "utility_kept": r.seed != 0}}) for r in data.runs]
    result = decide(data.model_copy(update={"runs": runs}), CFG)
    assert result.n_rho == 5
