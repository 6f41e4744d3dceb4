"""remnant study recovery on synthetic pools with a planted predictor (the J-Access paper, Test 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _study_pools import PLANTED_ORIENTATION, planted_pool, spearman_with_two_swaps

from remnant.errors import ConfigError
from remnant.results import PoolTable, load_pool
from remnant.studies.config import RecoveryConfig
from remnant.studies.recovery import RecoveryResult, recovery

CFG = RecoveryConfig(orientation=PLANTED_ORIENTATION)


def _pred(result: RecoveryResult, name: str) -> Any:
    return next(p for p in result.predictors if p.metric == name)


@pytest.fixture(scope="module")
def revival(pool: tuple[PoolTable, dict[str, Any], Path]) -> RecoveryResult:
    return recovery(pool[0], CFG)


def test_excess_revival_is_read_from_the_items(
    revival: RecoveryResult, pool: tuple[PoolTable, dict[str, Any], Path]
) -> None:
    planted = pool[1]
    assert revival.outcome == "kappa"  # auto: kappa is a column
    assert revival.gold_rate == pytest.approx(planted["gold"])  # never-saw models revive one item in 21
    rates = {o.model: o.rate for o in revival.outcomes}
    assert [rates[o.model] for o in revival.outcomes] == pytest.approx(planted["rates"])
    for o, rate in zip(revival.outcomes, planted["rates"], strict=True):
        assert o.recovery == pytest.approx(rate - planted["gold"])


@pytest.mark.parametrize("kind", ["revival", "shift"])
def test_a_planted_predictor_gets_the_planted_correlation(
    pool: tuple[PoolTable, dict[str, Any], Path], kind: str
) -> None:
    result = recovery(pool[0], CFG.model_copy(update={"outcome_kind": kind}))
    planted = _pred(result, "planted_pred")
    assert planted.pooled.rho == pytest.approx(spearman_with_two_swaps(20), abs=1e-12)
    assert planted.pooled.n == 20 and planted.pooled.significant
    # the two swaps cross methods (k = 0/1 and 2/3), so each method alone is perfectly ranked
    assert {m: rho for m, (rho, _) in planted.within_method.per_method.items()} == pytest.approx(
        {"grad_diff": 1.0, "npo": 1.0}
    )
    assert planted.within_method.rho == pytest.approx(1.0, abs=1e-9)
    noise = _pred(result, "random")
    assert abs(noise.pooled.rho) < 0.5 and not noise.pooled.significant


def test_partial_correlation_controls_for_the_covariates(revival: RecoveryResult) -> None:
    planted = _pred(revival, "planted_pred")
    assert planted.covariates == ["utility"]  # forget_quality is not a column of this pool
    assert planted.partial.rho is not None and planted.partial.rho > 0.95 and planted.partial.n == 20


def test_item_level_auroc_finds_which_facts_come_back(revival: RecoveryResult) -> None:
    planted = _pred(revival, "planted_pred").item_level
    assert planted.median_auroc == 1.0 and planted.n_models == 20  # every model revives some items, not all
    noise = _pred(revival, "random").item_level
    assert noise.median_auroc is not None and 0.3 < noise.median_auroc < 0.7


def test_holm_across_metrics(revival: RecoveryResult) -> None:
    tested = [p.pooled for p in revival.predictors if p.pooled.p is not None]
    assert len(tested) >= 5
    for c in tested:
        assert c.p_holm is not None and c.p is not None and c.p_holm >= c.p
    smallest = min(tested, key=lambda c: c.p or 1.0)
    assert smallest.p_holm == pytest.approx(min(1.0, len(tested) * (smallest.p or 0.0)))


def test_steps_to_recover_and_censoring(tmp_path: Path) -> None:
    planted_pool(tmp_path, steps=True)
    table = load_pool(tmp_path)
    without = recovery(table, CFG)
    assert _pred(without, "planted_pred").steps.n == 19  # the never-recovered model is left out
    assert _pred(without, "planted_pred").steps.rho == pytest.approx(-1.0)
    censored = recovery(table, CFG.model_copy(update={"steps_horizon": 1000.0}))
    steps = _pred(censored, "planted_pred").steps
    assert steps.n == 20 and steps.rho is not None and steps.rho < -0.9
    assert "steps_to_recover" not in {p.metric for p in censored.predictors}  # an outcome, not a predictor


def test_missing_inputs_are_refused_or_noted(
    tmp_path: Path, pool: tuple[PoolTable, dict[str, Any], Path]
) -> None:
    assert any("steps" in n for n in recovery(pool[0], CFG).notes)
    (pool[2] / "items.csv").rename(tmp_path / "items.csv")
    try:
        bare = load_pool(pool[2])
        with pytest.raises(ConfigError, match="items table"):
            recovery(bare, CFG)
        assert (
            _pred(recovery(bare, CFG.model_copy(update={"outcome_kind": "shift"})), "planted_pred").item_level
            is None
        )
    finally:
        (tmp_path / "items.csv").rename(pool[2] / "items.csv")
    with pytest.raises(ConfigError, match="not a column"):
        recovery(pool[0], CFG.model_copy(update={"outcome": "nope"}))


def test_never_saw_models_revive_against_the_target_pool_not_their_base_parent(tmp_path: Path) -> None:
    """A sweep names the base model as a retain-only install's parent; the base model never held the target, so
    its items would make nothing eligible. The gold level is read against the target pool, as without parents."""
    import csv

    from _study_pools import planted_pool

    planted = planted_pool(tmp_path)
    with (tmp_path / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    columns = list(rows[0])
    for row in rows:
        if row["pool"] == "never_saw":
            row["parent"] = "base"
    base = dict.fromkeys(columns, "") | {
        "model": "base",
        "pool": "base",
        "status": "ok",
        "hyperparameters": "{}",
    }
    rows += [base | {"perturbation": p, "kappa": "0.0", "utility": "0.0"} for p in ("none", "nf4", "relearn")]
    with (tmp_path / "results.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    with (tmp_path / "items.csv").open("a", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerows(["base", "none", "kappa", f"q{j:02d}", 0.0] for j in range(planted["n_items"]))
    result = recovery(load_pool(tmp_path), CFG)
    assert result.gold_rate == pytest.approx(planted["gold"])
