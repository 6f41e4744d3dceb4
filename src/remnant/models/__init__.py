"""Model edge: safe loading, identity, the zoo, prompts, architecture parts and hooks (torch lives here).

The package's public names resolve lazily, so importing ``remnant.models.commands`` (to build the CLI parser)
does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ModelState", "load_model", "save_model"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("remnant.models.load"), name)
    raise AttributeError(f"module 'remnant.models' has no attribute {name!r}")
