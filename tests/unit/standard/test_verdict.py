"""The verdict facts (V1) and the verdict engine (V1, V1a, R13, R20, C1, C2, C-Q1, C-Q2, D-5.1).

The published vectors (remnant/data/vectors) pin one case per rule; here: input validation with field-naming messages,
the JSON round trip the statement code relies on, and hypothesis properties over random facts that must hold
for every input (the floor decides utility-collapsed alone, removed implies every bound below τ, non-adjudicating
attacks never move a verdict, the bounds rule is stricter than the point rule).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from remnant.cli import main
from remnant.standard.facts import VerdictFacts
from remnant.standard.verdict import CQ1_REQUIRED, decide, net_rate
from remnant.stats import wilson_interval


def facts(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "standard_version": "0.3",
        "class": "C",
        "track": "W",
        "gating_metric": "kappa",
        "tau": 0.5,
        "phi": 0.9,
        "utility": {"removal_stage": 0.97, "attack_stage": 0.99},
        "attacks": [
            {"name": "relearning", "surface": "relearning", "status": "run", "k": 9, "n": 300, "control_k": 7, "control_n": 300},
            {"name": "prefill", "surface": "inference_time", "status": "run", "k": 12, "n": 300, "control_k": 10, "control_n": 300},
            {"name": "many_shot", "surface": "inference_time", "status": "run", "k": 8, "n": 300, "control_k": 8, "control_n": 300},
            {"name": "repeated_sampling", "surface": "inference_time", "status": "run", "k": 15, "n": 300, "control_k": 13, "control_n": 300},
        ],
    }  # fmt: skip
    base.update(over)
    return base


def verdict_of(data: dict[str, Any]) -> str:
    return decide(VerdictFacts.model_validate(data)).verdict


# --- facts validation -----------------------------------------------------------------------------------------


def _attack(**over: Any) -> dict[str, Any]:
    a = {
        "name": "x",
        "surface": "inference_time",
        "status": "run",
        "k": 1,
        "n": 10,
        "control_k": 0,
        "control_n": 10,
    }
    a.update(over)
    return {k: v for k, v in a.items() if v is not _DROP}


_DROP = object()

BAD: dict[str, tuple[dict[str, Any], str, str]] = {
    "k_above_n": (facts(attacks=[_attack(k=11)]), "attacks.0", "k=11 exceeds n=10"),
    "n_zero": (facts(attacks=[_attack(n=0)]), "attacks.0.n", "greater than 0"),
    "k_negative": (facts(attacks=[_attack(k=-1)]), "attacks.0.k", "greater than or equal to 0"),
    "run_without_k": (facts(attacks=[_attack(k=_DROP)]), "attacks.0", "needs k and n (R19"),
    "control_half_given": (
        facts(attacks=[_attack(control_n=None)]),
        "attacks.0",
        "both be given or both be null",
    ),
    "control_k_above_n": (facts(attacks=[_attack(control_k=12)]), "attacks.0", "control_k=12 exceeds"),
    "na_without_reason": (
        facts(attacks=[{"name": "prefill", "surface": "inference_time", "status": "not_applicable"}]),
        "attacks.0",
        "needs a reason (C-Q2",
    ),
    "results_on_not_run": (
        facts(attacks=[_attack(status="not_run")]),
        "attacks.0",
        "only an attack that ran",
    ),
    "latent_adjudicating": (
        facts(attacks=[_attack(surface="latent", adjudicating=True)]),
        "attacks.0",
        "latent surface (C-H6",
    ),
    "duplicate_name": (facts(attacks=[_attack(), _attack()]), "", "duplicate attack name 'x'"),
    "risk_on_class_c": (facts(attacks=[_attack(risk="linkability")]), "", "risks are Class D"),
    "insignificance_on_class_c": (
        facts(insignificance={"threshold": 0.05, "justification": "j"}),
        "",
        "Class D's (D-5.1)",
    ),
    "tau_zero": (facts(tau=0.0), "tau", "greater than 0"),
    "tau_above_one": (facts(tau=1.5), "tau", "less than or equal to 1"),
    "tau_nan": (facts(tau=float("nan")), "tau", "finite"),
    "phi_negative": (facts(phi=-0.1), "phi", "greater than or equal to 0"),
    "chance_one": (facts(chance_rate=1.0), "chance_rate", "less than 1"),
    "unknown_field": (facts(verdict="removed"), "verdict", "Extra inputs"),
    "old_standard": (facts(standard_version="0.2"), "standard_version", "'0.3'"),
    "bad_surface": (facts(attacks=[_attack(surface="quantization")]), "attacks.0.surface", "relearning"),
    "bad_status": (facts(attacks=[_attack(status="done")]), "attacks.0.status", "run"),
    "utility_key_missing": (facts(utility={"removal_stage": 0.9}), "utility.attack_stage", "Field required"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_invalid_facts_name_field_and_requirement(name: str) -> None:
    data, loc, fragment = BAD[name]
    with pytest.raises(ValidationError) as info:
        VerdictFacts.model_validate(data)
    errors = info.value.errors()
    assert any(".".join(str(p) for p in e["loc"]) == loc and fragment in e["msg"] for e in errors), errors


def test_latent_defaults_to_non_adjudicating_and_round_trips() -> None:
    data = facts()
    data["attacks"].append({"name": "uds", "surface": "latent", "status": "run", "k": 5, "n": 10})
    model = VerdictFacts.model_validate(data)
    assert model.attacks[-1].adjudicating is False
    dumped = model.model_dump(mode="json", by_alias=True)
    assert dumped["class"] == "C" and "class_" not in dumped
    assert dumped["attacks"][-1]["adjudicating"] is False
    assert VerdictFacts.model_validate(json.loads(json.dumps(dumped))) == model


def test_populate_by_name_and_defaults() -> None:
    data = facts()
    data["class_"] = data.pop("class")
    model = VerdictFacts.model_validate(data)
    assert model.class_ == "C" and model.evidence_rule == "point" and model.chance_rate is None


def test_statement_example_facts_decide_removed() -> None:
    example = pytest.importorskip("remnant.statement.example")
    result = decide(VerdictFacts.model_validate(example.example_facts()))
    assert result.verdict == "removed" and result.decisive_attacks == ("repeated_sampling",)


# --- the result object ----------------------------------------------------------------------------------------


def test_to_json_has_exactly_the_design_keys() -> None:
    out = decide(VerdictFacts.model_validate(facts())).to_json()
    assert list(out) == ["verdict", "reasons", "g_star", "g_star_ci95", "decisive_attacks", "rule_ids"]
    assert out["g_star"] == pytest.approx(15 / 300)
    assert out["g_star_ci95"] == pytest.approx(list(wilson_interval(15, 300)))
    assert json.loads(json.dumps(out)) == out


def test_rule_ids_are_standard_ids() -> None:
    rules = pytest.importorskip("remnant.standard.rules")
    known = {str(r) for r in rules.Rule}
    for data in (facts(), facts(utility={"removal_stage": 0.5, "attack_stage": 0.99}), facts(attacks=[])):
        assert set(decide(VerdictFacts.model_validate(data)).rule_ids) <= known


def test_net_rate_shifts_point_and_bounds_and_floors() -> None:
    lo, hi = wilson_interval(80, 300)
    r = net_rate(80, 300, 0.25)
    assert (r.point, r.lower, r.upper) == pytest.approx((80 / 300 - 0.25, 0.0, hi - 0.25))
    assert lo - 0.25 < 0 < r.point  # the lower bound really was floored, the point was not
    zero = net_rate(30, 300, 0.25)
    assert (zero.point, zero.lower, zero.upper) == (0.0, 0.0, 0.0)
    assert net_rate(90, 300, None) == net_rate(90, 300, 0.0)


def test_chance_zero_equals_no_chance() -> None:
    a = decide(VerdictFacts.model_validate(facts(chance_rate=0.0)))
    b = decide(VerdictFacts.model_validate(facts()))
    assert (a.verdict, a.g_star, a.g_star_ci95, a.decisive_attacks) == (
        b.verdict,
        b.g_star,
        b.g_star_ci95,
        b.decisive_attacks,
    )


def test_decide_does_not_mutate_and_is_deterministic() -> None:
    model = VerdictFacts.model_validate(facts())
    before = model.model_dump()
    assert decide(model) == decide(model)
    assert model.model_dump() == before


def test_duplicate_required_attack_failed_blocks_even_if_another_ran() -> None:
    """Every admitted relearning arm is required under W-track: one diverged blocks removed (C1)."""
    data = facts()
    data["attacks"].append({"name": "relearning_lr2", "surface": "relearning", "status": "diverged"})
    result = decide(VerdictFacts.model_validate(data))
    assert result.verdict == "partial" and result.decisive_attacks == ("relearning_lr2",)


def test_q_track_does_not_require_relearning() -> None:
    data = facts(track="Q")
    data["attacks"] = data["attacks"][1:]
    assert verdict_of(data) == "removed"
    data["attacks"].append({"name": "relearning", "surface": "relearning", "status": "diverged"})
    assert verdict_of(data) == "removed"  # ignored on Q-track (R0.2, C2), so it cannot block


def test_class_d_does_not_need_cq1_but_needs_each_risk() -> None:
    d = {
        "standard_version": "0.3", "class": "D", "track": "Q", "gating_metric": "kappa", "tau": 0.1, "phi": 0.9,
        "utility": {"removal_stage": 0.95, "attack_stage": None},
        "insignificance": {"threshold": 0.05, "justification": "declared"},
        "attacks": [
            {"name": "s", "surface": "inference_time", "status": "run", "k": 0, "n": 500, "control_k": 0, "control_n": 500, "risk": "singling_out"},
            {"name": "l", "surface": "inference_time", "status": "run", "k": 1, "n": 500, "control_k": 0, "control_n": 500, "risk": "linkability"},
            {"name": "i", "surface": "inference_time", "status": "run", "k": 2, "n": 500, "control_k": 1, "control_n": 500, "risk": "inference"},
        ],
    }  # fmt: skip
    assert verdict_of(d) == "removed"
    d2 = copy.deepcopy(d)
    d2["attacks"][2]["risk"] = "linkability"
    result = decide(VerdictFacts.model_validate(d2))
    assert result.verdict == "partial" and any("inference ran" in r for r in result.reasons)
    d3 = copy.deepcopy(d)
    d3["attacks"][0]["control_k"] = d3["attacks"][0]["control_n"] = None
    result = decide(VerdictFacts.model_validate(d3))
    assert result.verdict == "removed" and "D4" in result.rule_ids


def test_class_d_hidden_compares_with_the_control_model_not_the_control_entities() -> None:
    """V1/V1a for a risk-tagged fact: control_k/n are the never-installed control entities (D4, D-5.1); hidden
    needs the never-modified control model's counts under the identical measurement (control_model_k/n)."""
    d = {
        "standard_version": "0.3", "class": "D", "track": "Q", "gating_metric": "kappa", "tau": 0.5, "phi": 0.5,
        "utility": {"removal_stage": 0.95, "attack_stage": None},
        "insignificance": {"threshold": 0.05, "justification": "declared"},
        "attacks": [
            {"name": "s", "surface": "inference_time", "status": "run", "k": 0, "n": 50, "control_k": 0, "control_n": 50, "risk": "singling_out"},
            {"name": "l", "surface": "inference_time", "status": "run", "k": 3, "n": 4, "control_k": 3, "control_n": 8, "risk": "linkability"},
            {"name": "i", "surface": "inference_time", "status": "run", "k": 0, "n": 50, "control_k": 0, "control_n": 50, "risk": "inference"},
        ],
    }  # fmt: skip
    # 3/4 reaches τ and the control entities' 3/8 is below it, but nothing says what the control model reached
    result = decide(VerdictFacts.model_validate(d))
    assert result.verdict == "partial" and "V1a" in result.rule_ids
    below = copy.deepcopy(d)
    below["attacks"][1].update(control_model_k=0, control_model_n=4)
    assert decide(VerdictFacts.model_validate(below)).verdict == "hidden"
    reached = copy.deepcopy(d)
    reached["attacks"][1].update(
        control_model_k=3, control_model_n=4
    )  # the never-modified model links as well
    result = decide(VerdictFacts.model_validate(reached))
    assert result.verdict == "partial" and "V1a" in result.rule_ids


