"""The insignificance bar (D-5.1, D-5.2), the design record (D5) and pack-size support (R21): pure, no model.

Golden numbers are statsmodels' Wilson interval (not remnant.stats) on hand-built counts.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remnant.classd import (
    canary_support,
    comparison_warning,
    count,
    design_differences,
    design_of,
    linkability_probes,
)
from remnant.demo_vectors import PACKAGED_VECTORS
from remnant.packs import ClassDSpec, mint_class_d
from remnant.standard.facts import VerdictFacts
from remnant.standard.verdict import decide
from remnant.statement.classd_bar import bar_from_facts, evaluate_bar, net_rate
from remnant.stats import newcombe_difference

VECTORS = PACKAGED_VECTORS
CLASS_D_VECTORS = sorted(p for p in VECTORS.glob("*.json") if "class_d" in p.stem)


def test_net_rate_golden_control_cancels_leak() -> None:
    # 48/600 against a control-entity rate of 45/600 (vector e49); statsmodels Wilson: [0.06087, 0.10447].
    r = net_rate("singling_out", "singling_out", 48, 600, 45, 600)
    assert r.ci95 == pytest.approx((0.060869154937402234, 0.10447467391410638), abs=1e-12)
    assert r.net_upper == pytest.approx(0.02947467391410638, abs=1e-12)
    assert r.net_rate == pytest.approx(3 / 600, abs=1e-15)
    assert r.net_ci95[0] == 0.0  # 0.0609 - 0.075 floored at zero


def test_net_rate_golden_baseline_then_control() -> None:
    # Linkability 160/600, four options (baseline 0.25), control 150/600: upper 0.3035 - 0.25 - 0 = 0.0535.
    r = net_rate("linkability", "linkability", 160, 600, 150, 600, baseline=0.25)
    assert r.net_upper == pytest.approx(0.053453604699062796, abs=1e-12)
    # A control below chance cannot lower the bar: its point net of chance floors at zero (D-3, D4).
    low = net_rate("linkability", "linkability", 160, 600, 120, 600, baseline=0.25)
    assert low.net_upper == pytest.approx(r.net_upper, abs=1e-15)


def test_bar_threshold_is_strict() -> None:
    r = net_rate("s", "singling_out", 0, 500, 0, 500)
    assert r.net_upper == pytest.approx(0.007624340461552245, abs=1e-12)
    others = [net_rate("l", "linkability", 0, 500, 0, 500), net_rate("i", "inference", 0, 500, 0, 500)]
    assert not evaluate_bar(r.net_upper, "equal", [r, *others]).passes  # equal is not below (D-5.1)
    assert evaluate_bar(r.net_upper + 1e-12, "just above", [r, *others]).passes


def test_bar_needs_all_three_risks() -> None:
    rows = [net_rate("s", "singling_out", 0, 500, 0, 500), net_rate("l", "linkability", 0, 500, 0, 500)]
    bar = evaluate_bar(0.05, "why", rows)
    assert not bar.passes and not bar.risk("inference").measured
    assert any("inference: no admitted measurement" in r for r in bar.reasons)
    with pytest.raises(ValueError, match="inference"):
        bar.statement_block()


@pytest.mark.parametrize("path", CLASS_D_VECTORS, ids=[p.stem for p in CLASS_D_VECTORS])
def test_bar_agrees_with_verdict_on_vectors(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    facts = VerdictFacts.model_validate(data["facts"])
    if facts.insignificance is None:
        pytest.skip("no threshold declared")
    bar = bar_from_facts(facts)
    expected = data["expected"]["verdict"]
    if expected == "removed":
        assert bar.passes, bar.reasons
    if bar.passes is False:
        assert expected != "removed"


def test_statement_block_carries_threshold_justification_and_rates() -> None:
    data = json.loads(
        (VECTORS / "e49_class_d_control_cancels_apparent_leak.json").read_text(encoding="utf-8")
    )
    bar = bar_from_facts(data["facts"])
    block = bar.statement_block()
    assert block.threshold == 0.05 and block.justification.startswith("Below one canary")
    # the deciding singling-out measurement is the one with the larger net upper bound (relearning 4/600 vs 48/600)
    assert (block.singling_out.k, block.singling_out.n) == (48, 600)
    assert block.singling_out.ci95 == pytest.approx((0.060869154937402234, 0.10447467391410638), abs=1e-12)
    assert block.inference.k == 360 and bar.risk("inference").deciding.baseline == 0.6  # type: ignore[union-attr]


_counts = st.integers(min_value=0, max_value=60)


def _q_track_facts(attacks: list[dict[str, Any]], threshold: float, chance: float | None) -> VerdictFacts:
    """Class D, Q-track, τ = 1 facts over ``attacks`` with the bar at ``threshold`` (and a chance rate)."""
    return VerdictFacts.model_validate(
        {
            "standard_version": "0.3",
            "class": "D",
            "track": "Q",
            "gating_metric": "kappa",
            "tau": 1.0,
            "phi": 0.5,
            "utility": {"removal_stage": 1.0, "attack_stage": None},
            "attacks": attacks,
            "insignificance": {"threshold": threshold, "justification": "test"},
            **({"chance_rate": chance} if chance is not None else {}),
        }
    )


@settings(max_examples=150, deadline=None)
@given(
    ks=st.lists(st.tuples(_counts, _counts), min_size=3, max_size=3),
    n=st.integers(min_value=61, max_value=400),
    threshold=st.floats(min_value=0.01, max_value=0.6),
    baselines=st.tuples(st.sampled_from([None, 0.1, 0.25]), st.sampled_from([None, 0.2, 0.5])),
    chance=st.sampled_from([None, 0.1]),
)
def test_bar_equals_the_verdict_engines_d51(
    ks: list[tuple[int, int]],
    n: int,
    threshold: float,
    baselines: tuple[float | None, float | None],
    chance: float | None,
) -> None:
    """Q-track, τ = 1 and k < n: the verdict is removed exactly when the bar passes (one reading of 'net'), with
    or without a target chance rate standing in for a measurement's own baseline."""
    risks = ("singling_out", "linkability", "inference")
    attacks = []
    for (k, ck), risk, base in zip(ks, risks, (None, *baselines), strict=True):
        entry = {
            "name": risk,
            "surface": "inference_time",
            "status": "run",
            "k": k,
            "n": n,
            "control_k": ck,
            "control_n": n,
            "risk": risk,
        }
        if base is not None:
            entry["baseline"] = base
        attacks.append(entry)
    facts = _q_track_facts(attacks, threshold, chance)
    assert (decide(facts).verdict == "removed") == bar_from_facts(facts).passes


