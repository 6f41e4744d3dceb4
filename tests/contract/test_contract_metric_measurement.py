"""MetricSuite beyond the contract: a pool of states evaluated through the one cell runner, one cell per metric,
its results rebuilt from the records equal to ``remnant.metrics.evaluate``'s (one shared pass), its keys, and what
it refuses."""

from __future__ import annotations

import copy
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from contract_cases import RETAIN_LOG, State, World

from remnant.engine.measurement import cell_key_of, run_measurement
from remnant.engine.runner import CellRunner
from remnant.errors import ConfigError
from remnant.metrics.catalogue import DEFAULT_TOFU, TOFU_METRICS
from remnant.metrics.encoding import OpenUnlearningPrompt
from remnant.metrics.evaluate import EvalSettings, RetainLog, evaluate
from remnant.metrics.measurement import (
    SURFACE,
    MetricMeasurement,
    MetricSuite,
    readings_from_records,
    run_metrics,
)
from remnant.records import CellRecord, Observation, RecordStore

SETTINGS = EvalSettings(batch_size=8, max_new_tokens=4)
SUITE = [*DEFAULT_TOFU, "mia_loss", "exact_memorization", "forget_Q_A_PERT_ROUGE"]


def _measurement(world: World, names: list[str], **kw: Any) -> MetricSuite:
    prompt = OpenUnlearningPrompt.for_tokenizer(world.state.tokenizer)
    return MetricSuite(names, world.rows, prompt, dtype="fp32", **{"settings": SETTINGS, **kw})


def _cell(suite: MetricSuite, metric: str) -> MetricMeasurement:
    return next(c for c in suite.cells() if c.metric == metric)


@pytest.fixture(scope="module")
def pool(world: World) -> dict[str, State]:
    """Two checkpoints of a pool: the tiny model and a perturbed copy (its own weights digest)."""
    other = copy.deepcopy(world.state.model)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(0.05 * torch.sign(p))
    return {
        "ckpt_a": replace(world.state, role="ckpt_a"),
        "ckpt_b": State("ckpt_b", other, world.state.tokenizer, "b" * 64),
    }


def _primary(entry: Any, rouge_type: str | None) -> Any:
    key = rouge_type or ("score" if "score" in entry else "prob")
    return entry[key]


def test_a_pool_through_the_engine_rebuilds_evaluate_from_records(
    world: World, pool: dict[str, State], tmp_path: Path
) -> None:
    retain = RetainLog(RETAIN_LOG, "contract retain log")
    measurement = _measurement(world, SUITE, retain_log=retain)
    store = RecordStore(tmp_path / "records.jsonl")
    runner = CellRunner(store, "pool")
    for state in pool.values():
        run_metrics(runner, measurement, state)
    assert runner.computed == 2 * len(measurement.computed)  # one cell per metric, dependencies too
    rebuilt = readings_from_records(store.read())
    assert set(rebuilt) == set(pool)
    for role, state in pool.items():
        direct = evaluate(
            state,
            world.rows.__getitem__,
            SUITE,
            prompt=measurement.prompt,
            settings=SETTINGS,
            retain_log=retain,
        )
        # every computed metric (dependencies too, as remnant eval logs them), its aggregate to the bit
        assert {m: r.value for m, r in rebuilt[role].items()} == direct.summary()
        for metric, log in direct.logs.items():
            reading = rebuilt[role][metric]
            assert reading.status == "run"
            rouge = direct.specs[metric].params.get("rouge_type")
            want: dict[str, Any] = {}
            tables = [("", log.value_by_index)] if log.value_by_index is not None else []
            tables += [
                (f"{s}/", log.extra[s]["value_by_index"]) for s in ("forget", "holdout") if s in log.extra
            ]
            for prefix, table in tables:
                for index, entry in table.items():
                    value = _primary(entry, rouge)
                    if isinstance(value, list):
                        want.update({f"{prefix}{index}/{j}": v for j, v in enumerate(value)})
                    else:
                        want[f"{prefix}{index}"] = value
            assert reading.items == want, metric
    # the two checkpoints differ (the pool is not one model twice)
    assert rebuilt["ckpt_a"]["forget_Q_A_Prob"].value != rebuilt["ckpt_b"]["forget_Q_A_Prob"].value


