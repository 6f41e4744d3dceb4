"""Reports: the technical HTML report, the customer register (V6, R18) and the comparison over several runs.

Self-contained HTML from Jinja2 templates with inline SVG plots drawn by matplotlib: no JavaScript, no external
assets. Public names resolve lazily so that building the CLI parser does not import Jinja2 or matplotlib. The run
manifest and the relearning curves a report reads are core data (:mod:`remnant.run_manifest`,
:mod:`remnant.curves`): nothing here imports :mod:`remnant.assess`.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ReportEntry": "remnant.report.render",
    "render_report": "remnant.report.render",
    "render_comparison": "remnant.report.render",
    "write_html": "remnant.report.render",
    "load_entry": "remnant.report.runs",
    "report_runs": "remnant.report.runs",
    "canary_strings": "remnant.report.redact",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'remnant.report' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
