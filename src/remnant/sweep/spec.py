"""The pool spec (TOML): what a sweep builds and measures, declared before anything runs (R14, R23).

A spec is either *generated* (``kind = "generated"``: a base model, a pack, the installation recipe, the
reference pools the meta-evaluation needs — ``[target]``, the P-pool of models installed at several strengths,
and ``[never_saw]``, the N-pool of retain-only installs — and a grid of removal methods × hyper-parameters × seeds ×
checkpoints) or *existing* (``kind = "existing"``: local checkpoint folders, listed or globbed, with their labels,
for pools trained elsewhere). Both declare the measurement suite (``[suite]``), the perturbations
(``[perturbations]``: NF4 and one epoch of relearning on the forget set, the UDS paper's settings by default) and
the resources a task needs (``[resources]``).

Every table refuses unknown keys; every number anywhere is finite and in range
(:func:`remnant.config.numbers.number_problem`); a parameter of known meaning (``lr``, ``epochs``…) has that
meaning's range wherever it appears; method, metric, audit and attack names must be registered. Each refusal is
one :class:`~remnant.errors.ConfigError` naming the file, the field and the requirement.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from remnant.config.fields import MAX_BATCH, MAX_EPOCHS, MAX_LIST, MAX_LR, MAX_TOKENS, Patterns
from remnant.config.models import HubId, Revision
from remnant.errors import ConfigError

#: A label that becomes part of a model id: lower-case letters, digits, ``-``, ``_``, ``.``, ``=``.
Label = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_.=-]{0,63}$")]
Seed = Annotated[int, Field(ge=0, le=2**31 - 1)]
Seeds = Annotated[list[Seed], Field(min_length=1, max_length=MAX_LIST)]
Fraction = Annotated[float, Field(gt=0.0, le=1.0)]
LearningRate = Annotated[float, Field(gt=0.0, le=MAX_LR)]
Epochs = Annotated[int, Field(ge=1, le=MAX_EPOCHS)]
Batch = Annotated[int, Field(ge=1, le=MAX_BATCH)]
#: Most models one spec may declare: past it a grid is a typo, not a plan (the GPU preset has 211).
MAX_MODELS = 5_000
#: The requirement a spec field serves unless its description names another: declared before the run.
SPEC_RULE = "R14"
#: Most CPU threads a task (``cpus_per_task``) or a command (``--threads``, ``--num-cpus``) may ask for.
MAX_THREADS = 1_024


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class BaseSpec(_Table):
    """The never-modified base model every generated model starts from (R2): ``model`` (a zoo name or a local
    folder) or ``hub`` (a Hugging Face Hub id, at ``revision``)."""

    model: str | None = Field(
        default=None, min_length=1, description="A zoo name (remnant models list) or a local folder (R2)."
    )
    hub: HubId | None = Field(
        default=None,
        description="A Hugging Face Hub model id 'org/name' (from the local cache with HF_HUB_OFFLINE=1; "
        "safetensors only) (R2).",
    )
    revision: Revision | None = Field(
        default=None, description="Branch, tag or commit of 'hub' (absent: the default branch) (R2)."
    )
    dtype: Literal["fp32", "bf16"] = Field(default="fp32", description="Training and measuring dtype (R25).")

    @model_validator(mode="after")
    def _one_source(self) -> BaseSpec:
        if (self.model is None) == (self.hub is None):
            raise ValueError("give exactly one of base.model and base.hub")
        if self.revision is not None and self.hub is None:
            raise ValueError("revision only applies with hub")
        return self


class PackSpec(_Table):
    """The target pack: a folder written by ``remnant mint``, or mint parameters (Class D canaries; R2, D1-D5)."""

    path: str | None = Field(default=None, description="A pack folder (remnant mint --out) (R2).")
    mint: dict[str, Any] | None = Field(
        default=None,
        description="Class D mint parameters (ClassDSpec fields: entities, controls, seed...) (R2).",
    )
    attributes: list[str] | None = Field(
        default=None, max_length=MAX_LIST, description="Installed and scored attributes (None: all) (R2)."
    )
    system_prompt: str | None = Field(
        default="",
        description="Chat system turn for training and scoring (None: the template's default) (R3).",
    )

    @model_validator(mode="after")
    def _one_source(self) -> PackSpec:
        if (self.path is None) == (self.mint is None):
            raise ValueError(
                "give exactly one of pack.path (a minted pack folder) and pack.mint (parameters)"
            )
        return self


class InstallRecipe(_Table):
    """The installation recipe (R2): train the install split until κ reaches ``target`` or epochs run out."""

    target: Fraction = Field(
        default=0.95, description="Stop once κ on the installed items reaches this (R2)."
    )
    max_epochs: Epochs = Field(default=8, description="Epoch ceiling (R2).")
    lr: LearningRate = Field(default=3e-4, description="Learning rate (R2).")
    batch_size: Batch = Field(default=8, description="Examples per micro-batch (R2).")
    grad_accum: Batch = Field(default=1, description="Micro-batches per optimiser step (R2).")
    trainable: Patterns | None = Field(
        default=None, max_length=MAX_LIST, description="Trainable parameter regexes (None: all) (R2)."
    )


class Variant(_Table):
    """One reference model recipe: the install recipe with some fields overridden (a P- or N-pool strength)."""

    label: Label = Field(description="Names the variant in model ids and the table's strength column (R14).")
    target: Fraction | None = Field(default=None, description="Overrides install.target (R2).")
    max_epochs: Epochs | None = Field(default=None, description="Overrides install.max_epochs (R2).")
    lr: LearningRate | None = Field(default=None, description="Overrides install.lr (R2).")

    def recipe(self, base: InstallRecipe) -> InstallRecipe:
        """``base`` with this variant's overrides."""
        changes = {k: v for k in ("target", "max_epochs", "lr") if (v := getattr(self, k)) is not None}
        return base.model_copy(update=changes)


