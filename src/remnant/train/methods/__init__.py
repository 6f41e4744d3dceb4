"""Removal methods, one module each, registered as kind ``method`` (docs/methods.md; base.py: the interface).

Importing this package registers every built-in method. A new method is one module plus one import line here.
"""

from remnant.train.methods import (  # noqa: F401  (imported for registration)
    altpo,
    ceu,
    grad_ascent,
    grad_diff,
    idk_dpo,
    idk_nll,
    npo,
    pdu,
    retrain,
    rmu,
    satimp,
    simnpo,
    task_vector,
    undial,
    wga,
)
