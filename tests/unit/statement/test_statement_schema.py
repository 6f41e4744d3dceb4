"""The statement's JSON Schema is valid JSON Schema; K6 absent markers; `remnant schema statement`."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from remnant.cli import main
from remnant.statement.absent import Absent, is_absent
from remnant.statement.schema import ConformanceStatement, statement_json_schema


def test_schema_is_valid_json_schema() -> None:
    schema = statement_json_schema()
    Draft202012Validator.check_schema(schema)
    assert "class" in schema["properties"] and "class_" not in schema["properties"]
    annex_e = {
        "standard_version",
        "class",
        "track",
        "claim",
        "model",
        "pre_registration",
        "deviations",
        "surfaces",
        "utility",
        "verdict",
        "verdict_scope",
        "tier",
        "validity_until",
        "manifest_ref",
        "pack",
        "assessor",
    }
    assert annex_e <= set(schema["required"])


def test_every_field_described() -> None:
    for name, field in ConformanceStatement.model_fields.items():
        assert field.description, name


def test_latent_adjudicating_is_literal_false() -> None:
    latent = statement_json_schema()["$defs"]["LatentBlock"]["properties"]["adjudicating"]
    assert latent.get("const") is False or latent.get("enum") == [False]


def test_absent_marker() -> None:
    marker = Absent(reason="not measured")
    assert marker.model_dump() == {"absent": True, "reason": "not measured"}
    assert is_absent(marker) and is_absent({"absent": True, "reason": "x"})
    assert not is_absent({"absent": False, "reason": "x"}) and not is_absent(None) and not is_absent(0.3)
    with pytest.raises(ValueError):
        Absent(reason="")


def test_cli_prints_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "statement"]) == 0
    assert json.loads(capsys.readouterr().out) == statement_json_schema()
