"""The assessment configuration: a TOML file read into pydantic models (DESIGN §1, docs/config.md).

Every field's description ends with the requirement it serves, e.g. ``(R7)``; :func:`load_config` turns any
problem into one :class:`~remnant.errors.ConfigError` naming the file, the dotted field and that requirement::

    config.toml: field 'claim.process' missing (R1c)

Paths inside the file (pack folder, model folders, signing key) are kept as written and resolved against the
config file's folder by :meth:`AssessmentConfig.resolve`; whether they exist is checked by the stage that uses
them, so a config can be validated and pre-registered on a machine that holds no model.

``trust_remote_code`` is refused wherever it appears (issue 3): remnant never runs code shipped with a model.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from remnant import STANDARD_VERSION
from remnant.errors import ConfigError
from remnant.packs.schema import SPLIT_NAMES
from remnant.statement.canonical import canonical_json

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Name = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$")]
Params = dict[str, Any]
Unit = Annotated[float, Field(ge=0.0, le=1.0)]

#: Largest master seed: seeds travel through canonical JSON, which holds integers up to 2**53 (RFC 8785, I-JSON).
MAX_SEED = 2**53 - 1

#: Inference-time attacks C-Q1 requires on both tracks, wherever each is defined for the response format.
REQUIRED_INFERENCE_ATTACKS: tuple[str, ...] = ("prefill", "many_shot", "repeated_sampling")

#: Splits that install, remove or relearn the target: never scored as P (R16, C-W6).
TRAINING_SPLITS: frozenset[str] = frozenset({"install", "removal", "relearn"})

#: Top-level config keys frozen by pre-registration (R14), beside ``target`` less its folder path.
PREREGISTERED_KEYS: tuple[str, ...] = (
    "claim",
    "class",
    "track",
    "gating_metric",
    "gating_justification",
    "tau",
    "utility",
    "probe",
    "attacks",
    "min_n",
    "evidence_rule",
    "seeds",
    "class_d",
    "preset",
)

#: Values a preset fills in where the file leaves them out, so the frozen pre-registration is concrete (R14).
PRESETS: dict[str, dict[str, Any]] = {
    "quick": {
        "min_n": 30,
        "probe.max_n": 60,
        "relearning.budgets": [8, 16],
        "relearning.max_epochs": 2,
        "relearning.first_epoch_checkpoints": [0.5],
    },
    "default": {
        "min_n": 100,
        "probe.max_n": None,
        "relearning.budgets": [8, 16, 32, 64],
        "relearning.max_epochs": 5,
        "relearning.first_epoch_checkpoints": [0.25, 0.5, 0.75],
    },
}


class RuleViolation(ValueError):
    """A cross-field rule a model validator enforces; carries the dotted field and requirement id."""

    def __init__(self, field: str, message: str, rule: str) -> None:
        super().__init__(f"field '{field}' {message} ({rule})")
        self.field, self.message, self.rule = field, message, rule


class _Model(BaseModel):
    # strict: a quoted number in the TOML is a mistake to report, not a value to coerce.
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, strict=True)


class Claim(_Model):
    """The written removal claim the assessment begins from (R1 a-d)."""

    statement: Text = Field(description="The removal claim, verbatim, as the claimant makes it (R1).")
    target: Text = Field(description="(a) What was to be removed (R1a).")
    model: Text = Field(description="(b) From which model and version (R1b).")
    process: Text = Field(description="(c) By what process it was removed (R1c).")
    audience: Text = Field(description="(d) To whom the claim is or will be made (R1d).")


class MintSpec(_Model):
    """A pack to mint per assessment (R18: minted per assessment and held privately)."""

    pack_class: Literal["C", "D"] = Field(alias="class", description="Class of the minted pack (R2).")
    entities: int = Field(ge=1, description="Installed canary entities (D) or fictional items (C) (R2, D3).")
    controls: int = Field(default=100, ge=0, description="Never-installed control entities (D4).")
    repetitions: int = Field(default=3, ge=1, description="Repetitions in the installation set (D5).")
    seed: int | None = Field(
        default=None, ge=0, le=MAX_SEED, description="Mint seed; derived from seeds.master if absent (R23)."
    )


class Target(_Model):
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
        if (self.pack is None) == (self.mint is None):
            raise RuleViolation("target", "must name exactly one of 'pack' or 'mint'", "R2")
        if self.mint is not None and not self.ground_truth:
            raise RuleViolation("target.ground_truth", "is true for every minted pack", "R7")
        return self


class ControlModel(_Model):
    """The never-modified control (R3): a zoo name or a local folder."""

    zoo: str | None = Field(default=None, description="Name in remnant's model zoo (R3).")
    folder: str | None = Field(default=None, description="Local folder of a safetensors model (R3).")

    @model_validator(mode="after")
    def _one_source(self) -> ControlModel:
        if (self.zoo is None) == (self.folder is None):
            raise RuleViolation("models.control", "must name exactly one of 'zoo' or 'folder'", "R3")
        return self


class InstallBudget(_Model):
    """Training budget that installs the target into the control to make θ (R2: installation)."""

    max_epochs: int = Field(ge=1, description="Epoch ceiling of the installation run (R2, R23).")
    lr: float = Field(gt=0, description="Learning rate of the installation run (R2, R23).")
    target_kappa: Unit = Field(description="Stop once κ on the install split reaches this (R2).")
    batch_size: int = Field(default=8, ge=1, description="Examples per optimiser step (R23).")
    trainable: list[Text] | None = Field(
        default=None,
        description="Regexes of the parameter names that train (all: omitted); e.g. the upper decoder layers (R23).",
    )

    @field_validator("trainable")
    @classmethod
    def _patterns_compile(cls, value: list[str] | None) -> list[str] | None:
        for pattern in value or []:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {pattern!r} ({exc})") from exc
        return value


class PreRemoval(_Model):
    """The pre-removal model θ: installed here, or the claimant's folder (R2)."""

    install: InstallBudget | None = Field(default=None, description="Install the pack into the control (R2).")
    folder: str | None = Field(default=None, description="Claimant's pre-removal model folder (R2).")

    @model_validator(mode="after")
    def _one_source(self) -> PreRemoval:
        if (self.install is None) == (self.folder is None):
            raise RuleViolation("models.pre_removal", "must name exactly one of 'install' or 'folder'", "R2")
        return self


