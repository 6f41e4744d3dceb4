"""The conformance statement (K4-K7): schema, builder, example, validator, canonical JSON and DSSE signing."""

from __future__ import annotations

from remnant.statement.absent import Absent, absent, is_absent
from remnant.statement.canonical import canonical_json
from remnant.statement.schema import ConformanceStatement, statement_json_schema
from remnant.statement.validate import ValidationReport, Violation, validate_statement

__all__ = [
    "Absent",
    "ConformanceStatement",
    "ValidationReport",
    "Violation",
    "absent",
    "canonical_json",
    "is_absent",
    "statement_json_schema",
    "validate_statement",
]
