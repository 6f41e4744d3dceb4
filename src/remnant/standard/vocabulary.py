"""The Standard's vocabulary, defined once: states, surfaces, statuses, Class D risks and the tables built on them.

Every module that names a model state, a surface, a cell status, a Class D risk, the surfaces a track admits, the
attacks C-Q1 requires or the D-5.1 bar imports it from here, so a rule cannot drift between the verdict engine,
the statement validator, the assessment and the report.
"""

from __future__ import annotations

from typing import Literal

#: The three model states the Standard names (R3): never modified, target installed, after removal.
Role = Literal["control", "pre_removal", "post_removal"]
CONTROL: Role = "control"
PRE: Role = "pre_removal"
POST: Role = "post_removal"
ROLES: tuple[Role, ...] = (CONTROL, PRE, POST)

#: Where an attack's rates count: the two the Standard adjudicates on (C1, C2), weight-level attacks
#: (W-track only) and latent measurements (never adjudicating, C-H6).
Surface = Literal["relearning", "inference_time", "weight_transform", "latent"]
SURFACES: tuple[Surface, ...] = ("relearning", "inference_time", "weight_transform", "latent")

#: What happened to an attack or a cell (C-Q2: not applicable is recorded, never withstood).
Status = Literal["run", "not_applicable", "not_run", "failed", "diverged"]
STATUSES: tuple[Status, ...] = ("run", "not_applicable", "not_run", "failed", "diverged")
#: Statuses of a required attack that block *removed* (V1, C1, C-Q1, D-5.1).
BLOCKING_STATUSES: tuple[Status, ...] = ("not_run", "failed", "diverged")

#: The three Class D re-identification risks, in the Standard's order (§5.2–§5.4; D-2.1, D-3.1, D-4.1).
Risk = Literal["singling_out", "linkability", "inference"]
CLASS_D_RISKS: tuple[Risk, ...] = ("singling_out", "linkability", "inference")

#: The metric of a Class D measurement's count on never-installed control entities, beside ``kappa`` (D4).
CONTROL_ENTITIES = "kappa_control_entities"

#: Surfaces each track admits (R0.2, C1, C2); latent is never admitted (C-H6).
ADMITTED_SURFACES: dict[str, tuple[Surface, ...]] = {
    "W": ("relearning", "inference_time", "weight_transform"),
    "Q": ("inference_time",),
}

#: C-Q1's minimum inference-time battery, matched by attack name; each runs or is not applicable (C-Q2).
CQ1_REQUIRED: tuple[str, ...] = ("prefill", "many_shot", "repeated_sampling")

#: The full battery for each class and track (C1, C2, D-2.1, D-3.1, D-4.1, D-5.3).
REQUIRED_SURFACES: dict[tuple[str, str], tuple[str, ...]] = {
    ("C", "W"): ("relearning", "inference_time"),
    ("C", "Q"): ("inference_time",),
    ("D", "W"): ("singling_out", "linkability", "inference", "relearning"),
    ("D", "Q"): ("singling_out", "linkability", "inference"),
}


def net_of_control(value: float, control_point: float) -> float:
    """A rate or bound net of the control's point rate, floored at zero (D4, D-5.1)."""
    return max(value - control_point, 0.0)


def below_bar(upper_net: float, threshold: float) -> bool:
    """D-5.1's bar: a risk's Wilson upper bound net of control is *strictly* below the declared insignificance
    threshold ("below" as R20 reads it: a bound equal to the threshold does not pass)."""
    return upper_net < threshold


__all__ = [
    "ADMITTED_SURFACES",
    "BLOCKING_STATUSES",
    "CLASS_D_RISKS",
    "CONTROL",
    "CONTROL_ENTITIES",
    "CQ1_REQUIRED",
    "POST",
    "PRE",
    "REQUIRED_SURFACES",
    "ROLES",
    "Risk",
    "Role",
    "STATUSES",
    "SURFACES",
    "Status",
    "Surface",
    "below_bar",
    "net_of_control",
]
