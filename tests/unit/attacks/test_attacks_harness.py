"""The multi-state harness: not-applicable attacks yield a reason and no cells (C-Q2), cells carry k/n and
Wilson intervals (R19) per state (R22), analytic cells report the expected count, and the C-Q3 reading."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from remnant.attacks.base import AttackContext, ItemOutcome
from remnant.attacks.harness import CONTROL, POST, PRE, cell, cq3_check, run_on_states
from remnant.attacks.prefill import Prefill
from remnant.attacks.quantize import Quantize
from remnant.score.probe import Probe
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


@pytest.mark.parametrize(
    ("post", "pre", "expected"),
    [
        ((5, 3), (8, 8), "specific_to_post_removal"),
        ((5, 3), (8, 4), "format_disruption"),
        ((5, 3), None, "undetermined"),
        ((3, 5), (8, 4), "not_reduced"),
        ((3, 3), None, "not_reduced"),
    ],
)
def test_cq3_table(post: tuple[int, int], pre: tuple[int, int] | None, expected: str) -> None:
    base = {POST: _cell(POST, post[0], 10)}
    attacked = {POST: _cell(POST, post[1], 10)}
    if pre is not None:
        base[PRE], attacked[PRE] = _cell(PRE, pre[0], 10), _cell(PRE, pre[1], 10)
    finding = cq3_check(base, attacked)
    assert finding.explanation == expected and finding.reason


def test_not_applicable_has_reason_and_no_cells(attack_ctx: AttackContext, probes: list[Any]) -> None:
    states = {POST: (attack_ctx.model, attack_ctx.tokenizer)}
    result = run_on_states(Quantize(), attack_ctx, states, probes, track="Q")
    assert result.status == "not_applicable" and "track" in (result.reason or "")
    assert not result.states and result.to_dict()["status"] == "not_applicable"


def test_three_states_with_baseline(attack_ctx: AttackContext, probes: list[Any]) -> None:
    other = copy.deepcopy(attack_ctx.model)
    with torch.no_grad():
        for p in other.parameters():
            p.mul_(1.01)
    tok = attack_ctx.tokenizer
    states = {POST: (attack_ctx.model, tok), CONTROL: (other, tok), PRE: (attack_ctx.model, tok)}
    result = run_on_states(Prefill(), attack_ctx, states, probes)
    assert result.status == "run" and set(result.states) == set(result.baseline) == {POST, CONTROL, PRE}
    # post and pre are the same weights here, so their cells agree item for item
    assert [o.output for o in result.states[POST].outcomes] == [o.output for o in result.states[PRE].outcomes]
    d = result.to_dict(with_items=True)
    assert d["states"][POST]["kappa"]["n"] == len(probes) and "items" in d["states"][POST]
    # post == pre, so a drop on post is a drop on pre: never "specific_to_post_removal"
    assert result.cq3 is not None and result.cq3.explanation in ("not_reduced", "format_disruption")
