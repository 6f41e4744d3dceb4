"""An attack's cells through the one cell runner: not-applicable attacks are a status record with their reason
and no counts (C-Q2), cells carry k/n and Wilson intervals (R19) per state (R22), analytic cells report the
expected count, and identical inputs on every state (C-Q4) give the C-Q3 reading its deltas."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from remnant import registry
from remnant.attacks.base import AttackContext, ItemOutcome
from remnant.attacks.harness import cell
from remnant.attacks.quantize import Quantize
from remnant.engine.attack import AttackMeasurement, not_applicable
from remnant.engine.measurement import StateView, run_measurement, run_on_states
from remnant.engine.runner import CellRunner, MemoryStore
from remnant.records import CellRecord, Observation
from remnant.score.probe import Probe, target_format
from remnant.standard.cq3 import explain
from remnant.standard.derive import NONE
from remnant.standard.vocabulary import CONTROL, POST, PRE
from remnant.stats import wilson_interval


def _cell(state: str, k: int, n: int) -> Any:
    probes = [Probe(f"i{j}", "q", "a", ("a",)) for j in range(n)]
    outs = [ItemOutcome(f"i{j}", "x", j < k, True) for j in range(n)]
    return cell(state, outs, probes, 0.0)


def test_cell_rates() -> None:
    c = _cell(POST, 3, 10)
    assert (c.kappa.k, c.kappa.n) == (3, 10)
    assert (c.kappa.lo, c.kappa.hi) == pytest.approx(wilson_interval(3, 10))
    assert c.willing is not None and c.willing.k == 10


def test_analytic_cell_reports_expected_count() -> None:
    probes = [Probe(f"i{j}", "q", "a", ("a",)) for j in range(4)]
    outs = [ItemOutcome(f"i{j}", None, p, None) for j, p in enumerate([0.9, 0.8, 0.2, 0.3])]
    c = cell(POST, outs, probes, 0.0)
    assert c.expected_k == pytest.approx(2.2) and c.kappa.k == 2 and c.willing is None


def test_multiple_choice_cell_is_net_of_chance() -> None:
    probes = [
        Probe(f"i{j}", "q", "a", ("a",), options=("a", "b", "c", "d"), answer_index=0) for j in range(8)
    ]
    outs = [ItemOutcome(f"i{j}", "A", j < 4, True) for j in range(8)]
    c = cell(POST, outs, probes, 0.0)
    assert c.kappa.net == pytest.approx(0.25) and c.kappa.net_interval[0] >= 0.0


def _runner() -> tuple[CellRunner, MemoryStore]:
    store = MemoryStore()
    return CellRunner(store, "run-test"), store


def test_not_applicable_is_one_status_record_with_its_reason(
    attack_ctx: AttackContext, probes: list[Any]
) -> None:
    reason = Quantize().applicable(target_format(probes), "Q")
    assert reason is not None and "track" in reason
    runner, store = _runner()
    (record,) = run_measurement(runner, not_applicable("quantize", Quantize.surface, reason, {}), None)
    assert (record.status, record.reason, record.k, record.n) == ("not_applicable", reason, 0, 0)
    assert record.model_state == POST and record.attack == "quantize" and store.read() == [record]
    # a second schedule of the same cell reuses it (one record per cell, resume)
    run_measurement(runner, not_applicable("quantize", Quantize.surface, reason, {}), None)
    assert (runner.computed, runner.reused, len(store.read())) == (1, 1, 1)


def test_a_measurement_that_reads_a_model_run_on_no_state_is_a_failed_cell_naming_why(
    attack_ctx: AttackContext, probes: list[Any]
) -> None:
    # only a NotRun runs on no state; any other kind given None is a failed cell that says so (D-5.1: an
    # outcome, not a crashed run), never an AttributeError deep inside the attack
    runner, _ = _runner()
    (record,) = run_measurement(runner, AttackMeasurement(NONE, None, attack_ctx, probes, {}), None)
    assert record.status == "failed" and record.reason is not None
    assert record.reason.startswith("TypeError: none on post_removal reads a model state")


def _kappa(records: list[CellRecord]) -> float:
    (k,) = [r for r in records if r.metric == "kappa"]
    assert k.status == "run"
    return k.k / k.n


def test_three_states_get_identical_inputs(attack_ctx: AttackContext, probes: list[Any]) -> None:
    other = copy.deepcopy(attack_ctx.model)
    with torch.no_grad():
        for p in other.parameters():
            p.mul_(1.01)
    tok = attack_ctx.tokenizer
    states = {
        POST: StateView(POST, "a" * 64, attack_ctx.model, tok),
        CONTROL: StateView(CONTROL, "b" * 64, other, tok),
        PRE: StateView(PRE, "a" * 64, attack_ctx.model, tok),
    }
    runner, store = _runner()
    roles = (POST, CONTROL, PRE)
    # a registered instance: its spec is in the key, apart from the unattacked baseline's (R23)
    prefill = registry.create("attack", "prefill", {})
    attacked = run_on_states(
        runner, AttackMeasurement("prefill", prefill, attack_ctx, probes, {}, roles=roles), states
    )
    base = run_on_states(runner, AttackMeasurement(NONE, None, attack_ctx, probes, {}, roles=roles), states)
    assert set(attacked) == set(base) == set(roles) and runner.computed == 6
    outputs: dict[str, list[str | None]] = {}
    for r in store.read():
        if isinstance(r, Observation) and r.attack == "prefill":
            outputs.setdefault(r.model_state, []).append(r.output_excerpt)
    # post and pre are the same weights here, so their cells agree item for item
    assert outputs[POST] == outputs[PRE] and len(outputs[POST]) == len(probes)
    assert {r.n for r in attacked[POST] if r.metric == "kappa"} == {len(probes)}
    post = _kappa(attacked[POST]) - _kappa(base[POST])
    pre = _kappa(attacked[PRE]) - _kappa(base[PRE])
    assert post == pytest.approx(pre)
    # post == pre, so a drop on post is a drop on pre: never "specific_to_post_removal" (C-Q3)
    assert explain(post, pre)[0] in ("not_reduced", "format_disruption")
