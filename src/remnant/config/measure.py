"""What is measured: the utility metric and floor (R9) and the pack splits scored as P (R14, R16)."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from remnant.config.fields import MAX_N, ConfigModel, Name, Params, RuleViolation, Text, Unit
from remnant.packs.schema import SPLIT_NAMES

#: Splits that install, remove or relearn the target: never scored as P (R16, C-W6).
TRAINING_SPLITS: frozenset[str] = frozenset({"install", "removal", "relearn"})


class Utility(ConfigModel):
    """The utility metric u and its floor φ, declared before the run (R9)."""

    metrics: list[Name] = Field(
        min_length=1, description="Registered utility metric names; u is their minimum (R9)."
    )
    phi: Unit = Field(description="Utility floor φ, tested at the removal stage (R9, R13).")
    deployment: Text = Field(description="The intended deployment the metric is relevant to (R9).")
    general_language_modelling: bool = Field(
        default=False, description="The deployment is general language modelling: perplexity allowed (R9)."
    )
    params: dict[str, Params] = Field(default_factory=dict, description="Parameters per metric name (R23).")

    @model_validator(mode="after")
    def _checks(self) -> Utility:
        for key in self.params:
            if key not in self.metrics:
                raise RuleViolation(f"utility.params.{key}", "names no metric in 'utility.metrics'", "R9")
        if any("perplexity" in m or m == "ppl" for m in self.metrics) and not self.general_language_modelling:
            raise RuleViolation(
                "utility.metrics",
                "uses perplexity, permitted only where the deployment is general language modelling",
                "R9",
            )
        return self


class Probe(ConfigModel):
    """Which pack splits are scored as P, and how many items of each (R14, R16)."""

    splits: list[str] = Field(
        default_factory=lambda: ["probe"], min_length=1, description="Scored splits (R16)."
    )
    max_n: int | None = Field(
        default=None, ge=1, le=MAX_N, description="Cap on items scored per split, pack order (R14)."
    )
    attributes: list[str] | None = Field(
        default=None,
        description="Only fact items of these attributes are scored in P and relearned on (R2, R16).",
    )

    @field_validator("splits")
    @classmethod
    def _known_disjoint(cls, value: list[str]) -> list[str]:
        for name in value:
            if name not in SPLIT_NAMES:
                raise ValueError(f"unknown split {name!r}; a pack has {', '.join(SPLIT_NAMES)} (R16)")
            if name in TRAINING_SPLITS:
                raise ValueError(
                    f"split {name!r} installs, removes or relearns the target; P must be disjoint (R16)"
                )
        if len(set(value)) != len(value):
            raise ValueError("splits repeat (R16)")
        return value