def test_aggregates_are_nominal_counts_and_observations_are_graded(world: World, tmp_path: Path) -> None:
    measurement = _measurement(
        world, ["forget_Q_A_PERT_Prob", "mia_min_k", "model_utility", "forget_Q_A_ROUGE"]
    )
    runner = CellRunner(RecordStore(tmp_path / "r.jsonl"), "run")
    cells = {c.metric: c for c in run_metrics(runner, measurement, world.state)}
    records = runner.store.read()
    # a value that is not k/n: k = 0 and n the items read (R19), as utility records a non-proportion
    forget_n = len(world.rows["forget10_perturbed"])
    assert (cells["forget_Q_A_PERT_Prob"].k, cells["forget_Q_A_PERT_Prob"].n) == (0, forget_n)
    assert cells["mia_min_k"].n == forget_n + len(world.rows["holdout10"])
    assert cells["model_utility"].n == 1  # an aggregate of aggregates: a nominal n of 1
    assert cells["forget_Q_A_ROUGE"].component == {
        "kind": "metric",
        "name": "rouge",
        "version": "1",
        "params": {"rouge_type": "rougeL_recall", "max_new_tokens": 4, "stopwords": []},
    }  # the length the generations were made with (SETTINGS overrides the configured 200), R23
    mia = cells["mia_min_k"].params
    assert mia["agg_value"] == mia["extra"]["auc"] and set(mia["extra"]) == {"auc", "forget", "holdout"}
    assert cells["model_utility"].params["requested"] and not cells["ra_Truth_Ratio"].params["requested"]
    observations = [r for r in records if isinstance(r, Observation)]
    assert all(o.kappa is None and o.willing is None and o.surface == SURFACE for o in observations)
    pert = [o for o in observations if o.item_id.startswith("forget_Q_A_PERT_Prob/")]
    n_answers = sum(len(r.perturbed_answer or ()) for r in world.rows["forget10_perturbed"])
    assert len(pert) == n_answers and pert[0].item_id == "forget_Q_A_PERT_Prob/0/0"
    per_item = [
        sum(o.score or 0.0 for o in pert if o.item_id.startswith(f"forget_Q_A_PERT_Prob/{i}/")) / 2
        for i in range(forget_n)
    ]
    assert math.isclose(cells["forget_Q_A_PERT_Prob"].params["agg_value"], sum(per_item) / forget_n)
    rouge = [o for o in observations if o.item_id.startswith("forget_Q_A_ROUGE/")]
    assert rouge and all(o.output_excerpt is not None for o in rouge)


def test_forget_quality_without_a_retain_log_is_not_run_with_the_note(world: World, tmp_path: Path) -> None:
    runner = CellRunner(RecordStore(tmp_path / "r.jsonl"), "run")
    cells = {c.metric: c for c in run_metrics(runner, _measurement(world, ["forget_quality"]), world.state)}
    fq = cells["forget_quality"]
    assert fq.status == "not_run" and fq.k == fq.n == 0
    assert fq.reason is not None and "no retain model log" in fq.reason
    assert cells["forget_truth_ratio"].status == "run"  # its dependency still ran
    assert readings_from_records(runner.store.read())["post_removal"]["forget_quality"].value is None


def test_the_key_holds_only_the_inputs_the_metrics_read(world: World) -> None:
    state = world.state
    plain = _cell(_measurement(world, ["forget_Q_A_Prob"]), "forget_Q_A_Prob")
    retain = RetainLog(RETAIN_LOG, "x")
    # a retain log or a reference model no requested metric reads does not split the cache
    for kw in ({"retain_log": retain}, {"reference": state}):
        other = _measurement(world, ["forget_Q_A_Prob"], **kw)
        assert cell_key_of(_cell(other, "forget_Q_A_Prob"), state) == cell_key_of(plain, state)
    # splits no metric reads are not in the key; the alias is its log key
    extra = {**world.rows, "unused_split": list(world.rows["holdout10"])}
    prompt = plain.suite.prompt
    same = MetricSuite(["forget_Q_A_Prob"], extra, prompt, dtype="float32", settings=SETTINGS)
    assert cell_key_of(_cell(same, "forget_Q_A_Prob"), state) == cell_key_of(plain, state)
    alias = MetricSuite(["forget_Truth_Ratio"], world.rows, prompt, dtype="fp32", settings=SETTINGS)
    assert alias.metrics == ("forget_truth_ratio",)
    assert set(plain.key_inputs()["data"]) == {"forget10_perturbed"}


def test_one_cell_per_metric_keyed_by_its_own_and_its_dependencies_inputs(world: World) -> None:
    """Another metric beside it leaves a metric's key as it is; a dependency's parameter is in the dependent's key
    (forget_quality reads forget_truth_ratio), another metric's generation length is not."""
    state = world.state
    alone = _measurement(world, ["forget_quality"])
    both = _measurement(world, ["forget_quality", "forget_Q_A_ROUGE"])
    order = [c.metric for c in both.cells()]  # dependencies first, each its own cell
    assert order[-2:] == ["forget_quality", "forget_Q_A_ROUGE"] and "forget_truth_ratio" in order[:-2]
    keys = {c.metric: cell_key_of(c, state) for c in both.cells()}
    assert keys["forget_quality"] == cell_key_of(_cell(alone, "forget_quality"), state)
    assert len(set(keys.values())) == len(order)
    longer = MetricSuite(
        ["forget_quality", "forget_Q_A_ROUGE"],
        world.rows,
        alone.prompt,
        dtype="fp32",
        settings=replace(SETTINGS, max_new_tokens=5),
    )
    changed = {c.metric for c in longer.cells() if cell_key_of(c, state) != keys[c.metric]}
    assert changed == {"forget_Q_A_ROUGE"}
    quality = _cell(alone, "forget_quality").key_inputs()["components"]
    assert {"forget_truth_ratio", "forget_quality"} <= set(quality) and "forget_Q_A_ROUGE" not in quality


