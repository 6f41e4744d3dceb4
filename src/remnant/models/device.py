"""The torch device a command runs on: named once, checked once, before any model is read (R24).

A device (an option such as ``remnant eval --device``, or ``[models] device``) must be one
:data:`~remnant.config.fields.DEVICE_PATTERN` allows and one this machine has: a CUDA index past the last GPU, or
``cuda`` without one, is a one-line :class:`~remnant.errors.ConfigError` naming where it was given, not a torch
traceback after the data were read. ``auto`` resolves to ``cuda`` where a GPU is visible, else ``cpu``; the
resolved name is what the run records (R24)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from remnant.errors import ConfigError

if TYPE_CHECKING:
    import torch

DEVICE_RULE = "R24"


def _unavailable(name: str) -> str | None:
    """Why this machine cannot run on ``name`` (a well-formed device other than auto), or None."""
    import torch

    if name == "mps":
        return None if torch.backends.mps.is_available() else "this machine has no MPS device"
    if not name.startswith("cuda"):
        return None
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        return "this machine has no CUDA device (use cpu or auto)"
    index = int(name.partition(":")[2] or 0)
    if index >= count:
        return f"this machine has {count} CUDA device(s): cuda:0 to cuda:{count - 1}"
    return None


def check_device(name: str, *, where: str) -> str:
    """``name`` resolved (``auto``: ``cuda`` where a GPU is visible, else ``cpu``) and checked present on this
    machine; a ConfigError naming ``where`` (an option, or a config file and field) otherwise."""
    # imported here: remnant.config imports remnant.packs, which reaches this package at import time
    from remnant.config.fields import DEVICE_PATTERN

    if not isinstance(name, str) or re.fullmatch(DEVICE_PATTERN, name) is None:
        raise ConfigError(
            f"{where} {name!r}: not a device; give auto, cpu, mps, cuda or cuda:N", requirement=DEVICE_RULE
        )
    if name == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    problem = _unavailable(name)
    if problem is not None:
        raise ConfigError(f"{where} {name!r}: {problem}", requirement=DEVICE_RULE)
    return name


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of the model's first parameter: where input batches must be before the forward pass."""
    device: torch.device = next(model.parameters()).device
    return device


__all__ = ["DEVICE_RULE", "check_device", "model_device"]
