"""A statement must agree with itself: facts, cells, surfaces, utility, tier and Class D block (V1, R22, R19, R4,
R11–R13, C1, C-Q1, §7.1, D-5.1, C-W6).

Each spoof edits the Annex D.2 example (or a statement built like an assessment's, with checkpoint and utility
cells) the way a hand-made statement would claim more than its evidence, and must come back non-conformant
naming the rule. Before ``remnant.statement.agreement`` every spoof below passed: the validator recomputed the
verdict from ``facts`` alone.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from remnant.cli import main
from remnant.demo_vectors import PACKAGED_VECTORS
from remnant.standard.derive import best_relearning_point, utility_stages
from remnant.statement.build import build_statement
from remnant.statement.derived import place
from remnant.statement.example import example_facts, example_statement
from remnant.statement.schema import Cell, Deviation, Verification
from remnant.statement.validate import validate_statement
from remnant.stats import wilson_interval

Spoof = Callable[[dict[str, Any]], None]


def example() -> dict[str, Any]:
    return example_statement().model_dump(mode="json", by_alias=True)


def cell(d: dict[str, Any], cell_id: str) -> dict[str, Any]:
    return next(c for c in d["cells"] if c["cell_id"] == cell_id)


def recount(c: dict[str, Any], k: int, n: int | None = None) -> None:
    """Set a cell's k (and n) with a rate and interval that agree with it, as a careful forger would (R19)."""
    n = c["n"] if n is None else n
    c.update(k=k, n=n, rate=k / n, ci95=list(wilson_interval(k, n)))


def requirements(d: dict[str, Any]) -> set[str]:
    report = validate_statement(d)
    assert not report.conformant
    return {v.requirement for v in report.violations}


