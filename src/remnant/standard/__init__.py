"""The Yuyari Standard v0.3 as code, one module per concern, rule ids in docstrings.

- :mod:`remnant.standard.facts`: the verdict input (V1), validated.
- :mod:`remnant.standard.verdict`: the verdict (V1, V1a, R13, R20, C1, C2, C-Q1, C-Q2, D-5.1).
- :mod:`remnant.standard.commands`: ``remnant verdict FACTS.json``.
- ``tier`` (T1–T5), ``minima`` (R21), ``scope`` (V4), ``validity`` (V5), ``gloss`` (V6), ``rules`` (the ids).

Nothing here imports torch: verdicts and tiers recompute anywhere (the pure core).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from remnant.standard.facts import AttackFact, VerdictFacts
    from remnant.standard.verdict import VerdictResult, decide

#: Imported on first use, so a module that needs only the vocabulary does not load the verdict engine (scipy).
_LAZY = {"AttackFact": "facts", "VerdictFacts": "facts", "VerdictResult": "verdict", "decide": "verdict"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"remnant.standard.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'remnant.standard' has no attribute {name!r}")


__all__ = ["AttackFact", "VerdictFacts", "VerdictResult", "decide"]
