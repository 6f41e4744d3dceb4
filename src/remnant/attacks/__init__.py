"""Attacks (Standard §4.3, C-Q1..C-Q4): one module per attack, registered under kind ``attack``.

Importing this package registers every built-in attack (``registry.names("attack")``): a new attack is one module
plus one import line here. A module that fails to import is an error, never skipped (K4).
"""

from __future__ import annotations

from remnant.attacks import (  # noqa: F401  (imported for registration)
    actpert,
    aoa,
    gcg,
    icl,
    many_shot,
    mask,
    mask_cloze,
    prefill,
    quantize,
    repeated_sampling,
    soft_prompt,
)
from remnant.attacks.base import (
    Attack,
    AttackContext,
    GenerationInput,
    ItemOutcome,
    Probe,
    Unattacked,
    no_attack,
)

__all__ = ["Attack", "AttackContext", "GenerationInput", "ItemOutcome", "Probe", "Unattacked", "no_attack"]