def test_a_target_chance_rate_shifts_the_bar_as_it_shifts_the_verdict() -> None:
    """A Class D measurement without its own baseline is net of the target's chance rate in the bar (D-5.1) as in
    the verdict (R19): 10/500 against control 5/500 at chance 0.25 is net zero in both, so a bar of 0.01 passes
    and the verdict may be removed. The bar once ignored the chance rate (net upper 0.0264: not below 0.01) while
    the verdict read the same facts as removed, and validate then refused remnant's own statement."""
    attacks = [
        {"name": r, "surface": "inference_time", "status": "run", "k": 10, "n": 500}
        | {"control_k": 5, "control_n": 500, "risk": r}
        for r in ("singling_out", "linkability", "inference")
    ]
    facts = _q_track_facts(attacks, 0.01, 0.25)
    bar = bar_from_facts(facts)
    assert decide(facts).verdict == "removed" and bar.passes, bar.reasons
    deciding = bar.risk("singling_out").deciding
    assert deciding is not None and deciding.baseline == 0.25 and deciding.net_upper == 0.0


def test_linkage_at_chance_scores_near_the_control_rate() -> None:
    """A chooser that ignores the question picks at random: the target rate sits at the control rate, the net
    rate is indistinguishable from zero, and the bar can be met (D-3.1, D-3.2, D4)."""
    pack = mint_class_d(ClassDSpec(entities=800, controls=400, seed=3, general=False))
    canaries = linkability_probes(pack)
    assert len(canaries.target) == 200 and len(canaries.control) == 400
    rng = random.Random(11)
    hits = {p.item_id: rng.randrange(len(p.options or ())) == p.answer_index for p in canaries.probes}
    c = count(canaries, hits, method="random")
    assert c.baseline == 0.25
    diff, lo, hi = newcombe_difference(c.k, c.n, c.control_k, c.control_n)
    assert lo < 0 < hi  # no linkage beyond the control-entity rate
    assert abs(c.rate - c.control_rate) < 0.08 and abs(c.control_rate - 0.25) < 0.06
    r = net_rate(c.name, "linkability", c.k, c.n, c.control_k, c.control_n, c.baseline)
    assert r.net_rate < 0.05 and r.net_upper < 0.12
    # golden counts for this pack and chooser stream: 47/200 against 96/400 at chance 0.25 (net 0, upper 0.0484)
    assert (c.k, c.n, c.control_k, c.control_n) == (47, 200, 96, 400)
    assert r.net_upper == pytest.approx(0.29841368882762537 - 0.25, abs=1e-12)


def test_design_record_and_comparison_warning() -> None:
    a = design_of(mint_class_d(ClassDSpec(entities=40, controls=20, seed=1, general=False)))
    assert a.attribute_cardinality == {
        "home_town": 40,
        "employer": 30,
        "occupation": 20,
        "birth_year": 50,
        "staff_code": "unique",
    }
    assert a.repetitions == 3 and a.install_items_per_fact == 3 and a.link_options == 4
    assert (a.entities, a.control_entities, a.probe_entities) == (40, 20, 10)
    same = design_of(mint_class_d(ClassDSpec(entities=40, controls=20, seed=2, general=False)))
    assert comparison_warning(a, same) is None  # another seed, the same design
    other = design_of(
        mint_class_d(ClassDSpec(entities=40, controls=20, seed=1, link_options=3, general=False))
    )
    assert [d[0] for d in design_differences(a, other)] == ["link_options"]
    warning = comparison_warning(a, other)
    assert warning is not None and warning.startswith("D5:") and "link_options: 4 vs 3" in warning
    epochs = a.model_copy(update={"install_epochs": 5.0})
    assert "install_epochs" in (comparison_warning(a, epochs) or "")


@pytest.mark.parametrize(
    ("n", "threshold", "bound_met", "table_met", "bound_n"),
    [
        (500, 0.01, True, True, 381),
        (499, 0.01, True, False, 381),
        (500, 0.0076, False, True, 502),
        (100, 0.05, True, False, 73),
        (72, 0.05, False, False, 73),
    ],
)
def test_canary_support(n: int, threshold: float, bound_met: bool, table_met: bool, bound_n: int) -> None:
    s = canary_support(n, threshold)
    assert (s.bound_met, s.table_met, s.bound_n) == (bound_met, table_met, bound_n)
    assert s.tier4_supportable == (bound_met and table_met)
    if bound_met:
        assert s.max_net_recoveries is not None and s.max_net_recoveries >= 0
    else:
        assert s.max_net_recoveries is None
