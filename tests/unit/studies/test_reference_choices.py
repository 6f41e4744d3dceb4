"""The UDS reference code's choices by default, remnant's as declared options, on planted tables answered by hand.

The reference code (``gnueaj/unlearning-depth-score``): ``scripts/build_robustness_filter_list.py`` picks the
faithfulness threshold as the first accuracy-maximising midpoint (unlearned: m ≤ t); its symmetric relearning and
quantization plot scripts use ``EPS = 1e-6`` and one ``retain`` model's shift. remnant's earlier choices (Youden's
J, ε = 1e-12, the never-saw pool's mean shift) stay declarable (R14) and an old frozen study keeps its meaning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _study_pools import PLANTED_ORIENTATION, planted_pool

from remnant.errors import ConfigError, PreregError
from remnant.prereg import freeze_values
from remnant.results import FIXED_COLUMNS, PoolTable, load_pool, write_csv_table
from remnant.studies.config import MetaEvalConfig, RecoveryConfig, build_config
from remnant.studies.document import to_markdown
from remnant.studies.faithfulness import accuracy_cut, youden_cut
from remnant.studies.meta_eval import MetaEvalResult, MetricResult, meta_eval
from remnant.studies.recovery import recovery
from remnant.studies.registration import register
from remnant.studies.report import meta_eval_document, recovery_document

Values = dict[str, tuple[float, float, float]]  # model -> m unperturbed, after NF4, after relearning


def _table(tmp_path: Path, target: Values, never: Values, unlearned: Values) -> PoolTable:
    """A results table of one ``kappa`` column (orientation higher), every model at utility 1."""
    rows: list[dict[str, Any]] = []
    for pool, models in (("target", target), ("never_saw", never), ("unlearned", unlearned)):
        for model, values in models.items():
            for pert, v in zip(("none", "nf4", "relearn"), values, strict=True):
                row: dict[str, Any] = dict.fromkeys(FIXED_COLUMNS)
                parent = next(iter(target)) if pool == "unlearned" else None
                row.update(model=model, pool=pool, perturbation=pert, status="ok", utility=1.0, kappa=v)
                row.update(parent=parent)
                rows.append(row)
    write_csv_table(tmp_path / "results.csv", rows, [*FIXED_COLUMNS, "kappa"])
    return load_pool(tmp_path)


def _kappa(table: PoolTable, **cfg: Any) -> MetricResult:
    res = meta_eval(table, MetaEvalConfig(n_resamples=100, metrics=["kappa"], **cfg))
    return next(r for r in res.metrics if r.metric == "kappa")


# -- the threshold: the accuracy-maximising midpoint, against Youden's J ---------------------------------------

# N (never-saw, 6) = 0.1 0.2 0.3 0.4 0.5 0.6; P (target, 2) = 0.45 0.9. Sorted distinct values:
# 0.1 0.2 0.3 0.4 0.45 0.5 0.6 0.9, midpoints 0.15 0.25 0.35 0.425 0.475 0.55 0.75.
#   cut    TP (P ≥ cut)  TN (N < cut)  accuracy (TP+TN)/8   J = TP/2 − (6−TN)/6
#   0.15   2             1             3/8                  1 − 5/6 = 1/6
#   0.25   2             2             4/8                  1 − 4/6 = 1/3
#   0.35   2             3             5/8                  1 − 3/6 = 1/2
#   0.425  2             4             6/8                  1 − 2/6 = 2/3   <- Youden's J
#   0.475  1             4             5/8                  1/2 − 2/6 = 1/6
#   0.55   1             5             6/8                  1/2 − 1/6 = 1/3
#   0.75   1             6             7/8                  1/2 − 0 = 1/2   <- accuracy
# (Youden's rule also tries one cut below 0.1 and one above 0.9: J = 0 at both.)
UNEQUAL_N = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
UNEQUAL_P = [0.45, 0.9]


def test_accuracy_midpoint_and_youden_pick_different_cuts_on_unequal_pools() -> None:
    assert accuracy_cut(UNEQUAL_N, UNEQUAL_P) == pytest.approx(0.75)
    cut, j = youden_cut(UNEQUAL_N, UNEQUAL_P)
    assert cut == pytest.approx(0.425) and j == pytest.approx(2 / 3)


def test_accuracy_ties_keep_the_lowest_cut_and_one_value_gives_none() -> None:
    # N = 0.1 0.3, P = 0.2 0.4: cuts 0.15 (TP 2, TN 1: 3/4), 0.25 (TP 1, TN 1: 2/4), 0.35 (TP 1, TN 2: 3/4);
    # the reference loop keeps the first strict maximum, 0.15
    assert accuracy_cut([0.1, 0.3], [0.2, 0.4]) == pytest.approx(0.15)
    assert accuracy_cut([0.5, 0.5], [0.5, 0.5]) is None  # one distinct value: no midpoint, no cut


def test_the_threshold_rule_decides_which_model_enters_robustness(tmp_path: Path) -> None:
    """u1 at m = 0.6: unlearned under the accuracy cut (0.6 ≤ 0.75), holding the target under Youden (> 0.425)."""
    never = {f"n{i}": (v, v, v) for i, v in enumerate(UNEQUAL_N)}
    target = {f"t{i}": (v, v, v) for i, v in enumerate(UNEQUAL_P)}
    table = _table(tmp_path, target, never, {"u1": (0.6, 0.6, 0.6)})
    acc = _kappa(table)
    assert acc.faithfulness.threshold == pytest.approx(0.75)
    assert acc.faithfulness.accuracy == pytest.approx(7 / 8) and acc.faithfulness.youden_j == pytest.approx(
        0.5
    )
    assert acc.robustness.quantization.n == 1 and acc.robustness.excluded["faithfulness"] == 0
    assert acc.robustness.quantization.value == 1.0  # NF4 left m at 0.6: q = 1 − 0 / (1.2 + ε)
    youden = _kappa(table, threshold_rule="youden")
    assert youden.faithfulness.threshold == pytest.approx(0.425)
    assert youden.faithfulness.accuracy == pytest.approx(6 / 8)
    assert youden.robustness.quantization.n == 0 and youden.robustness.excluded["faithfulness"] == 1
    assert youden.robustness.quantization.value is None


# -- ε in Q and R -----------------------------------------------------------------------------------------------


# P = 0.8 0.9, N = n1 0.0, n2 0.1 (neither moves when relearned: Δ_ret = 0 whichever rule); threshold 0.45.
# u1: m = 0 before, 1e-6 after NF4, 2e-6 after relearning (Δ_unl = 2e-6).
#   ε = 1e-6:  q = 1 − 1e-6 / (0 + 1e-6 + 1e-6) = 1/2;       r = 1 − 2e-6 / (2e-6 + 0 + 1e-6) = 1/3
#   ε = 1e-12: q = 1 − 1e-6 / (1e-6 + 1e-12) ≈ 1e-6;          r = 1 − 2e-6 / (2e-6 + 1e-12) ≈ 5e-7
def test_epsilon_decides_q_and_r_near_zero(tmp_path: Path) -> None:
    table = _table(
        tmp_path,
        {"t1": (0.8, 0.8, 0.8), "t2": (0.9, 0.9, 0.9)},
        {"n1": (0.0, 0.0, 0.0), "n2": (0.1, 0.1, 0.1)},
        {"u1": (0.0, 1e-6, 2e-6)},
    )
    ref = _kappa(table).robustness
    assert ref.quantization.value == pytest.approx(0.5)
    assert ref.relearning.value == pytest.approx(1 / 3)
    old = _kappa(table, epsilon=1e-12).robustness
    assert old.quantization.value == pytest.approx(1e-12 / (1e-6 + 1e-12), rel=1e-6)
    assert old.relearning.value == pytest.approx(1e-12 / (2e-6 + 1e-12), rel=1e-6)
    assert (old.quantization.value or 1.0) < 1e-5 and (old.relearning.value or 1.0) < 1e-5


# -- R against one retain model's shift, against the never-saw pool's mean ---------------------------------------


# P = 0.8 0.9; N: ret_a 0.0 → 0.1 after relearning (Δ 0.1), ret_b 0.1 → 0.4 (Δ 0.3); threshold 0.45.
# u1: 0.05 → 0.25 after relearning (Δ_unl 0.2), unmoved by NF4.
#   one retain model, ret_a (its id sorts first): r = 1 − |0.2 − 0.1| / (0.2 + 0.1 + 1e-6) = 1 − 0.1/0.300001
#   the declared ret_b:                           r = 1 − |0.2 − 0.3| / (0.2 + 0.3 + 1e-6) = 1 − 0.1/0.500001
#   the pool's mean shift, (0.1 + 0.3)/2 = 0.2:   r = 1 − 0 / (0.4 + 1e-6) = 1
@pytest.fixture
def shifts(tmp_path: Path) -> PoolTable:
    return _table(
        tmp_path,
        {"t1": (0.8, 0.8, 0.8), "t2": (0.9, 0.9, 0.9)},
        {"ret_b": (0.1, 0.1, 0.4), "ret_a": (0.0, 0.0, 0.1)},
        {"u1": (0.05, 0.05, 0.25)},
    )


def test_r_is_read_against_one_retain_model_by_default(shifts: PoolTable) -> None:
    one = _kappa(shifts).robustness
    assert one.reference_model == "ret_a" and one.n_reference == 1
    assert one.reference_shift == pytest.approx(0.1)
    assert one.relearning.value == pytest.approx(1 - 0.1 / 0.300001)
    declared = _kappa(shifts, retain_model="ret_b").robustness
    assert declared.reference_shift == pytest.approx(0.3)
    assert declared.relearning.value == pytest.approx(1 - 0.1 / 0.500001)
    mean = _kappa(shifts, reference_shift="mean").robustness
    assert mean.reference_model is None and mean.n_reference == 2
    assert mean.reference_shift == pytest.approx(0.2) and mean.relearning.value == pytest.approx(1.0)


def test_a_retain_model_not_in_the_pool_or_not_read_is_refused(shifts: PoolTable) -> None:
    with pytest.raises(ConfigError, match=r"retain_model.*'t1'.*never-saw") as exc:
        _kappa(shifts, retain_model="t1")
    assert exc.value.requirement == "R14"
    with pytest.raises(ConfigError, match="retain_model") as exc:
        build_config("meta-eval", {"retain_model": "ret_a", "reference_shift": "mean"}, source="meta.toml")
    assert "meta.toml" in str(exc.value) and exc.value.requirement == "R14"


# -- an old frozen study keeps its meaning ------------------------------------------------------------------------


def _old_values() -> dict[str, Any]:
    """A meta-eval config as remnant froze it before threshold_rule, retain_model and min_pool existed."""
    values = MetaEvalConfig().model_dump(mode="json")
    for field in ("threshold_rule", "retain_model", "min_pool"):
        del values[field]
    return {**values, "epsilon": 1e-12, "reference_shift": "mean"}


def test_an_old_frozen_study_is_refused_field_by_field_then_reproduced(tmp_path: Path) -> None:
    freeze_values(_old_values(), tmp_path)
    with pytest.raises(PreregError) as exc:
        register(MetaEvalConfig(), tmp_path)
    message = str(exc.value)
    for field in (
        "'epsilon' changed",
        "'reference_shift' changed",
        "'threshold_rule' changed from \"youden\"",
    ):
        assert field in message
    assert "'min_pool'" not in message  # it changes no number, so the old study declared today's default
    old = MetaEvalConfig(threshold_rule="youden", reference_shift="mean", epsilon=1e-12)
    assert register(old, tmp_path).deviations == ()


def test_an_old_result_is_read_under_the_rule_it_was_computed_with(pool: tuple[PoolTable, Any, Path]) -> None:
    data = meta_eval(pool[0], MetaEvalConfig(n_resamples=100, orientation=PLANTED_ORIENTATION)).model_dump(
        mode="json"
    )
    for field in ("threshold_rule", "retain_model", "min_pool"):
        del data["config"][field]
    del data["rankable"], data["rankable_reason"]
    old = MetaEvalResult.model_validate(data)
    assert old.config.threshold_rule == "youden" and old.rankable is None
    assert "rank (support not checked)" in to_markdown(meta_eval_document(old))


# -- honest small pools ---------------------------------------------------------------------------------------


def test_a_study_grade_pool_is_rankable(pool: tuple[PoolTable, Any, Path]) -> None:
    # 8 target, 8 never-saw, 20 unlearned (≥ min_pool 8); separating's AUC interval [1, 1] lies above random's
    res = meta_eval(pool[0], MetaEvalConfig(n_resamples=200, orientation=PLANTED_ORIENTATION))
    assert res.config.min_pool == 8 and res.rankable is True
    assert "disjoint" in res.rankable_reason
    md = to_markdown(meta_eval_document(res))
    assert "Ranking supported" in md and "No ranking is supported" not in md


def test_small_pools_are_not_ranked_in_the_json_and_the_report(tmp_path: Path) -> None:
    planted_pool(tmp_path, n_target=3, n_never=2, n_unlearned=10)  # the CPU preset's sizes
    res = meta_eval(load_pool(tmp_path), MetaEvalConfig(n_resamples=200, orientation=PLANTED_ORIENTATION))
    dumped = res.model_dump(mode="json")
    assert dumped["rankable"] is False
    assert dumped["rankable_reason"] == (
        "pools too small to rank: target 3, never_saw 2 models, fewer than min_pool = 8"
    )
    md = to_markdown(meta_eval_document(res))
    assert "**No ranking is supported**: pools too small to rank" in md
    assert "order (not a supported ranking)" in md
    smaller = meta_eval(
        load_pool(tmp_path), MetaEvalConfig(n_resamples=200, min_pool=2, metrics=["separating"])
    )
    assert smaller.rankable is False and "nothing to rank" in smaller.rankable_reason


def test_overlapping_intervals_support_no_ranking(pool: tuple[PoolTable, Any, Path]) -> None:
    # separating and uds = 1 − separating: both AUC 1 [1, 1], identical intervals, so they cannot be ordered
    cfg = MetaEvalConfig(n_resamples=200, orientation=PLANTED_ORIENTATION, metrics=["separating", "uds"])
    res = meta_eval(pool[0], cfg)
    assert res.rankable is False and "overlaps" in res.rankable_reason


def test_recovery_says_when_its_pool_cannot_compare_predictors(tmp_path: Path) -> None:
    big, small = tmp_path / "big", tmp_path / "small"
    big.mkdir()
    small.mkdir()
    planted_pool(big)
    planted_pool(small, n_unlearned=5)
    cfg = RecoveryConfig(orientation=PLANTED_ORIENTATION)
    ok = recovery(load_pool(big), cfg)
    # planted_pred's ρ ≈ 0.997 over 20 models lies well above random's interval
    assert ok.rankable is True
    low = recovery(load_pool(small), cfg)
    assert low.rankable is False
    assert low.rankable_reason.startswith("pool too small: 5 unlearned models with an outcome")
    md = to_markdown(recovery_document(low))
    assert "**No comparison of the predictors is supported**" in md
    assert "revival rate after relearning (revived / eligible items)" in md
    assert "Spearman ρ(m, excess revival)" in md and "steps to recover" in md