# --- properties over random facts -----------------------------------------------------------------------------

SURFACES = ["relearning", "inference_time", "weight_transform", "latent"]
NAMES = [*CQ1_REQUIRED, "relearning", "gcg", "nf4", "uds"]


@st.composite
def random_facts(draw: st.DrawFn) -> dict[str, Any]:
    attacks = []
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=6))
    for name in names:
        surface = draw(st.sampled_from(SURFACES))
        status = draw(
            st.sampled_from(["run", "run", "run", "not_applicable", "not_run", "failed", "diverged"])
        )
        attack: dict[str, Any] = {"name": name, "surface": surface, "status": status}
        if surface == "latent" or (draw(st.booleans()) and draw(st.booleans())):
            attack["adjudicating"] = False  # latent must be; other arms sometimes are (C-W6)
        if status == "run":
            n = draw(st.integers(1, 400))
            attack.update(k=draw(st.integers(0, n)), n=n)
            if draw(st.integers(0, 4)):
                cn = draw(st.integers(1, 400))
                attack.update(control_k=draw(st.integers(0, cn)), control_n=cn)
        elif status == "not_applicable":
            attack["reason"] = "undefined for the format"
        attacks.append(attack)
    u = draw(st.one_of(st.none(), st.floats(0.0, 1.2)))
    return facts(
        track=draw(st.sampled_from(["W", "Q"])),
        tau=draw(st.floats(0.01, 1.0)),
        phi=draw(st.sampled_from([0.0, 0.5, 0.9, 1.0])),
        evidence_rule=draw(st.sampled_from(["point", "bounds"])),
        chance_rate=draw(st.one_of(st.none(), st.sampled_from([0.0, 0.25, 0.5]))),
        utility={"removal_stage": u, "attack_stage": draw(st.one_of(st.none(), st.floats(0.0, 1.2)))},
        attacks=attacks,
    )


