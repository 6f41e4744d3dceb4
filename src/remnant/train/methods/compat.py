"""The ``compat`` parameter: remnant's loss arithmetic, or OpenUnlearning's exactly (docs/methods.md).

Every method with an OpenUnlearning counterpart takes ``compat``, recorded like every parameter (R23, R24):
``"remnant"`` (the default, so recorded assessments keep their numbers) keeps padding out of every loss
and uses the reduction the method's formula describes; ``"openunlearning"`` computes the loss their trainer
computes on the same collated batch, quirks included. Where they differ is stated in each method's docstring
and tabulated in ``docs/methods.md``. ``compat`` changes the loss only, never the loop (warm-up, weight-decay
grouping, steps per epoch). An unknown value is refused rather than mapped to a default (R15).
"""

from __future__ import annotations

from typing import Literal, cast

from remnant.errors import ConfigError
from remnant.train.losses import KLPositions

Compat = Literal["remnant", "openunlearning"]


def check_compat(method: str, value: str) -> Compat:
    """``value`` as a compat setting, or a ConfigError naming the method and the accepted values."""
    if value not in ("remnant", "openunlearning"):
        raise ConfigError(
            f"method {method!r}: compat must be 'remnant' or 'openunlearning', not {value!r}",
            requirement="R23",
        )
    return cast(Compat, value)


def kl_positions(compat: Compat) -> KLPositions:
    """Where the KL retain term is averaged under ``compat`` (all B·T positions for OpenUnlearning)."""
    return "all" if compat == "openunlearning" else "attended"


__all__ = ["Compat", "check_compat", "kl_positions"]