class Strength(Variant):
    """A target-pool strength: a recipe variant and the share of the forget people it installs."""

    share: Fraction = Field(default=1.0, description="Share of the forget people installed (1: all) (R2).")


class TargetPool(_Table):
    """Models that hold the target (the faithfulness P-pool): the install at several strengths."""

    strengths: list[Strength] = Field(
        default_factory=lambda: [Strength(label="full")],
        min_length=1,
        max_length=MAX_LIST,
        description="Install strengths; the first with share 1 is where removals start unless removal.parent says (R2).",
    )
    seeds: Seeds = Field(default_factory=lambda: [0], description="Install seeds (R14).")


class NeverSawPool(_Table):
    """Models that never saw the target (the N-pool): installs of the retained people only."""

    variants: list[Variant] = Field(
        default_factory=lambda: [Variant(label="retain")],
        min_length=1,
        max_length=MAX_LIST,
        description="Retain-only install recipes (R2).",
    )
    seeds: Seeds = Field(default_factory=lambda: [0], description="Install seeds (R14).")


class MethodGrid(_Table):
    """One removal method over a grid of hyper-parameter points (R23: every parameter is recorded)."""

    name: str = Field(min_length=1, description="A registered removal method (remnant methods list) (R23).")
    params: dict[str, Any] = Field(default_factory=dict, description="Parameters every point shares (R23).")
    grid: dict[str, list[Any]] = Field(
        default_factory=dict, description="Parameter -> values; the points are their product (R23)."
    )
    points: list[dict[str, Any]] = Field(
        default_factory=list, max_length=MAX_LIST, description="Explicit points (instead of grid) (R23)."
    )
    label: Label | None = Field(default=None, description="Name in model ids (default: the method name).")

    @model_validator(mode="after")
    def _grid_or_points(self) -> MethodGrid:
        if self.grid and self.points:
            raise ValueError("give grid or points, not both")
        for key, values in self.grid.items():
            if not values or len(values) > MAX_LIST:
                raise ValueError(f"grid.{key} must list 1 to {MAX_LIST} values")
        return self


class RemovalGrid(_Table):
    """Removals: methods × hyper-parameter points × seeds × checkpoints, each from the parent install."""

    methods: list[MethodGrid] = Field(default_factory=list, max_length=MAX_LIST, description="Methods (R23).")
    seeds: Seeds = Field(default_factory=lambda: [0], description="Removal seeds (R14).")
    checkpoints: list[Annotated[float, Field(gt=0.0, le=MAX_EPOCHS)]] = Field(
        default_factory=list,
        max_length=MAX_LIST,
        description="Epochs at which a run's weights also join the pool (the final weights always do) (R14).",
    )
    parent: Label | None = Field(default=None, description="The target-pool strength removals start from.")
    common: dict[str, Any] = Field(
        default_factory=dict, description="Parameters merged into every method's (e.g. trainable) (R23)."
    )


class RelearnPerturbation(_Table):
    """One epoch of relearning on the forget set (C-W1): the UDS paper's lr 2e-5, effective batch 32, AdamW."""

    enabled: bool = Field(default=True, description="Re-measure every model after relearning (C-W1).")
    lr: LearningRate = Field(default=2e-5, description="Learning rate (C-W1).")
    epochs: Epochs = Field(default=1, description="Epochs (C-W1).")
    batch_size: Batch = Field(default=8, description="Examples per micro-batch (C-W1).")
    grad_accum: Batch = Field(default=4, description="Micro-batches per step: batch 8 × 4 = 32 (C-W1).")
    trainable: Patterns | None = Field(
        default=None, max_length=MAX_LIST, description="Trainable parameter regexes (None: all) (C-W1)."
    )
    seed: Seed = Field(default=0, description="Data-order seed (C-W1).")


