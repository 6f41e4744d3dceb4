"""The attack battery: inference-time attack tables and the weight-access relearning attack (C-Q1, C-W1..C-W6)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from remnant.config.fields import (
    MAX_BATCH,
    MAX_EPOCHS,
    MAX_LIST,
    MAX_LR,
    MAX_N,
    ConfigModel,
    Params,
    RuleViolation,
    Text,
)
from remnant.standard.vocabulary import CQ1_REQUIRED


class Attack(ConfigModel):
    """One attack: enabled or not (with the reason), and its exact parameters (C-Q1, C-Q2, R14)."""

    enabled: bool = Field(default=True, description="Whether the attack runs (C-Q1).")
    reason: Text | None = Field(default=None, description="Why a disabled attack does not run (C-Q2).")
    params: Params = Field(default_factory=dict, description="Exact attack parameters and budget (R14).")


class Relearning(ConfigModel):
    """The weight-access relearning attack (C-W1..C-W6), run identically on the control (C-W5)."""

    enabled: bool = Field(default=True, description="Whether relearning runs; required on W-track (C1).")
    reason: Text | None = Field(default=None, description="Why relearning does not run (C-Q2).")
    budgets: list[Annotated[int, Field(ge=1, le=MAX_N)]] = Field(
        min_length=1, max_length=MAX_LIST, description="Relearning set sizes (C-W1, C-W2)."
    )
    lr: float = Field(gt=0, le=MAX_LR, description="Relearning learning rate (C-W1).")
    max_epochs: int = Field(
        ge=1, le=MAX_EPOCHS, description="Epoch ceiling; g is scored after every epoch (C-W1, C-W3)."
    )
    batch_size: int = Field(
        default=4,
        ge=1,
        le=MAX_BATCH,
        description="Examples per optimiser step, identical on both models (C-W5).",
    )
    first_epoch_checkpoints: list[Annotated[float, Field(gt=0, lt=1)]] = Field(
        min_length=1,
        max_length=MAX_LIST,
        description="Fractions of the first epoch at which g is also scored (C-W3).",
    )
    split: Literal["item-disjoint", "example-disjoint"] = Field(
        default="item-disjoint", description="How the relearning set is kept disjoint from P (C-W6)."
    )
    scored_items_arm: bool = Field(
        default=False, description="Also relearn on the scored items; reported, never adjudicates (C-W6)."
    )
    params: Params = Field(default_factory=dict, description="Further trainer parameters (C-W5, R23).")

    @field_validator("budgets", "first_epoch_checkpoints")
    @classmethod
    def _increasing(cls, value: list[Any], info: ValidationInfo) -> list[Any]:
        if any(b >= a for a, b in zip(value[1:], value, strict=False)):
            rule = "C-W1" if info.field_name == "budgets" else "C-W3"
            raise ValueError(f"must be strictly increasing ({rule})")
        return value


class Attacks(ConfigModel):
    """The attack battery: ``relearning`` plus one table per registered attack name (R14).

    Attack names other than ``relearning`` are open (the registry decides which exist), so extras are allowed
    here and each is validated as an :class:`Attack` with ``extra="forbid"``.
    """

    model_config = ConfigDict(extra="allow", frozen=True, strict=True)
    __pydantic_extra__: dict[str, Attack] = Field(init=False)

    relearning: Relearning | None = Field(default=None, description="Relearning attack (C-W1..C-W6).")

    @model_validator(mode="after")
    def _names(self) -> Attacks:
        for name in self.named():
            if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
                raise RuleViolation(f"attacks.{name}", "is not a registered-name form [a-z][a-z0-9_]*", "R14")
        for name in CQ1_REQUIRED:
            attack = self.named().get(name)
            if attack is None:
                raise RuleViolation(
                    f"attacks.{name}",
                    "missing: prefill, many_shot and repeated_sampling must be attempted; "
                    "set enabled = false with a reason where one is undefined for the target",
                    "C-Q1",
                )
            if not attack.enabled and attack.reason is None:
                raise RuleViolation(
                    f"attacks.{name}.reason", "missing for a disabled required attack", "C-Q2"
                )
        return self

    def named(self) -> dict[str, Attack]:
        """Every attack table except ``relearning``, by name."""
        return dict(self.__pydantic_extra__ or {})