def build(facts: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    base = example_statement()
    statement = build_statement(
        facts,
        claim=base.claim,
        model=base.model,
        prereg=kwargs.pop("prereg", base.pre_registration).model_copy(update={"tau": facts["tau"]}),
        pack=base.pack,
        assessor=base.assessor,
        manifest_ref=base.manifest_ref,
        assessed_on=base.assessment_date,
        versions=base.versions,
        target="pack example-c",
        **kwargs,
    )
    return statement.model_dump(mode="json", by_alias=True)


# ---- (a)–(e) of the brief, and their neighbours, on the Annex D.2 example -------------------------------------


def _relearning_recovered(d: dict[str, Any]) -> None:  # (a) a cell reads 200/300 > τ; facts still say removed
    recount(cell(d, "relearning/relearning/post_removal"), 200)


def _relearning_recovered_rate_left(d: dict[str, Any]) -> None:  # (a) k edited, rate and interval left
    cell(d, "relearning/relearning/post_removal")["k"] = 200


def _control_recovered(d: dict[str, Any]) -> None:
    recount(cell(d, "relearning/relearning/control"), 250)


def _utility_block_below_phi(d: dict[str, Any]) -> None:  # (b)
    d["utility"]["removal_stage"] = 0.5


def _attack_stage_block(d: dict[str, Any]) -> None:
    d["utility"]["attack_stage"] = 0.2


def _prefill_deleted(d: dict[str, Any]) -> None:  # (c) a C-Q1 attack's cells and fact gone
    d["cells"] = [c for c in d["cells"] if not c["cell_id"].startswith("prefill/")]
    d["facts"]["attacks"] = [a for a in d["facts"]["attacks"] if a["name"] != "prefill"]


def _relearning_deleted(d: dict[str, Any]) -> None:  # (c) the C1 surface's cells and entry gone
    d["cells"] = [c for c in d["cells"] if not c["cell_id"].startswith("relearning/")]
    del d["surfaces"]["relearning"]


def _inference_surface_deleted(d: dict[str, Any]) -> None:
    del d["surfaces"]["inference_time"]


def _verdict_and_facts_hidden(d: dict[str, Any]) -> None:  # (d) verdict and facts agree; the cells do not
    d["facts"]["attacks"][0].update(k=250)
    d["verdict"] = "hidden"
    d["verdict_scope"] = d["verdict_scope"].replace("removed", "hidden", 1)
    d["instrument"], d["tier"] = ["verdict"], {"absent": True, "reason": "verdict only"}


def _g_star(d: dict[str, Any]) -> None:  # (e) g* alone
    d["surfaces"]["inference_time"]["g_star"] = 0.01


def _g_star_and_its_cells(d: dict[str, Any]) -> None:
    """(e) g* lowered to prefill's, with its interval, and the decisive cell left off the surface's list."""
    prefill = cell(d, "prefill/inference_time/post_removal")
    surface = d["surfaces"]["inference_time"]
    surface.update(g_star=prefill["rate"], ci95=prefill["ci95"], decisive_attack="prefill")
    surface["cells"] = [c for c in surface["cells"] if not c.startswith("repeated_sampling/")]


def _g_star_interval(d: dict[str, Any]) -> None:  # (e)
    d["surfaces"]["relearning"]["ci95"] = [0.0, 0.2]


def _g_star_n(d: dict[str, Any]) -> None:
    d["surfaces"]["relearning"]["n"] = 3000


def _decisive_attack(d: dict[str, Any]) -> None:
    d["surfaces"]["inference_time"]["decisive_attack"] = "prefill"


def _control_g(d: dict[str, Any]) -> None:
    d["surfaces"]["relearning"]["control_g"] = 0.0


def _status_failed_cells_left(d: dict[str, Any]) -> None:
    d["facts"]["attacks"][1].update(
        status="failed", reason="crashed", k=None, n=None, control_k=None, control_n=None
    )


def _cell_without_attack(d: dict[str, Any]) -> None:
    d["cells"].append(
        {**cell(d, "prefill/inference_time/post_removal"), "cell_id": "gcg/inference_time/post_removal"}
    )
    d["cells"][-1]["attack"] = "gcg"
    recount(d["cells"][-1], 280)


def _cell_id_names_another(d: dict[str, Any]) -> None:
    cell(d, "many_shot/inference_time/post_removal")["attack"] = "prefill_v2"


def _phi_changed(d: dict[str, Any]) -> None:
    d["facts"]["phi"] = 0.5


def _gating_changed(d: dict[str, Any]) -> None:
    d["facts"]["gating_metric"] = "w"


def _arm_set_aside(d: dict[str, Any]) -> None:
    d["facts"]["attacks"][3]["adjudicating"] = False


SPOOFS: dict[str, tuple[str, Spoof]] = {
    "a_cell_above_tau": ("V1", _relearning_recovered),
    "a_cell_above_tau_counts_differ": ("R22", _relearning_recovered),
    "a_cell_k_only": ("R19", _relearning_recovered_rate_left),
    "a_cell_k_only_verdict": ("V1", _relearning_recovered_rate_left),
    "control_cell": ("R22", _control_recovered),
    "control_cell_surface": ("R4", _control_recovered),
    "b_utility_block_below_phi": ("R13", _utility_block_below_phi),
    "attack_stage_block": ("R12", _attack_stage_block),
    "c_prefill_deleted": ("C-Q1", _prefill_deleted),
    "c_relearning_deleted": ("C1", _relearning_deleted),
    "c_inference_surface_deleted": ("C-Q1", _inference_surface_deleted),
    "d_verdict_and_facts_moved": ("V1", _verdict_and_facts_hidden),
    "d_facts_not_cells": ("R22", _verdict_and_facts_hidden),
    "e_g_star": ("R22", _g_star),
    "e_g_star_and_its_cells": ("R22", _g_star_and_its_cells),
    "e_g_star_interval": ("R19", _g_star_interval),
    "g_star_n": ("R19", _g_star_n),
    "decisive_attack": ("R22", _decisive_attack),
    "control_g": ("R4", _control_g),
    "status_failed_cells_left": ("R22", _status_failed_cells_left),
    "cell_without_attack": ("R22", _cell_without_attack),
    "cell_without_attack_verdict": ("V1", _cell_without_attack),
    "cell_id_names_another": ("R22", _cell_id_names_another),
    "phi_not_registered": ("V1", _phi_changed),
    "gating_not_registered": ("V1", _gating_changed),
    "required_arm_set_aside": ("C-W6", _arm_set_aside),
}


@pytest.mark.parametrize("name", sorted(SPOOFS))
def test_spoofed_example_is_not_conformant(name: str) -> None:
    rule, spoof = SPOOFS[name]
    d = example()
    spoof(d)
    assert rule in requirements(d)


def test_spoofs_pass_the_facts_alone() -> None:
    """The spoofs that leave facts and verdict consistent: decide() on the facts alone still gives the stated
    verdict, so only the cross-checks can catch them."""
    from remnant.standard.facts import VerdictFacts
    from remnant.standard.verdict import decide

    for name in ("a_cell_above_tau", "b_utility_block_below_phi", "d_verdict_and_facts_moved", "e_g_star"):
        d = example()
        SPOOFS[name][1](d)
        assert decide(VerdictFacts.model_validate(d["facts"])).verdict == d["verdict"], name


def test_one_defect_one_family_of_violations() -> None:
    """A surface figure edited alone names its own rule and nothing else."""
    for name, only in (("e_g_star", {"R22"}), ("e_g_star_interval", {"R19"}), ("control_g", {"R4"})):
        d = example()
        SPOOFS[name][1](d)
        assert requirements(d) == only, name


# ---- registered values, tier ceiling ------------------------------------------------------------------------


def test_a_recorded_deviation_moves_the_registered_value() -> None:
    """R15: φ changed by a recorded deviation is the φ in effect; the same change unrecorded is a V1 violation."""
    d = example()
    d["facts"]["phi"] = 0.95
    assert "V1" in requirements(d)
    d["deviations"] = [
        Deviation(
            field="utility.phi", old=0.9, new=0.95, reason="customer asked", stage="before attacks"
        ).model_dump()
    ]
    report = validate_statement(d)
    assert report.conformant, report.violations


def _verified_w4(facts: dict[str, Any]) -> dict[str, Any]:
    verified = Verification(verifier="V", accredited=True, verified_on=dt.date(2026, 6, 2), record_ref="x")
    return build(facts, tier="W4", verification=verified)


def test_tier_above_a_hidden_verdict() -> None:
    """§7.1: W4 on a hidden run; the first Tier 4 criterion it misses is the bar (R20: relearning's bound ≥ τ)."""
    facts = copy.deepcopy(example_facts())
    facts["attacks"][0].update(k=250)
    d = _verified_w4(facts)
    assert d["verdict"] == "hidden"
    tier = [v for v in validate_statement(d).violations if "tier" in v.message]
    assert [v.requirement for v in tier] == ["R20"] and "(W3)" in tier[0].message


def test_tier_above_a_collapsed_verdict() -> None:
    """§7.1, V1: every bound below τ, but utility below φ: W4 needs a removed verdict on that run."""
    facts = copy.deepcopy(example_facts())
    facts["utility"]["removal_stage"] = 0.5
    d = _verified_w4(facts)
    assert d["verdict"] == "utility-collapsed"
    assert requirements(d) == {"V1"}
    assert "needs a removed verdict" in validate_statement(d).violations[0].message


def test_tier_above_what_n_supports() -> None:
    """R21: Tier 2 needs n ≥ 30 per cell; a W3 on n = 20 is above the ladder's ceiling (W1)."""
    facts = copy.deepcopy(example_facts())
    for attack in facts["attacks"]:
        attack.update(k=0, n=20, control_k=0, control_n=20)
    d = build(facts, tier="W3")
    assert requirements(d) == {"R21"}
    assert validate_statement(build(facts, tier="W1")).conformant


# ---- statements with checkpoint and utility cells, as an assessment writes them ------------------------------


def _cell(cell_id: str, state: str, attack: str, surface: str, metric: str, k: int, n: int) -> Cell:
    lo, hi = wilson_interval(k, n)
    return Cell(
        cell_id=cell_id,
        model_state=state,
        attack=attack,
        surface=surface,
        metric=metric,
        k=k,
        n=n,
        rate=k / n,
        ci95=(lo, hi),
    )


#: relearning checkpoints (budget, step) → (post k, control k) on n = 300: the post maximum 12 is tied at two
#: points, and the rule takes the one whose control is lower (C-W5): (8, 2) with control 3.
CHECKPOINTS = {(4, 0): (5, 5), (4, 2): (12, 9), (8, 2): (12, 3), (8, 4): (7, 2)}
UTILITY = {("none", "removal_stage", "post_removal"): 45, ("none", "removal_stage", "pre_removal"): 50,
           ("none", "removal_stage", "control"): 50, ("relearning", "budget=4/final", "post_removal"): 44,
           ("relearning", "budget=8/final", "post_removal"): 36}  # fmt: skip


def _assessment_like() -> dict[str, Any]:
    """The D.2 facts with relearning read from checkpoint cells, prefill from final cells, and utility cells."""
    facts = copy.deepcopy(example_facts())
    facts["attacks"][0].update(k=12, control_k=3)
    values = {(a, cp, st, "retain_kappa"): k / 50 for (a, cp, st), k in UTILITY.items()}
    facts["utility"] = utility_stages(values, ["retain_kappa"])
    extra = []
    for (budget, step), (post, control) in CHECKPOINTS.items():
        for state, k in (("post_removal", post), ("control", control)):
            cid = f"relearning/relearning/{state}/kappa@budget={budget}/step={step}"
            extra.append(_cell(cid, state, "relearning", "relearning", "kappa", k, 300))
    for state, k in (("post_removal", 12), ("control", 10), ("pre_removal", 200)):
        extra.append(
            _cell(
                f"prefill/inference_time/{state}/kappa@final",
                state,
                "prefill",
                "inference_time",
                "kappa",
                k,
                300,
            )
        )
    for (attack, checkpoint, state), k in UTILITY.items():
        cid = f"{attack}/utility/{state}/retain_kappa@{checkpoint}"
        extra.append(_cell(cid, state, attack, "utility", "utility", k, 50))
    prereg = example_statement().pre_registration.model_copy(update={"utility_metric": "retain_kappa"})
    return build(facts, prereg=prereg, extra_cells=extra)


def test_assessment_like_statement_is_conformant() -> None:
    d = _assessment_like()
    assert d["facts"]["utility"]["removal_stage"] == pytest.approx(0.9)
    assert d["facts"]["utility"]["attack_stage"] == pytest.approx(36 / 45)
    report = validate_statement(d)
    assert report.conformant, report.violations


def test_relearning_fact_is_the_checkpoint_the_rule_picks() -> None:
    """C-W3/C-W5: the primary relearning cell must be the checkpoint best_relearning_point picks; the tied point
    with the higher control (4, 2) is not it."""
    d = _assessment_like()
    d["facts"]["attacks"][0]["control_k"] = 9
    recount(cell(d, "relearning/relearning/control"), 9)
    d["surfaces"]["relearning"].update(control_g=9 / 300, control_ci95=list(wilson_interval(9, 300)))
    assert "R4" in requirements(d)


def test_a_checkpoint_cell_above_tau_is_read() -> None:
    """Primary cell and facts left at 12/300; a checkpoint cell shows 240/300: the cells' reading is hidden."""
    d = _assessment_like()
    recount(cell(d, "relearning/relearning/post_removal/kappa@budget=8/step=4"), 240)
    assert {"R22", "V1"} <= requirements(d)


def test_a_final_reading_disagreeing_with_its_primary_cell() -> None:
    d = _assessment_like()
    recount(cell(d, "prefill/inference_time/post_removal/kappa@final"), 13)
    assert "R22" in requirements(d)


def test_utility_facts_are_the_utility_cells() -> None:
    """R11: facts and block moved together to 0.97 while the cells give 0.9."""
    d = _assessment_like()
    d["facts"]["utility"]["removal_stage"] = 0.97
    d["utility"]["removal_stage"] = 0.97
    assert requirements(d) == {"R11"}


def test_a_utility_cell_below_phi() -> None:
    """R11 and V1: the post-removal utility cell edited to 20/50 (u = 0.4 < φ), facts and block left at 0.9."""
    d = _assessment_like()
    recount(cell(d, "none/utility/post_removal/retain_kappa@removal_stage"), 20)
    assert {"R11", "V1"} <= requirements(d)


def test_attack_stage_from_the_largest_budget() -> None:
    """R12: attack-stage u is read at the largest budget relearned (8), not at 4."""
    d = _assessment_like()
    d["facts"]["utility"]["attack_stage"] = d["utility"]["attack_stage"] = 44 / 45
    assert requirements(d) == {"R12"}


def test_a_zero_pre_removal_utility_is_undefined_and_agrees(monkeypatch: pytest.MonkeyPatch) -> None:
    """R11: the pre-removal utility cell reads 0/50, so the facts name the metric as undefined (not unmeasured),
    the verdict is partial and the statement is conformant."""
    monkeypatch.setitem(UTILITY, ("none", "removal_stage", "pre_removal"), 0)
    d = _assessment_like()
    assert d["facts"]["utility"]["removal_stage_undefined"] == ["retain_kappa"]
    assert d["verdict"] == "partial" and "undefined" in d["utility"]["removal_stage"]["reason"]
    report = validate_statement(d)
    assert report.conformant, report.violations


def _undefined_violations(d: dict[str, Any]) -> list[str]:
    return [v.message for v in validate_statement(d).violations if "removal_stage_undefined" in v.message]


def test_utility_called_undefined_against_its_cells() -> None:
    """R11: facts claim a zero reference the cells do not show (they give 0.9)."""
    d = _assessment_like()
    d["facts"]["utility"].update(removal_stage=None, removal_stage_undefined=["retain_kappa"])
    d["utility"]["removal_stage"] = {"absent": True, "reason": "removal-stage utility undefined"}
    assert "R11" in requirements(d)
    assert _undefined_violations(d)


def test_a_zero_reference_passed_off_as_not_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    """R11: the cells show a zero pre-removal utility; the facts drop the key to read as not measured."""
    monkeypatch.setitem(UTILITY, ("none", "removal_stage", "pre_removal"), 0)
    d = _assessment_like()
    del d["facts"]["utility"]["removal_stage_undefined"]
    assert "R11" in requirements(d)
    assert _undefined_violations(d)


# ---- Class D -------------------------------------------------------------------------------------------------


def _class_d() -> dict[str, Any]:
    from remnant.statement.classd_bar import bar_from_facts

    vector = PACKAGED_VECTORS / "d3_class_d_removed.json"
    facts: dict[str, Any] = json.loads(vector.read_text(encoding="utf-8"))["facts"]
    facts["installation"] = example_facts()["installation"]  # R2: removed needs the target fixed
    return build(facts, class_d=bar_from_facts(facts).statement_block({"probe_entities": 500}))


def test_class_d_block_agrees() -> None:
    report = validate_statement(_class_d())
    assert report.conformant, report.violations


def test_class_d_block_names_another_measurement() -> None:
    d = _class_d()
    d["class_d"]["inference"]["measurement"] = "relearning"
    assert requirements(d) == {"D-5.1"}


def test_class_d_entities_cell_edited() -> None:
    """D4: the control-entity cell is where control_k comes from; edited, the facts no longer match it."""
    d = _class_d()
    recount(cell(d, "inference/inference_time/post_removal/control_entities"), 2)
    assert "R22" in requirements(d)


# ---- the shared reading rules and the cell places -------------------------------------------------------------


def test_best_relearning_point_breaks_ties_on_the_control() -> None:
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class P:
        budget: int
        step: int
        k: int
        n: int

    post = [P(b, s, k, 300) for (b, s), (k, _) in CHECKPOINTS.items()]
    control = {(b, s): P(b, s, c, 300) for (b, s), (_, c) in CHECKPOINTS.items()}
    best = best_relearning_point(list(reversed(post)), control)
    assert best is not None and (best.budget, best.step) == (8, 2)
    assert best_relearning_point([P(4, 1, 0, 6), P(4, 0, 0, 6)], {}) == P(4, 0, 0, 6)
    assert best_relearning_point([], {}) is None


def test_utility_stages_need_every_metric() -> None:
    values = {
        ("none", "removal_stage", "post_removal", "a"): 0.5,
        ("none", "removal_stage", "pre_removal", "a"): 0.0,
    }
    assert (
        utility_stages(values, ["a"])["removal_stage"] is None
    )  # zero reference: the ratio says nothing (R11)
    values[("none", "removal_stage", "pre_removal", "a")] = 1.0
    assert utility_stages(values, ["a"])["removal_stage"] == 0.5
    assert utility_stages(values, ["a", "b"])["removal_stage"] is None


def test_cell_places() -> None:
    d = _assessment_like()
    kinds = {c.cell_id: place(c) for c in (Cell.model_validate(x) for x in d["cells"])}
    relearned = kinds["relearning/utility/post_removal/retain_kappa@budget=8/final"]
    assert relearned is not None and (relearned.label, relearned.checkpoint) == (
        "retain_kappa",
        "budget=8/final",
    )
    assert kinds["relearning/relearning/post_removal"] is not None
    assert kinds["relearning/relearning/post_removal"].kind == "primary"
    odd = Cell.model_validate({**d["cells"][0], "cell_id": "x/relearning/post_removal"})
    assert place(odd) is None


# ---- remnant sign refuses what does not validate ---------------------------------------------------------------


def test_sign_refuses_a_spoofed_statement(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "generate", "--out", str(tmp_path / "keys")]) == 0
    d = example()
    _relearning_recovered(d)
    path = tmp_path / "statement.json"
    path.write_text(json.dumps(d), encoding="utf-8")
    capsys.readouterr()
    assert main(["sign", str(path), "--key", str(tmp_path / "keys" / "remnant.key")]) == 1
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert str(path) in err and "R22" in err and "not conformant" in err
    assert not (tmp_path / "statement.dsse.json").exists()
    path.write_text(json.dumps(example()), encoding="utf-8")
    assert main(["sign", str(path), "--key", str(tmp_path / "keys" / "remnant.key")]) == 0
    assert (tmp_path / "statement.dsse.json").is_file()