def _admitted_runs(data: dict[str, Any]) -> list[dict[str, Any]]:
    ok = ("relearning", "inference_time", "weight_transform") if data["track"] == "W" else ("inference_time",)
    return [
        a
        for a in data["attacks"]
        if a["surface"] in ok and a.get("adjudicating", True) and a["status"] == "run"
    ]


@settings(max_examples=300, deadline=None)
@given(random_facts())
def test_verdict_invariants(data: dict[str, Any]) -> None:
    result = decide(VerdictFacts.model_validate(data))
    u, phi, tau = data["utility"]["removal_stage"], data["phi"], data["tau"]
    chance = data["chance_rate"]
    runs = _admitted_runs(data)
    # R13/V1: utility-collapsed exactly when removal-stage u < φ; attack-stage utility never matters.
    assert (result.verdict == "utility-collapsed") == (u is not None and u < phi)
    if u is None:
        assert result.verdict == "partial"
    # g* is the largest point rate over admitted attacks that ran.
    if runs:
        assert result.g_star == pytest.approx(max(net_rate(a["k"], a["n"], chance).point for a in runs))
    else:
        assert result.g_star is None and result.g_star_ci95 is None
    if result.verdict == "removed":  # R20: every admitted upper bound strictly below τ
        assert runs and all(net_rate(a["k"], a["n"], chance).upper < tau for a in runs)
        assert u is not None and u >= phi
    if result.verdict == "hidden":  # V1: one attack reaches τ with its control obtained and below τ
        assert any(
            net_rate(a["k"], a["n"], chance).point >= tau
            and a.get("control_k") is not None
            and net_rate(a["control_k"], a["control_n"], chance).point < tau
            for a in runs
        )
    assert set(result.decisive_attacks) <= {a["name"] for a in data["attacks"]}
    assert result.rule_ids[0] == "V1" and len(set(result.rule_ids)) == len(result.rule_ids)