class PostRemoval(_Model):
    """The post-removal model θ_U: a registered removal method run here, or the claimant's folder (R1c)."""

    method: Name | None = Field(default=None, description="Registered removal method name (R1c, R23).")
    params: Params = Field(default_factory=dict, description="Exact method parameters (R23, R24).")
    folder: str | None = Field(default=None, description="Claimant's post-removal model folder (R1b).")

    @model_validator(mode="after")
    def _one_source(self) -> PostRemoval:
        if (self.method is None) == (self.folder is None):
            raise RuleViolation("models.post_removal", "must name exactly one of 'method' or 'folder'", "R1c")
        if self.folder is not None and self.params:
            raise RuleViolation("models.post_removal.params", "only applies with 'method'", "R23")
        return self


class Models(_Model):
    """The three model states every cell is measured on (R3)."""

    control: ControlModel = Field(description="Never-modified control (R3).")
    pre_removal: PreRemoval = Field(description="Pre-removal model θ (R2).")
    post_removal: PostRemoval = Field(description="Post-removal model θ_U (R1).")
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        default="float32", description="Evaluation precision; reductions are recorded (R25)."
    )
    device: Annotated[str, StringConstraints(pattern=r"^(auto|cpu|mps|cuda(:\d+)?)$")] = Field(
        default="auto", description="Device to run on: auto, cpu, mps, cuda or cuda:N (R24)."
    )
    system_prompt: str | None = Field(
        default=None,
        description="System prompt of the chat format, identical on every state; None keeps the template's (R3).",
    )


class Utility(_Model):
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


