"""Cell records' typed fields (schema_version 3) and the migration of the ``params`` that held them (R23, C-W3, D4).

A cell record says what it measured in described, typed fields — a relearning checkpoint's budget, step, epoch
and examples (C-W3), a Class D measurement's risk, method, baseline and entities (D4), a utility reading's metric,
value and proportion (R10, R11), an analytic count's expected_k — and keeps ``params`` for anything else. Records
written before held these in ``params``; each kind of cell remnant wrote at schema_version 2 (and 1, before the
chain) is upgraded here from the bytes it had, and read through the store, whose chain is verified on those bytes.
"""

from __future__ import annotations

import hashlib
import json
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from remnant.engine.cell import CellFields
from remnant.errors import RecordError
from remnant.records import (
    CELL_DETAIL_FIELDS,
    CELL_PARAMS_MOVED,
    GENESIS,
    SCHEMA_VERSIONS,
    CellRecord,
    RecordStore,
    chained_lines,
    line_digest,
    parse_record,
    upgrade,
)
from remnant.standard.vocabulary import CLASS_D_RISKS
from remnant.statement.canonical import canonical_json

#: The fields every cell carries whatever it measured: identity, counts, label, timing and status.
CORE = {
    "entry_type",
    "schema_version",
    "run_id",
    "cell_key",
    "attack",
    "surface",
    "model_state",
    "metric",
    "k",
    "n",
    "checkpoint",
    "params",
    "elapsed_s",
    "status",
    "reason",
}
ATTACK_SPEC = {"kind": "attack", "name": "prefill", "version": "1", "params": {"source": "answer_stem"}}
CLASSD_SPEC = {
    "kind": "classd",
    "name": "singling_out",
    "version": "1",
    "params": {"attribute": "staff_code"},
}
UTILITY_SPEC = {"kind": "utility", "name": "retain_kappa", "version": "1", "params": {"max_new_tokens": 8}}


def v2(**fields: Any) -> dict[str, Any]:
    """A cell entry as remnant wrote it at schema_version 2 (chained; ``prev`` and ``rest`` on the line)."""
    base: dict[str, Any] = {
        "entry_type": "cell",
        "schema_version": 2,
        "run_id": "run-1",
        "cell_key": "c" * 64,
        "attack": "prefill",
        "surface": "inference_time",
        "model_state": "post_removal",
        "metric": "kappa",
        "k": 2,
        "n": 6,
        "checkpoint": "final",
        "params": {},
        "elapsed_s": 1.25,
        "status": "run",
        "reason": None,
    }
    return {**base, **fields}


def v3(old: dict[str, Any], params: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """The schema_version 3 entry ``old`` becomes: its typed ``fields``, ``params`` only what no field holds."""
    return {**old, "schema_version": 3, "params": params or {}, **fields}


#: One example of each kind of cell remnant wrote at schema_version 2, with the entry it must upgrade to.
CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}