def test_refusals_name_the_requirement(world: World) -> None:
    prompt = OpenUnlearningPrompt.for_tokenizer(world.state.tokenizer)
    with pytest.raises(ConfigError, match="unknown metric 'forget_nonsense'") as unknown:
        MetricSuite(["forget_nonsense"], world.rows, prompt, dtype="fp32")
    assert unknown.value.requirement == "R23"
    rows = {k: v for k, v in world.rows.items() if k != "holdout10"}
    with pytest.raises(ConfigError, match="holdout10") as missing:
        MetricSuite(["mia_loss"], rows, prompt, dtype="fp32")
    assert missing.value.requirement == "R2"
    with pytest.raises(ConfigError, match="names no metric"):
        MetricSuite([], world.rows, prompt, dtype="fp32")


def test_a_state_loaded_in_another_dtype_than_declared_is_refused(world: World, tmp_path: Path) -> None:
    declared = MetricSuite(
        ["forget_Q_A_Prob"], world.rows, OpenUnlearningPrompt(), dtype="bf16", settings=SETTINGS
    )
    runner = CellRunner(RecordStore(tmp_path / "r.jsonl"), "run")
    with pytest.raises(ValueError, match="loaded in fp32, the measurement declares bf16"):
        run_measurement(runner, _cell(declared, "forget_Q_A_Prob"), world.state)
    assert runner.store.read() == []  # not a failed cell: a mis-declared key is the caller's bug


def test_every_named_metric_runs_through_the_engine(world: World, tmp_path: Path) -> None:
    names = [n for n in TOFU_METRICS if n != "mia_reference"]
    measurement = _measurement(world, names, retain_log=RetainLog(RETAIN_LOG, "x"))
    runner = CellRunner(RecordStore(tmp_path / "r.jsonl"), "run")
    cells = run_metrics(runner, measurement, world.state)
    assert sorted(c.metric for c in cells) == sorted(names)
    assert all(isinstance(c, CellRecord) and c.status == "run" for c in cells)


def test_the_shared_pass_covers_the_whole_suite_and_only_the_expected_cells_read_it(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resumed state (a sweep task whose other metric cells are recorded, ``MetricSuite.expect``) makes one pass
    over the whole suite, as a fresh run does, and its pending cell records the values a fresh run records."""
    import remnant.metrics.evaluate as evaluate_module

    asked: list[tuple[str, ...]] = []
    real = evaluate_module.evaluate

    def counting(state: Any, data: Any, names: Any, **kw: Any) -> Any:
        asked.append(tuple(names))
        return real(state, data, names, **kw)

    monkeypatch.setattr(evaluate_module, "evaluate", counting)
    full = _measurement(world, ["forget_Q_A_Prob", "forget_Q_A_ROUGE"])
    from remnant.engine.runner import MemoryStore

    whole = {c.metric: run_measurement(CellRunner(MemoryStore(), "r"), c, world.state) for c in full.cells()}
    assert asked == [("forget_Q_A_Prob", "forget_Q_A_ROUGE")]  # one pass for both
    resumed = _measurement(world, ["forget_Q_A_Prob", "forget_Q_A_ROUGE"])
    resumed.expect(["forget_Q_A_ROUGE"])  # forget_Q_A_Prob recorded already
    rouge = _cell(resumed, "forget_Q_A_ROUGE")
    again = run_measurement(CellRunner(MemoryStore(), "r"), rouge, world.state)
    assert asked[1:] == [("forget_Q_A_Prob", "forget_Q_A_ROUGE")]
    assert [r.model_dump(exclude={"elapsed_s"}) for r in again] == [
        r.model_dump(exclude={"elapsed_s"}) for r in whole["forget_Q_A_ROUGE"]
    ]


def test_a_resumed_state_records_what_a_fresh_run_records_when_its_metrics_share_batches(
    world: World,
) -> None:
    """R23, DESIGN §8: a sweep task retried after its worker died, or a resumed ``remnant eval``, has some of a
    state's metric cells recorded already. The teacher-forced metrics share one batched pass, and a row's float32
    log-probabilities depend on the rows batched (and padded) with it, so the pass always covers the whole
    suite: the cells still to run get the values a fresh run gives them, bit for bit."""
    from remnant.engine.runner import MemoryStore

    names = ["forget_Q_A_Prob", "forget_Q_A_PARA_Prob", "forget_Q_A_PERT_Prob", "forget_truth_ratio"]
    settings = replace(SETTINGS, batch_size=3)  # batches of rows from several metrics, unequal lengths
    full = _measurement(world, names, settings=settings)
    whole = {c.metric: run_measurement(CellRunner(MemoryStore(), "r"), c, world.state) for c in full.cells()}
    resumed = _measurement(world, names, settings=settings)
    later = [m for m in resumed.computed if m != "forget_Q_A_Prob"]  # forget_Q_A_Prob recorded already
    resumed.expect(later)
    for metric in later:
        again = run_measurement(CellRunner(MemoryStore(), "r"), _cell(resumed, metric), world.state)
        assert [r.model_dump(exclude={"elapsed_s"}) for r in again] == [
            r.model_dump(exclude={"elapsed_s"}) for r in whole[metric]
        ], metric