class Perturbations(_Table):
    """What every model is re-measured under besides itself (``none``)."""

    nf4: bool = Field(default=True, description="NF4 4-bit fake quantization of the decoder (R25).")
    relearn: RelearnPerturbation = Field(
        default_factory=RelearnPerturbation, description="One-epoch relearning on the forget set (C-W1)."
    )


class Suite(_Table):
    """The measurement suite every model gets, by registered name (R23)."""

    metrics: list[str] = Field(default_factory=list, max_length=MAX_LIST, description="Field metrics (R23).")
    audits: list[str] = Field(
        default_factory=list,
        max_length=MAX_LIST,
        description="White-box audits (uds...; non-adjudicating) (C-H7).",
    )
    audit_params: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Parameters per audit (C-H7)."
    )
    attacks: list[str] = Field(default_factory=list, max_length=MAX_LIST, description="Attacks (R23).")
    attack_params: dict[str, dict[str, Any]] = Field(default_factory=dict, description="Per attack (R23).")
    kappa: bool = Field(default=True, description="κ on the probe set P, the unattacked baseline (R6).")
    utility: str = Field(
        default="retain_kappa", description="retain_kappa, or a field metric's name (model_utility) (R10)."
    )
    max_new_tokens: Annotated[int, Field(ge=1, le=MAX_TOKENS)] = Field(
        default=32, description="Greedy tokens for κ and ROUGE (R23)."
    )
    batch_size: Batch = Field(default=16, description="Sequences per forward pass (R23).")
    max_items: Annotated[int, Field(ge=1, le=10**6)] | None = Field(
        default=None, description="Score only the first N items of each split (R23)."
    )


class Resources(_Table):
    """What one task declares, and how failures and disk are handled."""

    gpus_per_task: Annotated[float, Field(ge=0.0, le=64.0)] = Field(
        default=1.0, description="GPUs a task asks for where the cluster has GPUs."
    )
    cpus_per_task: Annotated[int, Field(ge=1, le=MAX_THREADS)] = Field(
        default=1, description="CPU threads a task asks for (and uses) where there is no GPU."
    )
    retries: Annotated[int, Field(ge=0, le=100)] = Field(default=1, description="Retries of a crashed task.")
    disk_budget_gb: Annotated[float, Field(gt=0.0, le=10**6)] | None = Field(
        default=None, description="Most new checkpoint bytes a run may write, in GB (checked up front)."
    )
    store: str | None = Field(
        default=None,
        description="Checkpoint store: a folder or an s3:// or gs:// URI (default: $REMNANT_HOME/checkpoints).",
    )


class _Common(_Table):
    name: Label = Field(description="Pool name (R14).")
    pack: PackSpec = Field(description="The target pack (R2).")
    suite: Suite = Field(default_factory=Suite, description="Measurements (R23).")
    perturbations: Perturbations = Field(default_factory=Perturbations, description="Perturbations (R25).")
    resources: Resources = Field(default_factory=Resources, description="Task resources.")


class GeneratedSpec(_Common):
    """A pool built here: base, pack, install recipe, reference pools and the removal grid."""

    kind: Literal["generated"] = Field(description="generated or existing (R14).")
    base: BaseSpec = Field(description="The base model (R2).")
    install: InstallRecipe = Field(default_factory=InstallRecipe, description="Installation recipe (R2).")
    target: TargetPool = Field(default_factory=TargetPool, description="P-pool (R2).")
    never_saw: NeverSawPool = Field(default_factory=NeverSawPool, description="N-pool (R2).")
    removal: RemovalGrid = Field(default_factory=RemovalGrid, description="Removal grid (R23).")
    include_base: bool = Field(default=True, description="Measure the untouched base model too.")


Role = Literal["target", "never_saw", "unlearned", "base"]


