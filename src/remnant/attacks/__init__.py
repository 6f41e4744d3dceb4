"""Attacks (Standard §4.3, C-Q1..C-Q4): one module per attack, registered under kind ``attack``.

Importing this package registers every built-in attack (``registry.names("attack")``). Modules not yet present
are skipped, so the package stays importable while attacks are added.
"""

from __future__ import annotations

import importlib

from remnant.attacks.base import (
    Attack,
    AttackContext,
    GenerationInput,
    ItemOutcome,
    Probe,
    Unattacked,
    no_attack,
)

_MODULES = (
    "prefill",
    "many_shot",
    "repeated_sampling",
    "quantize",
    "aoa",
    "icl",
    "mask",
    "mask_cloze",
    "gcg",
    "soft_prompt",
    "actpert",
)

for _name in _MODULES:
    try:
        importlib.import_module(f"remnant.attacks.{_name}")
    except ModuleNotFoundError as _exc:
        if _exc.name != f"remnant.attacks.{_name}":
            raise

__all__ = ["Attack", "AttackContext", "GenerationInput", "ItemOutcome", "Probe", "Unattacked", "no_attack"]
