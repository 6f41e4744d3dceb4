"""remnant study meta-eval on synthetic pools with planted structure (the UDS paper §4; docs/latent.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _study_pools import PLANTED_ORIENTATION, planted_pool

from remnant.results import FIXED_COLUMNS, PoolTable, load_pool, write_csv_table
from remnant.studies.config import MetaEvalConfig
from remnant.studies.faithfulness import youden_cut
from remnant.studies.meta_eval import MetaEvalResult, meta_eval
from remnant.studies.robustness import relative_change

CFG = MetaEvalConfig(n_resamples=400, orientation=PLANTED_ORIENTATION)


@pytest.fixture(scope="module")
def result(pool: tuple[PoolTable, dict[str, Any], Path]) -> MetaEvalResult:
    return meta_eval(pool[0], CFG)


def _metric(result: MetaEvalResult, name: str) -> Any:
    return next(r for r in result.metrics if r.metric == name)


def test_a_separating_metric_gets_auc_one(result: MetaEvalResult) -> None:
    f = _metric(result, "separating").faithfulness
    assert f.auc == 1.0 and f.ci95 == (1.0, 1.0)
    assert (f.n_target, f.n_never_saw) == (8, 8)
    # the Youden cut lies halfway between the highest never-saw and the lowest target value
    assert f.threshold == pytest.approx((max(f.never_saw_values) + min(f.target_values)) / 2)
    assert f.youden_j == 1.0


def test_a_random_metric_gets_about_half_with_an_interval_that_holds_half(tmp_path: Path) -> None:
    table = load_pool(_pool(tmp_path, n_target=30, n_never=30))  # the paper's 30 vs 30
    f = _metric(meta_eval(table, CFG), "random").faithfulness
    assert f.auc is not None and f.ci95 is not None
    assert abs(f.auc - 0.5) < 0.15
    assert f.ci95[0] < 0.5 < f.ci95[1]


def _pool(tmp_path: Path, **kw: Any) -> Path:
    folder = tmp_path / "pool"
    folder.mkdir()
    planted_pool(folder, **kw)
    return folder


def test_orientation_one_minus_reads_uds_like_the_paper(result: MetaEvalResult) -> None:
    """uds = 1 − separating: with m = 1 − UDS it is the same metric, so the same AUC, Q and R."""
    uds, sep = _metric(result, "uds"), _metric(result, "separating")
    assert uds.orientation == "one_minus"
    assert uds.faithfulness.auc == sep.faithfulness.auc == 1.0
    assert uds.robustness.quantization.value == pytest.approx(sep.robustness.quantization.value)
    assert uds.robustness.relearning.value == pytest.approx(sep.robustness.relearning.value)
    assert uds.paper is not None and (uds.paper.auc, uds.paper.hm) == (0.971, 0.9325)


def test_a_metric_unstable_under_quantization_gets_a_low_q(result: MetaEvalResult) -> None:
    q = _metric(result, "quant_unstable").robustness
    assert q.relearning.value == pytest.approx(1.0)
    assert q.quantization.value is not None and q.quantization.value < 0.5
    assert q.quantization.rose == q.quantization.n == 18 and q.quantization.fell == 0
    # every model moved m → m + 0.6: q = 1 − 0.6 / (2m + 0.6), averaged
    points = q.quantization.points
    expected = sum(relative_change(p.before, p.before + 0.6, CFG.epsilon) for p in points) / 18
    assert q.quantization.value == pytest.approx(expected)
    stable = _metric(result, "separating").robustness
    assert stable.quantization.value == 1.0 and stable.relearning.value == pytest.approx(1.0)
    assert stable.hm == pytest.approx(1.0)


def test_a_metric_unstable_under_relearning_gets_a_low_r(result: MetaEvalResult) -> None:
    r = _metric(result, "relearn_unstable").robustness
    # Δ_ret is one retain model's shift (the reference code's), the never-saw id that sorts first
    assert r.reference_shift == pytest.approx(0.05) and r.n_reference == 1 and r.reference_model == "retain-0"
    # Δ_unl = 0.7 for every model against Δ_ret = 0.05: r = 1 − 0.65 / (0.75 + ε), ε = 1e-6
    assert r.relearning.value == pytest.approx(1 - 0.65 / (0.75 + 1e-6))
    assert r.relearning.rose == 18  # every model recovered more than the retain models relearned
    assert r.quantization.value == 1.0
    r_value = 1 - 0.65 / (0.75 + 1e-6)
    assert r.hm == pytest.approx(2 * r_value / (1 + r_value))


def test_filters_and_ranking(result: MetaEvalResult) -> None:
    sep = _metric(result, "separating").robustness
    assert sep.candidates == 20
    assert sep.excluded == {"no_utility": 0, "utility": 2, "faithfulness": 0}  # two planted at 0.5 × full
    pred = _metric(result, "planted_pred").robustness
    assert pred.excluded["faithfulness"] > 0  # unlearned models above the cut still "hold" the target
    ranked = [r.metric for r in result.metrics]
    assert ranked.index("separating") < ranked.index("quant_unstable") < ranked.index("random")
    assert [r.rank for r in result.metrics] == list(range(1, len(result.metrics) + 1))
    overall = _metric(result, "quant_unstable")
    assert overall.overall == pytest.approx(2 * 1.0 * overall.robustness.hm / (1.0 + overall.robustness.hm))


def test_unknown_orientation_is_skipped_not_guessed(pool: tuple[PoolTable, dict[str, Any], Path]) -> None:
    res = meta_eval(pool[0], MetaEvalConfig(n_resamples=100))
    assert "random" in res.skipped and "orientation unknown" in res.skipped["random"]
    assert {r.metric for r in res.metrics} == {"uds", "kappa"}


def test_seeded_and_reproducible(pool: tuple[PoolTable, dict[str, Any], Path]) -> None:
    a = meta_eval(pool[0], CFG)
    b = meta_eval(pool[0], CFG)
    c = meta_eval(pool[0], CFG.model_copy(update={"seed": 1}))
    assert a.model_dump() == b.model_dump()
    ra, rc = (_metric(x, "random").faithfulness.ci95 for x in (a, c))
    assert ra != rc


def test_youden_cut_takes_the_lowest_best_cut() -> None:
    cut, j = youden_cut([0.1, 0.2, 0.6], [0.5, 0.8, 0.9])
    assert j == pytest.approx(2 / 3) and cut == pytest.approx(0.35)


def test_hand_computed_q_and_r(tmp_path: Path) -> None:
    """Two unlearned models, one never-saw model: every number by hand."""
    rows = []

    def row(model: str, pool: str, pert: str, m: float, **kw: Any) -> dict[str, Any]:
        r: dict[str, Any] = dict.fromkeys(FIXED_COLUMNS)
        r.update(model=model, pool=pool, perturbation=pert, status="ok", utility=1.0, kappa=m, **kw)
        return r

    rows += [row("full1", "target", "none", 0.9), row("full2", "target", "none", 0.8)]
    rows += [row("ret1", "never_saw", "none", 0.1), row("ret2", "never_saw", "none", 0.2)]
    rows += [row("ret1", "never_saw", "relearn", 0.3), row("ret2", "never_saw", "relearn", 0.3)]
    for name, before, q_after, r_after in (("u1", 0.1, 0.3, 0.4), ("u2", 0.2, 0.2, 0.35)):
        rows += [
            row(name, "unlearned", p, v, parent="full1")
            for p, v in (("none", before), ("nf4", q_after), ("relearn", r_after))
        ]
    write_csv_table(tmp_path / "results.csv", rows, [*FIXED_COLUMNS, "kappa"])
    res = meta_eval(
        load_pool(tmp_path), MetaEvalConfig(n_resamples=100, reference_shift="mean", epsilon=1e-12)
    )
    k = _metric(res, "kappa").robustness
    q1, q2 = 1 - 0.2 / 0.4, 1.0  # ε = 1e-12 is below the test's tolerance here
    assert k.quantization.value == pytest.approx((q1 + q2) / 2)
    shift = (0.2 + 0.1) / 2
    r1 = 1 - abs(0.3 - shift) / (0.3 + shift)
    r2 = 1 - abs(0.15 - shift) / (0.15 + shift)
    assert k.reference_shift == pytest.approx(shift)
    assert k.relearning.value == pytest.approx((r1 + r2) / 2)
    median = meta_eval(
        load_pool(tmp_path), MetaEvalConfig(n_resamples=100, reference_shift="median", epsilon=1e-12)
    )
    assert _metric(median, "kappa").robustness.reference_shift == pytest.approx(0.15)