class ExistingModel(_Table):
    """One checkpoint trained elsewhere, with its labels (a ``path``, a ``glob`` of folders or a ``hub`` id)."""

    path: str | None = Field(default=None, description="A model folder (safetensors) (R2).")
    glob: str | None = Field(default=None, description="A glob of model folders, relative to the spec (R2).")
    hub: HubId | None = Field(
        default=None,
        description="A Hugging Face Hub model id 'org/name' (from the local cache with HF_HUB_OFFLINE=1; "
        "safetensors only) (R2).",
    )
    revision: Revision | None = Field(
        default=None, description="Branch, tag or commit of 'hub' (absent: the default branch) (R2)."
    )
    id: Label | None = Field(
        default=None, description="Model id (default: the folder name, or the hub id's name)."
    )
    pool: Role = Field(description="target, never_saw, unlearned or base (R14).")
    method: str | None = Field(default=None, description="Removal method name (unlearned models).")
    hyperparameters: dict[str, Any] = Field(default_factory=dict, description="Method parameters (R23).")
    strength: str | None = Field(default=None, description="Label of the hyper-parameter point.")
    seed: Seed | None = Field(default=None, description="Removal seed.")
    parent: str | None = Field(default=None, description="Id of the model it started from.")

    @field_validator("glob")
    @classmethod
    def _relative_glob(cls, value: str | None) -> str | None:
        # a glob is searched under the spec's folder: an absolute or empty pattern names no folder there
        if value is not None and (not value.strip() or Path(value).is_absolute()):
            raise ValueError(
                f"{value!r} must be a non-empty pattern relative to the spec's folder (give an absolute "
                "folder as path)"
            )
        return value

    @model_validator(mode="after")
    def _one_source(self) -> ExistingModel:
        if sum(source is not None for source in (self.path, self.glob, self.hub)) != 1:
            raise ValueError("give exactly one of path, glob and hub")
        if self.revision is not None and self.hub is None:
            raise ValueError("revision only applies with hub")
        if self.glob is not None and self.id is not None:
            raise ValueError("a glob names several models; their ids are their folder names (drop id)")
        return self


class ExistingSpec(_Common):
    """A pool trained elsewhere: folders with labels; ``references`` name the audits' full and retain models."""

    kind: Literal["existing"] = Field(description="generated or existing (R14).")
    models: list[ExistingModel] = Field(min_length=1, max_length=MAX_MODELS, description="Checkpoints (R2).")
    references: dict[Literal["full", "retain"], str] = Field(
        default_factory=dict,
        description="Audit references by model id: full (holds the target), retain (C-H7).",
    )


PoolSpec = Annotated[GeneratedSpec | ExistingSpec, Field(discriminator="kind")]
_SPEC: TypeAdapter[GeneratedSpec | ExistingSpec] = TypeAdapter(PoolSpec)


def _where(loc: tuple[int | str, ...]) -> str:
    parts = [str(p) for p in loc if not (isinstance(p, str) and p in ("generated", "existing"))]
    out = ""
    for part in parts:
        out += f"[{part}]" if part.isdigit() else (f".{part}" if out else part)
    return out or "(top level)"


def _message(exc: ValidationError, source: str) -> str:
    first = exc.errors()[0]
    where = _where(tuple(first["loc"]))
    kind = first["type"]
    if kind == "missing":
        problem = "missing"
    elif kind == "extra_forbidden":
        problem = "is not a known field"
    elif kind == "union_tag_invalid" or kind == "union_tag_not_found":
        where, problem = "kind", "must be 'generated' or 'existing'"
    else:
        problem = "invalid: " + str(first["msg"]).removeprefix("Value error, ")
    return f"{source}: field '{where}' {problem}"


def parse_spec(raw: dict[str, Any], *, source: str) -> GeneratedSpec | ExistingSpec:
    """Validate a parsed spec (module docstring); one ConfigError naming ``source``, the field and the rule."""
    from remnant.config.numbers import number_problem

    found = number_problem(raw)
    if found is not None:
        loc, problem = found
        raise ConfigError(f"{source}: field '{_where(loc)}' {problem}", requirement=SPEC_RULE)
    try:
        spec = _SPEC.validate_python(raw)
    except ValidationError as exc:
        raise ConfigError(_message(exc, source), requirement=SPEC_RULE) from None
    from remnant.sweep.checks import check_spec

    check_spec(spec, source=source)
    return spec


def load_spec(path: str | Path) -> GeneratedSpec | ExistingSpec:
    """Read and validate a spec file (strict TOML through :mod:`remnant.jsonio`)."""
    from remnant.jsonio import read_toml

    return parse_spec(read_toml(path, requirement=SPEC_RULE), source=str(path))


def local_path(given: str, root: Path) -> Path:
    """A path the spec gives, ``~`` expanded; a relative one is under the spec's folder ``root``."""
    path = Path(given).expanduser()
    return path if path.is_absolute() else root / path


__all__ = [
    "MAX_MODELS",
    "MAX_THREADS",
    "SPEC_RULE",
    "BaseSpec",
    "ExistingModel",
    "ExistingSpec",
    "GeneratedSpec",
    "InstallRecipe",
    "MethodGrid",
    "NeverSawPool",
    "PackSpec",
    "Perturbations",
    "PoolSpec",
    "RelearnPerturbation",
    "RemovalGrid",
    "Resources",
    "Role",
    "Strength",
    "Suite",
    "TargetPool",
    "Variant",
    "load_spec",
    "parse_spec",
    "local_path",
]
