"""The three model states every cell is measured on: control, pre-removal θ and post-removal θ_U (R1-R3)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StringConstraints, model_validator

from remnant.config.fields import (
    DEVICE_PATTERN,
    MAX_BATCH,
    MAX_EPOCHS,
    MAX_LIST,
    MAX_LR,
    ConfigModel,
    Name,
    Params,
    RuleViolation,
    Text,
    Unit,
    compiled_patterns,
    require_one_of,
)
from remnant.hub import HUB_ID, REVISION


def _matching(pattern: re.Pattern[str], what: str) -> AfterValidator:
    # the pure pattern only: whether the repo is in the cache is checked before anything runs (preflight)
    def check(value: str) -> str:
        if pattern.fullmatch(value) is None or ".." in value:
            raise ValueError(f"{value!r} is not {what} (R2)")
        return value

    return AfterValidator(check)


HubId = Annotated[str, _matching(HUB_ID, "a hub id 'org/name'")]
Revision = Annotated[str, _matching(REVISION, "a branch, tag or commit name")]
#: A ``trainable`` selection of non-empty regexes, each of which compiles (:data:`remnant.config.fields.Patterns`).
TextPatterns = Annotated[list[Text], Field(max_length=MAX_LIST), AfterValidator(compiled_patterns)]


class HubSource(ConfigModel):
    """A model state that may be a Hugging Face Hub id (``hub``, at ``revision``) instead of a local folder:
    resolved through :func:`remnant.models.load.hub_model` (from the local cache offline, safetensors only, R2);
    the id and revision are pre-registered (R14), the snapshot's commit and weight digest recorded (R23)."""

    hub: HubId | None = Field(
        default=None,
        description="Hugging Face Hub model id 'org/name' (downloaded where the network allows, from the "
        "local cache with HF_HUB_OFFLINE=1; safetensors only) (R2).",
    )
    revision: Revision | None = Field(
        default=None,
        description="Branch, tag or commit of 'hub' (absent: the default branch); pre-registered (R14).",
    )

    def _one_source_of(self, where: str, first: str, second: str, rule: str) -> None:
        """Exactly one of ``first``, ``second`` and ``hub`` is set, and ``revision`` only beside ``hub``."""
        require_one_of(self, where, first, second, rule, also=("hub",))
        if self.revision is not None and self.hub is None:
            raise RuleViolation(f"{where}.revision", "only applies with 'hub'", "R2")

    def hub_source(self) -> dict[str, str | None] | None:
        """The hub id and revision this state names (pre-registered, R14), or None for another source."""
        return None if self.hub is None else {"hub": self.hub, "revision": self.revision}


class ControlModel(HubSource):
    """The never-modified control (R3): a zoo name, a local folder or a hub id."""

    zoo: str | None = Field(default=None, description="Name in remnant's model zoo (R3).")
    folder: str | None = Field(default=None, description="Local folder of a safetensors model (R3).")

    @model_validator(mode="after")
    def _one_source(self) -> ControlModel:
        self._one_source_of("models.control", "zoo", "folder", "R3")
        return self


class InstallBudget(ConfigModel):
    """Training budget that installs the target into the control to make θ (R2: installation)."""

    max_epochs: int = Field(
        ge=1, le=MAX_EPOCHS, description="Epoch ceiling of the installation run (R2, R23)."
    )
    lr: float = Field(gt=0, le=MAX_LR, description="Learning rate of the installation run (R2, R23).")
    target_kappa: Unit = Field(
        description="The installation target (R2): κ on the install split the pre-removal model must reach; "
        "training stops once it does unless stop_at_target is false."
    )
    stop_at_target: bool | None = Field(
        default=None,
        description="Stop training once κ reaches target_kappa (absent: true); false runs every epoch of "
        "max_epochs, and R2 then reads κ after the last one (R2, R23).",
    )
    batch_size: int = Field(default=8, ge=1, le=MAX_BATCH, description="Examples per optimiser step (R23).")
    trainable: TextPatterns | None = Field(
        default=None,
        description="Regexes of the parameter names that train (all: omitted); e.g. the upper decoder layers (R23).",
    )


class PreRemoval(HubSource):
    """The pre-removal model θ: installed here, or the claimant's folder or hub id (R2)."""

    install: InstallBudget | None = Field(default=None, description="Install the pack into the control (R2).")
    folder: str | None = Field(default=None, description="Claimant's pre-removal model folder (R2).")

    @model_validator(mode="after")
    def _one_source(self) -> PreRemoval:
        self._one_source_of("models.pre_removal", "install", "folder", "R2")
        return self


class PostRemoval(HubSource):
    """The post-removal model θ_U: a registered removal method run here, or the claimant's folder or hub id
    (R1c)."""

    method: Name | None = Field(default=None, description="Registered removal method name (R1c, R23).")
    params: Params = Field(default_factory=dict, description="Exact method parameters (R23, R24).")
    folder: str | None = Field(default=None, description="Claimant's post-removal model folder (R1b).")

    @model_validator(mode="after")
    def _one_source(self) -> PostRemoval:
        self._one_source_of("models.post_removal", "method", "folder", "R1c")
        if self.method is None and self.params:
            raise RuleViolation("models.post_removal.params", "only applies with 'method'", "R23")
        return self


class Models(ConfigModel):
    """The three model states every cell is measured on (R3)."""

    control: ControlModel = Field(description="Never-modified control (R3).")
    pre_removal: PreRemoval = Field(description="Pre-removal model θ (R2).")
    post_removal: PostRemoval = Field(description="Post-removal model θ_U (R1).")
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        default="float32", description="Evaluation precision; reductions are recorded (R25)."
    )
    device: Annotated[str, StringConstraints(pattern=DEVICE_PATTERN)] = Field(
        default="auto", description="Device to run on: auto, cpu, mps, cuda or cuda:N (R24)."
    )
    system_prompt: str | None = Field(
        default=None,
        description="System prompt of the chat format, identical on every state; None keeps the template's (R3).",
    )
