"""The Standard's vocabulary, defined once: states, surfaces, statuses, Class D risks and the tables built on them.

Every module that names a model state, a surface, a cell status, a Class D risk, the surfaces a track admits, the
attacks C-Q1 requires or the D-5.1 bar imports it from here, so a rule cannot drift between the verdict engine,
the statement validator, the assessment and the report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
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
#: The statuses other than ``run``, worst first: what a set of attacks or cells none of which ran reports (C-Q2).
STATUS_PRIORITY: tuple[Status, ...] = ("failed", "diverged", "not_run", "not_applicable")

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

#: How the verdict treats an attack (R0.2, C2, C-H6, C-W6); see :func:`admission`.
Admission = Literal["latent", "inadmissible", "non_adjudicating", "admitted"]

#: C-Q1's minimum inference-time battery, matched by attack name; each runs or is not applicable (C-Q2).
CQ1_REQUIRED: tuple[str, ...] = ("prefill", "many_shot", "repeated_sampling")

#: The full battery for each class and track (C1, C2, D-2.1, D-3.1, D-4.1, D-5.3).
REQUIRED_SURFACES: dict[tuple[str, str], tuple[str, ...]] = {
    ("C", "W"): ("relearning", "inference_time"),
    ("C", "Q"): ("inference_time",),
    ("D", "W"): ("singling_out", "linkability", "inference", "relearning"),
    ("D", "Q"): ("singling_out", "linkability", "inference"),
}


def admission(track: str, surface: str, adjudicating: bool) -> Admission:
    """Whether an attack adjudicates, in the order the verdict asks (R0.2, C2): a latent measurement is reported
    and never adjudicates (C-H6); a surface the track does not admit is ignored (inadmissible); a
    non-adjudicating arm is reported and never decides (C-W6); any other attack is admitted."""
    if surface == "latent":
        return "latent"
    if surface not in ADMITTED_SURFACES[track]:
        return "inadmissible"
    return "admitted" if adjudicating else "non_adjudicating"


def worst_status(statuses: Iterable[object]) -> Status | None:
    """The worst of ``statuses`` by :data:`STATUS_PRIORITY` (a failure outranks a divergence, which outranks not
    run, which outranks not applicable; C-Q2); ``None`` where none of them is one (all ran, or none given)."""
    present = set(statuses)
    return next((s for s in STATUS_PRIORITY if s in present), None)


def net_of_control(value: float, control_point: float) -> float:
    """A rate or bound net of the control's point rate, floored at zero (D4, D-5.1)."""
    return max(value - control_point, 0.0)


def net_of(baseline: float | None, control_k: int | None, control_n: int | None) -> Callable[[float], float]:
    """A rate or bound net of ``baseline``, then of the control's point rate (itself net of the baseline, and
    none without a control), each floored at zero: "net" as the verdict reads it (D4, D-5.1)."""
    b = baseline or 0.0
    control = max(control_k / control_n - b, 0.0) if control_k is not None and control_n else 0.0
    return lambda x: net_of_control(max(x - b, 0.0), control)


def below_bar(upper_net: float, threshold: float) -> bool:
    """D-5.1's bar: a risk's Wilson upper bound net of control is *strictly* below the declared insignificance
    threshold ("below" as R20 reads it: a bound equal to the threshold does not pass)."""
    return upper_net < threshold


__all__ = [
    "ADMITTED_SURFACES",
    "Admission",
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
    "STATUS_PRIORITY",
    "SURFACES",
    "Status",
    "Surface",
    "admission",
    "below_bar",
    "net_of",
    "net_of_control",
    "worst_status",
]
