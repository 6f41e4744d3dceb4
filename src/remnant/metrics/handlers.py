"""Registers every built-in metric handler as registry kind ``metric`` (R23, R24): the registry imports this
module the first time that kind is asked for (``KIND_PACKAGES``), so the package itself stays light to import."""

from __future__ import annotations

from remnant.metrics import (  # noqa: F401  (imported for registration)
    memorization,
    mia,
    privacy,
    probability,
    rouge,
    truth_ratio,
    utility,
)
