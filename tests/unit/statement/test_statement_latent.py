"""The statement's latent block from reading records, and what `remnant validate` checks of it (C-H6, C-H7a-c).

A block rebuilt from readings names each figure's reference, states, layer and position (C-H7b), lists the control
figures of a measurement read on both Annex B control states and names every other one in the not-run statement
(C-H7c), says why a state gave no figure, and is labelled non-adjudicating (C-H7a). The validator flags each
defect with exactly its clause, on the Annex D.2 example statement with one defect each.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from remnant.records import Reading
from remnant.statement.example import example_statement
from remnant.statement.latent import LABEL, NOT_RUN, block_from_readings
from remnant.statement.validate import validate_statement


def reading(state: str, role: str, value: float | None = 0.5, **kw: Any) -> Reading:
    fields: dict[str, Any] = {
        "run_id": "r",
        "cell_key": f"key-{kw.get('audit', 'uds')}-{state}",
        "measurement": "uds",
        "audit": "uds",
        "component": {"name": "uds", "version": "1.0", "params": {}},
        "model_state": state,
        "role": role,
        "states": [state, "pre_removal", "control"],
        "reference": "full model pre_removal aaaa; retain model control bbbb",
        "layer": "blocks 0-1",
        "position": "entity span",
        "value": value,
        "reason": None if value is not None else "no example scored",
    }
    fields.update(kw)
    return Reading(**fields)


def jaccess(state: str, role: str, value: float | None = 0.25, **kw: Any) -> Reading:
    return reading(state, role, value, audit="jaccess", measurement="j_access", layer="band [0]", **kw)


def test_block_lists_control_figures_and_names_the_measurement_without_them() -> None:
    block = block_from_readings(
        [
            reading("post_removal", "removed", 0.42),
            jaccess("post_removal", "removed", 0.5),
            jaccess("procedure_control", "procedure_control", 0.1),
            jaccess("content_control", "content_control", 0.9),
        ]
    )
    assert block is not None and block.adjudicating is False and block.status == "supplementary"
    assert [(f.name, f.states[0], f.value) for f in block.figures] == [
        ("uds", "post_removal", 0.42),
        ("j_access", "post_removal", 0.5),
        ("j_access", "procedure_control", 0.1),
        ("j_access", "content_control", 0.9),
    ]
    text = block.controls_statement
    assert "J-Access (j_access) control figures: procedure_control band [0]/entity span: 0.100; " in text
    assert "content_control band [0]/entity span: 0.900." in text
    assert NOT_RUN.format(names="UDS (uds)", these="its") in text and text.endswith(LABEL)
    assert block.controls_run is False  # one measurement lacks them
    assert validate_statement(_with(block.model_dump(mode="json"))).conformant


def test_controls_run_only_when_every_measurement_has_both_states() -> None:
    both = [
        jaccess("post_removal", "removed"),
        jaccess("procedure_control", "procedure_control"),
        jaccess("content_control", "content_control"),
    ]
    block = block_from_readings(both)
    assert block is not None and block.controls_run and "were not run" not in block.controls_statement
    # a control state whose audit failed does not count: the not-run statement names the measurement again
    failed = jaccess("content_control", "content_control", None, status="failed", reason="RuntimeError: boom")
    block = block_from_readings([*both[:2], failed])
    assert block is not None and not block.controls_run
    assert "were not run for J-Access (j_access)" in block.controls_statement
    assert "J-Access (j_access) on content_control (content_control) failed: RuntimeError: boom." in (
        block.controls_statement
    )
    assert [f.states[0] for f in block.figures] == ["post_removal", "procedure_control"]


def test_states_without_a_figure_are_said_and_duplicates_count_once() -> None:
    undefined = reading("post_removal", "removed", None, reason="no example scored (4 with no KE layer)")
    not_run = jaccess(
        "procedure_control",
        "procedure_control",
        None,
        status="not_run",
        reason="the state could not be built",
    )
    block = block_from_readings([undefined, jaccess("post_removal", "removed"), not_run])
    assert block is not None and [f.name for f in block.figures] == ["j_access"]
    text = block.controls_statement
    assert (
        "UDS (uds) on post_removal (removed) gave no figure: no example scored (4 with no KE layer)." in text
    )
    assert (
        "J-Access (j_access) on procedure_control (procedure_control) was not run: the state could not"
        in text
    )
    twice = block_from_readings([reading("post_removal", "removed"), reading("post_removal", "removed", 0.9)])
    assert twice is not None and [f.value for f in twice.figures] == [0.5]  # a re-run cell: the first copy
    assert block_from_readings([]) is None
    nothing = block_from_readings([undefined])
    assert (
        nothing is not None
        and nothing.figures == []
        and "No latent figure was produced." in (nothing.controls_statement)
    )


def test_a_reading_carries_no_verdict_weight_and_explains_a_missing_figure() -> None:
    with pytest.raises(ValueError, match="says why"):
        reading("post_removal", "removed", None, reason=None)
    with pytest.raises(ValueError, match="carries no value"):
        reading("post_removal", "removed", 0.3, status="failed", reason="x")
    with pytest.raises(ValueError):
        reading("post_removal", "removed", adjudicating=True)  # C-H6: never


def _with(latent: Any) -> dict[str, Any]:
    data = example_statement().model_dump(mode="json", by_alias=True)
    data["latent"] = copy.deepcopy(latent)
    return data


def _example_latent() -> dict[str, Any]:
    latent = example_statement().model_dump(mode="json", by_alias=True)["latent"]
    assert isinstance(latent, dict)
    return latent


def _mutated(edit: Any) -> dict[str, Any]:
    latent = _example_latent()
    edit(latent)
    return _with(latent)


CASES = {
    "figure without a reference": ("C-H7(b)", lambda d: d["figures"][0].update(reference="  ")),
    "figure without states": ("C-H7(b)", lambda d: d["figures"][0].update(states=[])),
    "figure without a layer": ("C-H7(b)", lambda d: d["figures"][0].pop("layer")),
    "figure without a position": ("C-H7(b)", lambda d: d["figures"][0].update(position="")),
    "block not labelled supplementary": ("C-H7(a)", lambda d: d.update(status="adjudicating")),
    "statement without the label": (
        "C-H7(a)",
        lambda d: d.update(controls_statement=NOT_RUN.format(names="direction survival", these="its")),
    ),
    "not-run statement names another measurement": (
        "C-H7(c)",
        lambda d: d.update(controls_statement=NOT_RUN.format(names="UDS", these="its") + " " + LABEL),
    ),
    "no not-run statement at all": ("C-H7(c)", lambda d: d.update(controls_statement="Fine. " + LABEL)),
    "controls said run without control figures": ("C-H7(c)", lambda d: d.update(controls_run=True)),
    "adjudicating": ("C-H6", lambda d: d.update(adjudicating=True)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_defect_is_flagged_with_exactly_its_clause(name: str) -> None:
    requirement, edit = CASES[name]
    report = validate_statement(_mutated(edit))
    assert {v.requirement for v in report.violations} == {requirement}, report.violations


def test_the_example_and_a_block_with_both_controls_are_conformant() -> None:
    assert validate_statement(_with(_example_latent())).conformant

    def controls(d: dict[str, Any]) -> None:
        base = d["figures"][0]
        d["figures"] += [
            {**base, "states": [role, *base["states"][1:]], "value": 0.8}
            for role in ("procedure_control", "content_control")
        ]
        d.update(controls_run=True, controls_statement="direction survival control figures: ... " + LABEL)

    assert validate_statement(_mutated(controls)).conformant
