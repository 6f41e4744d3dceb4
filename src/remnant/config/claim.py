"""The written claim and how its target is fixed: a pack minted or named here, or documented provenance (R1, R2)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from remnant.config.fields import MAX_SEED, ConfigModel, RuleViolation, Text, require_one_of
from remnant.packs.classd import MAX_ENTITIES, MAX_REPETITIONS


class Claim(ConfigModel):
    """The written removal claim the assessment begins from (R1 a-d)."""

    statement: Text = Field(description="The removal claim, verbatim, as the claimant makes it (R1).")
    target: Text = Field(description="(a) What was to be removed (R1a).")
    model: Text = Field(description="(b) From which model and version (R1b).")
    process: Text = Field(description="(c) By what process it was removed (R1c).")
    audience: Text = Field(description="(d) To whom the claim is or will be made (R1d).")


class MintSpec(ConfigModel):
    """A pack to mint per assessment (R18: minted per assessment and held privately)."""

    pack_class: Literal["C", "D"] = Field(alias="class", description="Class of the minted pack (R2).")
    entities: int = Field(
        ge=1, le=MAX_ENTITIES, description="Installed canary entities (D) or fictional items (C) (R2, D3)."
    )
    controls: int = Field(
        default=100, ge=0, le=MAX_ENTITIES, description="Never-installed control entities (D4)."
    )
    repetitions: int = Field(
        default=3, ge=1, le=MAX_REPETITIONS, description="Repetitions in the installation set (D5)."
    )
    seed: int | None = Field(
        default=None, ge=0, le=MAX_SEED, description="Mint seed; derived from seeds.master if absent (R23)."
    )

    @model_validator(mode="after")
    def _mintable(self) -> MintSpec:
        # mint_class_d's own floor, so a config frozen by preregister can be minted by assess (D4)
        if self.pack_class == "D" and self.entities < 4:
            raise RuleViolation("target.mint.entities", f"is {self.entities}; class D mints at least 4", "D4")
        if self.pack_class == "D" and self.controls < 1:
            raise RuleViolation("target.mint.controls", "is 0; class D mints at least 1 control entity", "D4")
        return self


class Target(ConfigModel):
    """How the removal target is fixed: installation of a pack, or documented provenance (R2)."""

    pack: str | None = Field(default=None, description="Folder of an already minted pack (R2).")
    mint: MintSpec | None = Field(default=None, description="Mint a fresh pack with this spec (R2, R18).")
    provenance: Text | None = Field(
        default=None, description="Documented provenance of a target not installed here (R2)."
    )
    ground_truth: bool = Field(
        default=True, description="A ground-truth standard of correctness exists for the target (R7)."
    )

    @model_validator(mode="after")
    def _one_source(self) -> Target:
        require_one_of(self, "target", "pack", "mint", "R2")
        if self.mint is not None and not self.ground_truth:
            raise RuleViolation("target.ground_truth", "is true for every minted pack", "R7")
        return self
