"""The Class D insignificance bar and the battery that measures against it (D-2 to D-5.3, D4)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from remnant.config.fields import MAX_LIST, MAX_N, MAX_TOKENS, MIN_THRESHOLD, ConfigModel, Text


class ClassDBattery(ConfigModel):
    """The Class D battery the assessment runs (§5): singling out, linkability, inference, each net of
    never-installed control entities, on the post-removal model and the control alike (D-2 to D-5.3, D4)."""

    identifier: str = Field(
        default="staff_code", description="Uniquely identifying attribute singling out elicits (D-2.1)."
    )
    context_attribute: str = Field(
        default="employer", description="Attribute given with the name as partial context (D-2.1)."
    )
    linkability_likelihood: bool = Field(
        default=True, description="Score linkage by option likelihood (D-3.1)."
    )
    linkability_generation: bool = Field(
        default=True, description="Score linkage by generation and under each attack (D-3.1)."
    )
    attacks: list[str] | None = Field(
        default=None,
        description="Declared inference-time attack tables the battery runs under; default every one (D-2.1).",
    )
    relearning: bool = Field(
        default=True, description="W-track: relearn on R and score the battery at every checkpoint (D-5.3)."
    )
    relearning_budgets: list[Annotated[int, Field(ge=1, le=MAX_N)]] | None = Field(
        default=None,
        max_length=MAX_LIST,
        description="Subset of attacks.relearning.budgets the battery relearns at (D-5.3).",
    )
    max_new_tokens: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TOKENS,
        description="Generation length of the battery's direct queries (D-2.2).",
    )


class ClassD(ConfigModel):
    """The Class D insignificance bar, declared before the run (D-5.1, D-5.2)."""

    insignificance_threshold: float = Field(
        ge=MIN_THRESHOLD, lt=1, description="Upper-bound bar for each rate (D-5.1)."
    )
    justification: Text = Field(description="Why this threshold is insignificant (D-5.2).")
    battery: ClassDBattery | None = Field(
        default=None, description="Run the singling-out, linkability and inference battery (D-5.1)."
    )
