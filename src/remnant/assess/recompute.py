"""``remnant recompute RUN``: rates, verdict, tier, statement, manifest and reports again, from records alone.

Loads no model and imports no torch (a test checks ``sys.modules``): it reads ``records.jsonl``, ``prereg.json``,
``deviations.jsonl`` and the config copy in RUN and runs the same :func:`remnant.assess.finalize.finalize` that
``remnant assess`` ended with, so the statement comes out byte for byte the same (DESIGN §1; Inspect AI's
``score`` re-judging a saved log). A deviation recorded since the run (R15) is applied; an unexplained change to
the config copy is refused (R14).
"""

from __future__ import annotations

from pathlib import Path

from remnant.assess.finalize import Outcome, finalize, load_run_config


def recompute(run_dir: str | Path, *, reports: bool = True) -> Outcome:
    """Rebuild everything downstream of the records in ``run_dir``."""
    run = Path(run_dir)
    return finalize(run, load_run_config(run), reports=reports)


__all__ = ["recompute"]