def case(name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
    CASES[name] = (old, new)


_attack = v2(params={"component": ATTACK_SPEC})
case("attack", _attack, v3(_attack, component=ATTACK_SPEC))
_analytic = v2(attack="repeated_sampling", params={"component": ATTACK_SPEC, "expected_k": 1.75})
case("analytic-attack", _analytic, v3(_analytic, component=ATTACK_SPEC, expected_k=1.75))
_scored = v2(
    attack="relearning_scored_items",
    surface="relearning",
    checkpoint="budget=4/step=2",
    params={"budget": 4, "step": 2, "epoch": 1.0, "examples": 4, "adjudicating": False},
)
case(
    "non-adjudicating-arm",
    _scored,
    v3(_scored, budget=4, step=2, epoch=1.0, examples=4, adjudicating=False),
)
_failed = v2(k=0, n=0, status="failed", reason="RuntimeError: boom", params={"component": ATTACK_SPEC})
case("failed-attack", _failed, v3(_failed, component=ATTACK_SPEC))
_na = v2(attack="many_shot", k=0, n=0, status="not_applicable", reason="no demonstrations")
case("not-applicable", _na, v3(_na))
_relearn = v2(
    attack="relearning",
    surface="relearning",
    model_state="control",
    checkpoint="budget=16/step=3",
    params={"budget": 16, "step": 3, "epoch": 0.75, "examples": 12},
)
case("relearning-checkpoint", _relearn, v3(_relearn, budget=16, step=3, epoch=0.75, examples=12))
_diverged = v2(
    attack="relearning",
    surface="relearning",
    checkpoint="budget=16/diverged",
    k=0,
    n=0,
    status="diverged",
    reason="step 4: loss nan",
)
case("diverged", _diverged, v3(_diverged, budget=16))  # the budget only the label carried
_utility = v2(
    attack="none",
    surface="utility",
    metric="utility",
    checkpoint="removal_stage",
    k=5,
    n=6,
    params={"metric": "retain_kappa", "value": 0.8333, "proportion": True, "component": UTILITY_SPEC},
)
case(
    "utility",
    _utility,
    v3(_utility, utility_metric="retain_kappa", value=0.8333, proportion=True, component=UTILITY_SPEC),
)
_relearned = v2(
    attack="relearning",
    surface="utility",
    metric="utility",
    checkpoint="budget=8/final",
    k=0,
    n=1,
    params={"metric": "perplexity", "value": 12.5, "proportion": False, "component": UTILITY_SPEC},
)
case(
    "relearned-utility",
    _relearned,
    v3(
        _relearned,
        utility_metric="perplexity",
        value=12.5,
        proportion=False,
        component=UTILITY_SPEC,
        budget=8,
    ),
)
_classd = {
    "risk": "singling_out",
    "method": "prefill",
    "baseline": None,
    "component": CLASSD_SPEC,
    "attack": ATTACK_SPEC,
}
_target = v2(attack="singling_out/prefill", k=2, n=3, params={**_classd, "entities": "target"})
_typed_classd = {k: v for k, v in _classd.items() if k != "attack"} | {"attack_component": ATTACK_SPEC}
case("classd-target", _target, v3(_target, **_typed_classd, entities="target"))
_control = v2(
    attack="singling_out/prefill",
    metric="kappa_control_entities",
    k=0,
    n=4,
    params={**_classd, "entities": "control", "expected_k": 0.25},
)
case("classd-control", _control, v3(_control, **_typed_classd, entities="control", expected_k=0.25))
_link = v2(
    attack="linkability/relearning",
    surface="relearning",
    checkpoint="budget=4/step=0",
    params={
        "risk": "linkability",
        "method": "likelihood",
        "baseline": 0.25,
        "entities": "target",
        "budget": 4,
        "step": 0,
        "epoch": 0,
        "examples": 0,
        "reused_step0": True,
    },
)
case(
    "classd-relearning",
    _link,
    v3(
        _link,
        risk="linkability",
        method="likelihood",
        baseline=0.25,
        entities="target",
        budget=4,
        step=0,
        epoch=0,
        examples=0,
        reused_step0=True,
    ),
)
_risk_status = v2(
    attack="inference/gcg",
    k=0,
    n=0,
    status="not_applicable",
    reason="free text",
    params={"risk": "inference"},
)
case("classd-not-applicable", _risk_status, v3(_risk_status, risk="inference"))
_classd_diverged = v2(
    attack="singling_out/relearning",
    surface="relearning",
    checkpoint="budget=4/diverged",
    k=0,
    n=0,
    status="diverged",
    reason="step 2: loss inf",
    params={"risk": "singling_out"},
)
case("classd-diverged", _classd_diverged, v3(_classd_diverged, risk="singling_out", budget=4))


def test_schema_version_3_is_current() -> None:
    assert SCHEMA_VERSIONS["cell"] == 3
    assert CellRecord.model_json_schema()["properties"]["schema_version"]["const"] == 3


def test_every_field_is_described_in_the_json_schema() -> None:
    schema = CellRecord.model_json_schema()
    for name in CellRecord.model_fields:
        assert schema["properties"][name].get("description"), f"CellRecord.{name} has no description"
    assert set(CellRecord.model_fields) == CORE | set(CELL_DETAIL_FIELDS)
    for name in CELL_DETAIL_FIELDS:  # optional, null where it does not apply
        assert name not in schema.get("required", []) and schema["properties"][name]["default"] is None
    assert schema["additionalProperties"] is False


def test_json_schema_uses_the_standards_vocabulary() -> None:
    props = CellRecord.model_json_schema()["properties"]
    enum = next(option["enum"] for option in props["risk"]["anyOf"] if "enum" in option)
    assert tuple(enum) == CLASS_D_RISKS
    assert next(o["enum"] for o in props["entities"]["anyOf"] if "enum" in o) == ["target", "control"]
    types = {
        name: {o.get("type") for o in props[name]["anyOf"]} for name in ("budget", "epoch", "proportion")
    }
    assert types == {
        "budget": {"integer", "null"},
        "epoch": {"number", "null"},
        "proportion": {"boolean", "null"},
    }


def test_the_writers_fields_are_the_records_typed_fields() -> None:
    """engine.cell.CellFields (what writers may set) names exactly the record's typed fields."""
    assert set(typing.get_type_hints(CellFields)) == set(CELL_DETAIL_FIELDS)
    assert set(CELL_PARAMS_MOVED.values()) == set(CELL_DETAIL_FIELDS)


@pytest.mark.parametrize("name", list(CASES))
def test_v2_cell_upgrades_to_typed_fields(name: str) -> None:
    old, new = CASES[name]
    assert upgrade(json.loads(json.dumps(old))) == new
    record = parse_record(json.loads(json.dumps(old)))
    assert isinstance(record, CellRecord) and record.params == {}
    # what the record says is what a v3 writer writes: dumping and reading back gives the same record
    assert parse_record(record.model_dump(mode="json")) == record


@pytest.mark.parametrize("name", list(CASES))
def test_v1_cell_written_before_the_chain_upgrades_to_typed_fields(name: str) -> None:
    old, new = CASES[name]
    assert upgrade({**old, "schema_version": 1}) == new


def test_upgrade_leaves_its_input_alone() -> None:
    old = json.loads(json.dumps(CASES["classd-target"][0]))
    before = json.dumps(old, sort_keys=True)
    upgrade(old)
    assert json.dumps(old, sort_keys=True) == before


def test_params_no_field_holds_stay_in_params() -> None:
    old = v2(params={"component": ATTACK_SPEC, "note": "kept", "metric": "not a utility metric name"})
    assert upgrade(old)["params"] == {"note": "kept", "metric": "not a utility metric name"}


def test_a_v2_cell_whose_params_do_not_fit_the_fields_is_refused_by_name() -> None:
    with pytest.raises(RecordError, match="field 'risk'"):
        parse_record(v2(params={"risk": "membership"}))
    with pytest.raises(RecordError, match="field 'params'"):
        parse_record(v2(params=["budget", 16]))
    with pytest.raises(RecordError, match="is not a checkpoint of relearning budget 16"):
        parse_record({**CASES["relearning-checkpoint"][0], "checkpoint": "budget=8/step=3"})


def test_chained_v2_lines_are_verified_on_their_bytes_then_upgraded(tmp_path: Path) -> None:
    """The chain digests the line as written: a v2 line reads (upgraded), its digest is the head, and a v3 line
    appended after it links to that digest — never to the bytes the upgraded record would have."""
    path = tmp_path / "records.jsonl"
    prev, raw = GENESIS, b""
    olds = [CASES[name][0] for name in CASES]
    for index, old in enumerate(olds):
        line = canonical_json({**old, "prev": prev, "rest": len(olds) - index - 1}) + b"\n"
        raw += line
        prev = line_digest(line)
    path.write_bytes(raw)
    store = RecordStore(path)
    records, chain = store.read_chain()
    assert records == [parse_record(dict(old)) for old in olds]
    assert chain.chained and chain.head == hashlib.sha256(raw.splitlines(keepends=True)[-1]).hexdigest()
    store.append(records[0])  # written again as v3
    lines = path.read_bytes().splitlines(keepends=True)
    assert json.loads(lines[-1])["prev"] == chain.head and json.loads(lines[-1])["schema_version"] == 3
    assert store.read()[-1] == records[0]
    # an upgraded record written back is a different line: the chain commits to what was written
    assert chained_lines([records[0]])[0] != raw.splitlines(keepends=True)[0]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"params": {"budget": 16}}, "params.budget: a typed field holds it"),
        ({"step": 3}, "without the relearning budget"),
        ({"budget": 16, "checkpoint": "final"}, "not a checkpoint of relearning budget 16"),
        ({"budget": 16, "step": 2, "checkpoint": "budget=16/step=3"}, "is not step 2 of budget 16"),
        (
            {"surface": "relearning", "checkpoint": "budget=16/step=3", "budget": 16},
            "carries its budget, step",
        ),
        ({"metric": "utility", "surface": "utility"}, "carries its utility_metric, value and proportion"),
        ({"utility_metric": "retain_kappa"}, "utility_metric on a 'kappa' cell"),
        ({"entities": "control"}, "measures no Class D risk"),
        ({"risk": "membership"}, "risk"),
        ({"entities": "both", "risk": "inference"}, "entities"),
        ({"epoch": float("nan"), "budget": 4, "step": 1, "checkpoint": "budget=4/step=1"}, "epoch"),
    ],
)
def test_typed_fields_that_contradict_each_other_are_refused(fields: dict[str, Any], message: str) -> None:
    base = {k: v for k, v in v2().items() if k != "schema_version"}
    with pytest.raises(ValidationError, match=message):
        CellRecord.model_validate({**base, **fields})


def test_fields_that_do_not_apply_are_left_off_the_line() -> None:
    record = parse_record(CASES["classd-target"][0])
    line = record.model_dump(mode="json")
    assert "budget" not in line and "baseline" not in line and "utility_metric" not in line
    assert line["risk"] == "singling_out" and line["attack_component"] == ATTACK_SPEC
    assert CellRecord.model_validate(line) == record and record.baseline is None
