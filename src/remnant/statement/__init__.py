"""The conformance statement (K4-K7): schema, builder, example, validator, canonical JSON and DSSE signing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from remnant.lazy import exports_over_submodules, lazy_exports

if TYPE_CHECKING:
    from remnant.statement.absent import Absent, absent, is_absent
    from remnant.statement.canonical import canonical_json
    from remnant.statement.schema import ConformanceStatement, statement_json_schema
    from remnant.statement.validate import ValidationReport, Violation, validate_statement

#: Imported on first use: the package's command module and its small helpers load without the rest (a light start).
__getattr__ = lazy_exports(
    __name__,
    {
        "Absent": "absent",
        "absent": "absent",
        "is_absent": "absent",
        "canonical_json": "canonical",
        "ConformanceStatement": "schema",
        "statement_json_schema": "schema",
        "ValidationReport": "validate",
        "Violation": "validate",
        "validate_statement": "validate",
    },
)
#: ``absent`` is the function (as it was when this package imported eagerly), not its module ``absent.py``.
exports_over_submodules(__name__, ["absent"])

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