class Probe(_Model):
    """Which pack splits are scored as P, and how many items of each (R14, R16)."""

    splits: list[str] = Field(
        default_factory=lambda: ["probe"], min_length=1, description="Scored splits (R16)."
    )
    max_n: int | None = Field(
        default=None, ge=1, description="Cap on items scored per split, pack order (R14)."
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


class Attack(_Model):
    """One attack: enabled or not (with the reason), and its exact parameters (C-Q1, C-Q2, R14)."""

    enabled: bool = Field(default=True, description="Whether the attack runs (C-Q1).")
    reason: Text | None = Field(default=None, description="Why a disabled attack does not run (C-Q2).")
    params: Params = Field(default_factory=dict, description="Exact attack parameters and budget (R14).")


class Relearning(_Model):
    """The weight-access relearning attack (C-W1..C-W6), run identically on the control (C-W5)."""

    enabled: bool = Field(default=True, description="Whether relearning runs; required on W-track (C1).")
    reason: Text | None = Field(default=None, description="Why relearning does not run (C-Q2).")
    budgets: list[Annotated[int, Field(ge=1)]] = Field(
        min_length=1, description="Relearning set sizes (C-W1, C-W2)."
    )
    lr: float = Field(gt=0, description="Relearning learning rate (C-W1).")
    max_epochs: int = Field(ge=1, description="Epoch ceiling; g is scored after every epoch (C-W1, C-W3).")
    batch_size: int = Field(
        default=4, ge=1, description="Examples per optimiser step, identical on both models (C-W5)."
    )
    first_epoch_checkpoints: list[Annotated[float, Field(gt=0, lt=1)]] = Field(
        min_length=1, description="Fractions of the first epoch at which g is also scored (C-W3)."
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


class Attacks(_Model):
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
        for name in REQUIRED_INFERENCE_ATTACKS:
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


class ClassDBattery(_Model):
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
    relearning_budgets: list[int] | None = Field(
        default=None, description="Subset of attacks.relearning.budgets the battery relearns at (D-5.3)."
    )
    max_new_tokens: int | None = Field(
        default=None, ge=1, description="Generation length of the battery's direct queries (D-2.2)."
    )


class ClassD(_Model):
    """The Class D insignificance bar, declared before the run (D-5.1, D-5.2)."""

    insignificance_threshold: float = Field(gt=0, lt=1, description="Upper-bound bar for each rate (D-5.1).")
    justification: Text = Field(description="Why this threshold is insignificant (D-5.2).")
    battery: ClassDBattery | None = Field(
        default=None, description="Run the singling-out, linkability and inference battery (D-5.1)."
    )


class Seeds(_Model):
    """One master seed; every stage derives its own with :func:`derive_seed` (R23, R24)."""

    master: int = Field(ge=0, le=MAX_SEED, description="Master seed all stage seeds derive from (R23).")


class Signing(_Model):
    """Optional signing of the statement (K5)."""

    key: str | None = Field(default=None, description="Ed25519 private key file; unsigned if absent (K5).")


class AssessmentConfig(_Model):
    """A whole assessment config. Build it with :func:`load_config` for file-and-field error messages."""

    claim: Claim = Field(description="The written removal claim (R1).")
    claim_class: Literal["C", "D"] = Field(alias="class", description="Claim class (R0.1, K2).")
    track: Literal["W", "Q"] = Field(description="Access track, declared before the run (R0.1).")
    target: Target = Field(description="How the target is fixed (R2).")
    models: Models = Field(description="Control, pre-removal and post-removal models (R3).")
    gating_metric: Literal["kappa", "w"] = Field(description="The metric g that gates the verdict (R7).")
    gating_justification: Text = Field(description="Why g is the right gating metric (R7).")
    tau: float = Field(gt=0, le=1, description="Threshold τ at or above which the target is present (R14).")
    utility: Utility = Field(description="Utility metric and floor (R9).")
    probe: Probe = Field(default_factory=Probe, description="Scored probe sets (R14, R16).")
    attacks: Attacks = Field(description="Attack battery and budgets (R14, C-Q1, C-W1).")
    min_n: int = Field(ge=1, description="Minimum evaluation-set size per cell (R21).")
    evidence_rule: Literal["point", "bounds"] = Field(
        default="point", description="How hidden is read: point rates or interval bounds (V1)."
    )
    seeds: Seeds = Field(description="The master seed (R23).")
    class_d: ClassD | None = Field(
        default=None, description="Insignificance bar; required for class D (D-5.1)."
    )
    signing: Signing = Field(default_factory=Signing, description="Statement signing (K5).")
    preset: Literal["quick", "default"] = Field(default="default", description="Sizing preset (R21).")

    _base_dir: Path = PrivateAttr(default_factory=Path.cwd)
    _source: Path | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _apply_preset(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        # An unknown preset is reported by the Literal check; fill from "default" so it is the only error.
        preset = PRESETS.get(str(data.get("preset", "default")), PRESETS["default"])
        out = dict(data)
        out.setdefault("min_n", preset["min_n"])
        if isinstance(out.get("probe", {}), dict):
            out["probe"] = {"max_n": preset["probe.max_n"], **out.get("probe", {})}
        attacks = out.get("attacks")
        if isinstance(attacks, dict) and isinstance(attacks.get("relearning"), dict):
            fills = {k.split(".", 1)[1]: v for k, v in preset.items() if k.startswith("relearning.")}
            out["attacks"] = {**attacks, "relearning": {**fills, **attacks["relearning"]}}
        return out

    @model_validator(mode="after")
    def _cross_field_rules(self) -> AssessmentConfig:
        mint = self.target.mint
        if mint is not None and mint.pack_class != self.claim_class:
            raise RuleViolation(
                "target.mint.class", f"is {mint.pack_class} but the claim is class {self.claim_class}", "R2"
            )
        if self.models.pre_removal.folder is not None and self.target.provenance is None:
            raise RuleViolation(
                "target.provenance",
                "missing: a claimant's pre-removal model fixes the target only by documented provenance",
                "R2",
            )
        if self.gating_metric == "w" and (self.target.ground_truth or self.claim_class == "D"):
            raise RuleViolation(
                "gating_metric",
                "is 'w' but a ground-truth standard of correctness exists for this target, so g must be 'kappa'",
                "R7",
            )
        relearning = self.attacks.relearning
        relearns = relearning is not None and relearning.enabled
        if self.track == "Q" and relearns:
            raise RuleViolation("attacks.relearning", "is a W-track surface; a Q-track run claims none", "C2")
        if self.track == "W" and not relearns:
            rule = "D-5.3" if self.claim_class == "D" else "C1"
            raise RuleViolation("attacks.relearning", "missing or disabled: a W-track run must relearn", rule)
        if self.claim_class == "D" and self.class_d is None:
            raise RuleViolation("class_d", "missing: class D declares its insignificance threshold", "D-5.1")
        if self.claim_class == "C" and self.class_d is not None:
            raise RuleViolation("class_d", "applies only to class D claims", "D-5.1")
        battery = self.class_d.battery if self.class_d is not None else None
        if battery is not None:
            unknown = sorted(set(battery.attacks or ()) - set(self.attacks.named()))
            if unknown:
                raise RuleViolation(
                    "class_d.battery.attacks", f"names {unknown}, not declared under [attacks]", "D-2.1"
                )
            declared = relearning.budgets if relearning is not None else []
            extra = sorted(set(battery.relearning_budgets or ()) - set(declared))
            if extra:
                raise RuleViolation(
                    "class_d.battery.relearning_budgets",
                    f"{extra} not among attacks.relearning.budgets {declared}",
                    "D-5.3",
                )
        if self.probe.max_n is not None and self.probe.max_n < self.min_n:
            raise RuleViolation("probe.max_n", f"({self.probe.max_n}) is below min_n ({self.min_n})", "R21")
        return self

    def mint_seed(self) -> int:
        """The seed a minted pack uses: ``target.mint.seed`` or one derived from the master seed (R23)."""
        mint = self.target.mint
        if mint is not None and mint.seed is not None:
            return mint.seed
        return derive_seed(self.seeds.master, "mint")

    def resolve(self, path: str) -> Path:
        """``path`` from the file, resolved against the config file's folder (absolute paths kept)."""
        p = Path(path).expanduser()
        return p if p.is_absolute() else self._base_dir / p

    @property
    def source(self) -> Path | None:
        """The file this config was read from, if any (named in later errors)."""
        return self._source


def derive_seed(master: int, *path: str | int) -> int:
    """The seed of one stage or item, derived from the master seed (DESIGN §1: no global seeding; R23, R24).

    ``sha256(canonical_json([master, *path]))``, first 8 bytes big-endian, shifted right by 11 bits: an integer in
    ``[0, 2**53)``, so it survives JSON (I-JSON) and seeds ``random.Random``, ``numpy`` and ``torch.Generator``
    alike. ``derive_seed(7, "relearn", "budget=16")`` names its stage by path; ``1`` and ``"1"`` differ.
    """
    digest = hashlib.sha256(canonical_json([master, *path])).digest()
    return int.from_bytes(digest[:8], "big") >> 11


def preregistered(cfg: AssessmentConfig) -> dict[str, Any]:
    """The values R14 freezes (plus the claim, class, track, seeds, evidence rule and D-5.1 bar), as JSON.

    Models, dtype, device, signing and pack folder paths are left out: they say where things are, not what is
    claimed or measured, and model identity is recorded by weight digest elsewhere (R23).
    """
    dump = cfg.model_dump(mode="json", by_alias=True)
    target = {k: v for k, v in dump["target"].items() if k != "pack"}
    out = {key: dump[key] for key in PREREGISTERED_KEYS}
    out["target"] = target
    # Optional tables added after the first release are left out while unset, so a config that does not use
    # them keeps the digest it always had (R14); an absent field reads as null when values are compared.
    if out["probe"].get("attributes") is None:
        out["probe"] = {k: v for k, v in out["probe"].items() if k != "attributes"}
    if out.get("class_d") is not None and out["class_d"].get("battery") is None:
        out["class_d"] = {k: v for k, v in out["class_d"].items() if k != "battery"}
    out["standard_version"] = STANDARD_VERSION
    return out


def config_digest(cfg: AssessmentConfig) -> str:
    """``sha256:`` + hex sha256 of the canonical JSON (RFC 8785) of :func:`preregistered` (R14)."""
    return "sha256:" + hashlib.sha256(canonical_json(preregistered(cfg))).hexdigest()


# ── loading ──────────────────────────────────────────────────────────────────────────────────────────────────

_RULE_AT_END = re.compile(r"\(([^()]*)\)\.?$")


def _field_rule(loc: tuple[str | int, ...]) -> str | None:
    """The requirement id at the end of the description of the field at ``loc`` (deepest one that has one)."""
    model: type[BaseModel] | None = AssessmentConfig
    rule: str | None = None
    for part in loc:
        if model is None or not isinstance(part, str):
            continue
        fields = {(f.alias or n): f for n, f in model.model_fields.items()}
        info = fields.get(part)
        if info is None:
            if model is Attacks:  # an open attack table: an Attack
                model, rule = Attack, "R14"
            continue
        match = _RULE_AT_END.search(info.description or "")
        if match:
            rule = match.group(1).split(",")[0].split(";")[0].strip()
        annotation = info.annotation
        model = next(
            (
                a
                for a in getattr(annotation, "__args__", (annotation,))
                if isinstance(a, type) and issubclass(a, BaseModel)
            ),
            None,
        )
    return rule


def _dotted(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _describe(error: Any) -> tuple[str, str | None]:
    """One pydantic error as ``field '…' problem (rule)`` and its rule id."""
    ctx_error = (error.get("ctx") or {}).get("error")
    if isinstance(ctx_error, RuleViolation):
        return str(ctx_error), ctx_error.rule
    loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    field, rule = _dotted(loc) or "(top level)", _field_rule(loc)
    kind = error["type"]
    if kind == "missing":
        problem = "missing"
    elif kind == "extra_forbidden":
        problem = "is not a known field"
    elif kind == "string_too_short":
        problem = "must not be empty"
    else:
        problem = "invalid: " + str(error["msg"]).removeprefix("Value error, ")
    stated = _RULE_AT_END.search(problem)
    if stated:  # a validator named the rule itself: it is more precise than the field's
        return f"field '{field}' {problem}", stated.group(1)
    suffix = f" ({rule})" if rule else ""
    return f"field '{field}' {problem}{suffix}", rule


def _find_remote_code(value: Any, where: str) -> str | None:
    """Dotted location of any ``trust_remote_code`` key or string value (issue 3), or None."""
    if isinstance(value, dict):
        for key, sub in value.items():
            here = f"{where}.{key}" if where else str(key)
            if "trust_remote_code" in str(key).lower():
                return here
            found = _find_remote_code(sub, here)
            if found:
                return found
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            found = _find_remote_code(sub, f"{where}[{i}]")
            if found:
                return found
    elif isinstance(value, str) and "trust_remote_code" in value.lower():
        return where or "(top level)"
    return None


def parse_config(
    raw: dict[str, Any], *, source: str = "<config>", base_dir: Path | None = None
) -> AssessmentConfig:
    """Validate an already-parsed config mapping; ConfigError names ``source``, the field and the rule."""
    remote = _find_remote_code(raw, "")
    if remote is not None:
        raise ConfigError(
            f"{source}: 'trust_remote_code' at '{remote}' is refused: remnant never runs code shipped with a model"
        )
    try:
        cfg = AssessmentConfig.model_validate(raw)
    except ValidationError as exc:
        described = [_describe(e) for e in exc.errors()]
        lines = [text for text, _ in described]
        rule = described[0][1]
        if len(lines) == 1:
            raise ConfigError(f"{source}: {lines[0]}", requirement=rule) from None
        body = "\n".join(f"  {line}" for line in lines)
        raise ConfigError(f"{source}: {len(lines)} problems:\n{body}", requirement=rule) from None
    cfg._base_dir = base_dir if base_dir is not None else Path.cwd()
    cfg._source = None if source == "<config>" else Path(source)
    return cfg


def load_config(path: str | Path) -> AssessmentConfig:
    """Read and validate an assessment config TOML file; ConfigError names file, field and requirement."""
    file = Path(path)
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    return parse_config(raw, source=str(file), base_dir=file.resolve().parent)


__all__ = [
    "AssessmentConfig",
    "Attack",
    "Attacks",
    "Claim",
    "ClassD",
    "ClassDBattery",
    "MAX_SEED",
    "PRESETS",
    "REQUIRED_INFERENCE_ATTACKS",
    "Relearning",
    "config_digest",
    "derive_seed",
    "load_config",
    "parse_config",
    "preregistered",
]