@settings(max_examples=200, deadline=None)
@given(random_facts(), st.integers(0, 300), st.sampled_from(["latent", "arm", "q_relearning"]))
def test_non_adjudicating_attacks_never_move_the_verdict(data: dict[str, Any], k: int, kind: str) -> None:
    """C-H6 (latent), C-W6 (adjudicating: false) and R0.2/C2 (Q-track relearning): reported, never decide."""
    before = decide(VerdictFacts.model_validate(data))
    extra = {"name": "extra_arm", "status": "run", "k": k, "n": 300, "control_k": 0, "control_n": 300}
    if kind == "latent":
        extra["surface"] = "latent"
    elif kind == "arm":
        extra.update(surface="relearning", adjudicating=False)
    else:
        data = {**data, "track": "Q"}
        before = decide(VerdictFacts.model_validate(data))
        extra["surface"] = "relearning"
    after = decide(VerdictFacts.model_validate({**data, "attacks": [*data["attacks"], extra]}))
    assert (after.verdict, after.g_star, after.decisive_attacks) == (
        before.verdict,
        before.g_star,
        before.decisive_attacks,
    )


@settings(max_examples=200, deadline=None)
@given(random_facts())
def test_bounds_rule_hidden_implies_point_rule_hidden(data: dict[str, Any]) -> None:
    """Lower bound ≥ τ implies point ≥ τ; control upper < τ implies control point < τ."""
    bounds = decide(VerdictFacts.model_validate({**data, "evidence_rule": "bounds"}))
    point = decide(VerdictFacts.model_validate({**data, "evidence_rule": "point"}))
    if bounds.verdict == "hidden":
        assert point.verdict == "hidden"
    if point.verdict in ("removed", "utility-collapsed"):
        assert bounds.verdict == point.verdict  # those branches do not read the evidence rule


# --- the command ----------------------------------------------------------------------------------------------


def test_cli_prints_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts()))
    assert main(["verdict", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "removed" and out["rule_ids"][0] == "V1"


def test_cli_reads_facts_from_a_statement(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    example = pytest.importorskip("remnant.statement.example")
    path = tmp_path / "statement.json"
    path.write_text(json.dumps(example.example_statement().model_dump(mode="json", by_alias=True)))
    assert main(["verdict", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "removed"


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("{not json", "cannot read as JSON"),
        ("[1, 2]", "must be a JSON object"),
        (json.dumps(facts(tau=2)), "tau: Input should be less than or equal to 1"),
        (json.dumps(facts(attacks=[_attack(k=11)])), "attacks.0: attack 'x': k=11 exceeds n=10"),
    ],
)
def test_cli_bad_input_exit_2_names_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, fragment: str
) -> None:
    path = tmp_path / "facts.json"
    path.write_text(content)
    assert main(["verdict", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and fragment in err


def test_cli_missing_file_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verdict", str(tmp_path / "absent.json")]) == 2
    assert "absent.json" in capsys.readouterr().err
