"""The ``compat`` parameter: remnant's loss arithmetic, or OpenUnlearning's exactly (docs/methods.md).

Every method with an OpenUnlearning counterpart takes ``compat``, recorded with its other parameters (R23, R24):

* ``"remnant"`` (the default, so recorded assessments keep their numbers) — padding never enters a loss, and each
  reduction is the one the method's formula describes;
* ``"openunlearning"`` — the loss their trainer computes on the same collated batch, quirks included: the KL
  retain term averages over all ``B·T`` positions, padding included; RMU's activation MSE divides a ``[B]`` sum by
  a ``[B, 1]`` count (a ``[B, B]`` broadcast); UNDIAL averages over every position and penalises vocabulary index
  ``V − 100`` where the label is ``-100``.

Where a method's two settings differ is stated in its docstring and in ``docs/methods.md``. ``compat`` changes the
loss only: the loop's warm-up, weight-decay grouping and steps per epoch are the loop's (docs/methods.md lists
how they differ from the HF Trainer's). An unknown value is refused rather than mapped to a default (R15).
"""

from __future__ import annotations

from typing import Literal, cast

from remnant.errors import ConfigError
from remnant.train.losses import KLPositions

Compat = Literal["remnant", "openunlearning"]
COMPAT_CHOICES: tuple[str, ...] = ("remnant", "openunlearning")


def check_compat(method: str, value: str) -> Compat:
    """``value`` as a compat setting, or a ConfigError naming the method and the accepted values."""
    if value not in COMPAT_CHOICES:
        raise ConfigError(
            f"method {method!r}: compat must be 'remnant' or 'openunlearning', not {value!r}",
            requirement="R23",
        )
    return cast(Compat, value)


def kl_positions(compat: Compat) -> KLPositions:
    """Where the KL retain term is averaged under ``compat`` (all B·T positions for OpenUnlearning)."""
    return "all" if compat == "openunlearning" else "attended"


__all__ = ["COMPAT_CHOICES", "Compat", "check_compat", "kl_positions"]
