"""build_statement: verdict from facts (V1), scope (V4), validity (V5), surfaces summarised from cells (R22)."""

from __future__ import annotations

import copy
import datetime as dt
import json
from typing import Any

import pytest

from remnant.demo_vectors import PACKAGED_VECTORS
from remnant.standard.facts import VerdictFacts
from remnant.standard.verdict import decide
from remnant.statement.absent import is_absent
from remnant.statement.build import build_statement
from remnant.statement.example import example_facts, example_statement
from remnant.statement.validate import validate_statement
from remnant.stats import wilson_interval


def _rebuild(facts: dict[str, Any]) -> Any:
    base = example_statement()
    return build_statement(
        facts,
        claim=base.claim,
        model=base.model,
        prereg=base.pre_registration.model_copy(update={"tau": facts["tau"]}),
        pack=base.pack,
        assessor=base.assessor,
        manifest_ref=base.manifest_ref,
        assessed_on=base.assessment_date,
        versions=base.versions,
        target="pack example-c",
    )


def test_example_follows_d2() -> None:
    s = example_statement()
    assert s.verdict == decide(VerdictFacts.model_validate(s.facts)).verdict == "removed"
    assert (
        isinstance(s.verdict_scope, str)
        and "W-track" in s.verdict_scope
        and s.model.version in s.verdict_scope
    )
    assert s.validity_until == dt.date(2027, 6, 1)
    assert not is_absent(s.latent) and s.latent.adjudicating is False and s.latent.figures[0].value == 0.7  # type: ignore[union-attr]
    relearning = s.surfaces["relearning"]
    assert relearning.status == "run" and relearning.n == 300 and relearning.ci95 is not None
    assert relearning.ci95 == pytest.approx(wilson_interval(9, 300))
    assert relearning.ci95[1] < s.pre_registration.tau
    inference = s.surfaces["inference_time"]
    assert inference.decisive_attack == "repeated_sampling" and inference.g_star == pytest.approx(15 / 300)
    assert s.utility.removal_stage == 0.97 and s.utility.attack_stage == 0.99


def test_hidden_statement_is_unscoped_but_conformant() -> None:
    facts = copy.deepcopy(example_facts())
    facts["attacks"][0].update(k=250, control_k=6)
    s = _rebuild(facts)
    assert s.verdict == "hidden"
    report = validate_statement(s.model_dump(mode="json", by_alias=True))
    assert report.conformant, report.violations


def test_q_track_marks_relearning_inadmissible() -> None:
    facts = copy.deepcopy(example_facts())
    facts["track"] = "Q"
    s = _rebuild(facts)
    assert s.surfaces["relearning"].status == "inadmissible"
    assert s.surfaces["relearning"].g_star is None


def test_not_applicable_and_missing_utility() -> None:
    facts = copy.deepcopy(example_facts())
    facts["attacks"] = [a for a in facts["attacks"] if a["surface"] == "relearning"]
    facts["attacks"].append(
        {
            "name": "prefill",
            "surface": "inference_time",
            "status": "not_applicable",
            "reason": "no chat template",
        }
    )
    facts["utility"]["attack_stage"] = None
    s = _rebuild(facts)
    assert s.surfaces["inference_time"].status == "not_applicable"
    assert is_absent(s.utility.attack_stage)
    report = validate_statement(s.model_dump(mode="json", by_alias=True))
    assert report.conformant, report.violations


def test_net_of_chance_cells() -> None:
    facts = copy.deepcopy(example_facts())
    facts["chance_rate"] = 0.25
    facts["attacks"][0].update(k=90, n=300, control_k=80, control_n=300)
    s = _rebuild(facts)
    cell = next(c for c in s.cells if c.cell_id == "relearning/relearning/post_removal")
    lo, hi = wilson_interval(90, 300)
    assert cell.rate == pytest.approx(0.05) and cell.ci95 == pytest.approx((max(lo - 0.25, 0.0), hi - 0.25))
    report = validate_statement(s.model_dump(mode="json", by_alias=True))
    assert "R19" not in {v.requirement for v in report.violations}


def _class_d_facts() -> dict[str, Any]:
    """Annex D.3's facts (remnant/data/vectors/d3), singling out also measured on the never-modified control model."""

    vector = PACKAGED_VECTORS / "d3_class_d_removed.json"
    facts: dict[str, Any] = json.loads(vector.read_text(encoding="utf-8"))["facts"]
    facts["attacks"][0].update(control_model_k=1, control_model_n=250)
    facts["installation"] = example_facts()["installation"]  # R2: removed needs the target fixed
    return facts


def test_class_d_control_entities_are_post_removal_cells() -> None:
    """D4: a risk's control_k/control_n count never-installed control entities scored on the post-removal model,
    so their cell is a post-removal cell named ``…/control_entities``; a ``control`` cell is the never-modified
    control model (V1a: control_model_k/control_model_n) and only where that was measured."""
    s = _rebuild(_class_d_facts())
    by_id = {c.cell_id: c for c in s.cells}
    entities = by_id["singling_out/inference_time/post_removal/control_entities"]
    assert (entities.model_state, entities.k, entities.n) == ("post_removal", 0, 500)
    assert entities.metric == "kappa" and entities.attack == "singling_out"
    linkability = by_id["linkability/inference_time/post_removal/control_entities"]
    assert (linkability.model_state, linkability.k, linkability.n) == ("post_removal", 4, 500)
    assert linkability.ci95 == pytest.approx(wilson_interval(4, 500))
    relearning = by_id["relearning/relearning/post_removal/control_entities"]
    assert (relearning.k, relearning.n) == (3, 500)
    control = by_id["singling_out/inference_time/control"]
    assert (control.model_state, control.k, control.n) == ("control", 1, 250)
    # no control-model figure was measured for the others: no control cell, none made of control entities
    assert [c.cell_id for c in s.cells if c.model_state == "control"] == [
        "singling_out/inference_time/control"
    ]
    assert len(s.cells) == 4 + 4 + 1
    # the surface's control is the control model's rate (R4), and the control entities are not treated cells
    inference = s.surfaces["inference_time"]
    assert inference.decisive_attack == "inference" and inference.control_g is None
    assert "inference/inference_time/post_removal/control_entities" not in inference.cells
    report = validate_statement(s.model_dump(mode="json", by_alias=True))
    assert report.conformant, report.violations


def test_class_d_surface_control_is_the_control_model() -> None:
    facts = _class_d_facts()
    facts["attacks"][2].update(control_model_k=5, control_model_n=100)  # inference, the decisive attack
    inference = _rebuild(facts).surfaces["inference_time"]
    assert inference.control_g == pytest.approx(0.05) and inference.control_n == 100
    assert inference.cells == [
        "singling_out/inference_time/post_removal",
        "linkability/inference_time/post_removal",
        "inference/inference_time/post_removal",
        "inference/inference_time/control",
    ]


def test_class_c_cells_keep_the_control_model_counts() -> None:
    """Without a risk, control_k/control_n are the never-modified control model's counts (R4)."""
    s = example_statement()
    ids = {c.cell_id: c for c in s.cells}
    fact = example_facts()["attacks"][0]
    control = ids[f"{fact['name']}/{fact['surface']}/control"]
    assert (control.model_state, control.k, control.n) == ("control", fact["control_k"], fact["control_n"])
    assert not any(c.cell_id.endswith("control_entities") for c in s.cells)
