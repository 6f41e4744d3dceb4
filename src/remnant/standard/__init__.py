"""The Yuyari Standard v0.3 as code, one module per concern, rule ids in docstrings.

- :mod:`remnant.standard.facts`: the verdict input (DESIGN §4), validated.
- :mod:`remnant.standard.verdict`: the verdict (V1, V1a, R13, R20, C1, C2, C-Q1, C-Q2, D-5.1).
- :mod:`remnant.standard.commands`: ``remnant verdict FACTS.json``.
- ``tier`` (T1–T5), ``minima`` (R21), ``scope`` (V4), ``validity`` (V5), ``gloss`` (V6), ``rules`` (the ids).

Nothing here imports torch: verdicts and tiers recompute anywhere (DESIGN §2).
"""

from __future__ import annotations

from remnant.standard.facts import AttackFact, VerdictFacts
from remnant.standard.verdict import VerdictResult, decide

__all__ = ["AttackFact", "VerdictFacts", "VerdictResult", "decide"]
