"""The whole assessment config: every section, the sizing presets and the rules that span sections (R14, R21)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, model_validator

from remnant.config.attacks import Attacks
from remnant.config.audits import Audits, check_audit_states
from remnant.config.claim import Claim, Target
from remnant.config.classd import ClassD
from remnant.config.fields import MAX_N, MAX_SEED, MIN_THRESHOLD, ConfigModel, RuleViolation, Text
from remnant.config.measure import Probe, Utility
from remnant.config.models import Models
from remnant.statement.canonical import derive_seed

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


class Seeds(ConfigModel):
    """One master seed; every stage derives its own from it with :func:`derive_seed`, never a global seed (R23,
    R24)."""

    master: int = Field(ge=0, le=MAX_SEED, description="Master seed all stage seeds derive from (R23).")


class Signing(ConfigModel):
    """Optional signing of the statement (K5)."""

    key: str | None = Field(default=None, description="Ed25519 private key file; unsigned if absent (K5).")


class AssessmentConfig(ConfigModel):
    """A whole assessment config. Build it with :func:`load_config` for file-and-field error messages."""

    claim: Claim = Field(description="The written removal claim (R1).")
    claim_class: Literal["C", "D"] = Field(alias="class", description="Claim class (R0.1, K2).")
    track: Literal["W", "Q"] = Field(description="Access track, declared before the run (R0.1).")
    target: Target = Field(description="How the target is fixed (R2).")
    models: Models = Field(description="Control, pre-removal and post-removal models (R3).")
    gating_metric: Literal["kappa", "w"] = Field(description="The metric g that gates the verdict (R7).")
    gating_justification: Text = Field(description="Why g is the right gating metric (R7).")
    tau: float = Field(
        ge=MIN_THRESHOLD, le=1, description="Threshold τ at or above which the target is present (R14)."
    )
    utility: Utility = Field(description="Utility metric and floor (R9).")
    probe: Probe = Field(default_factory=Probe, description="Scored probe sets (R14, R16).")
    attacks: Attacks = Field(description="Attack battery and budgets (R14, C-Q1, C-W1).")
    min_n: int = Field(ge=1, le=MAX_N, description="Minimum evaluation-set size per cell (R21).")
    evidence_rule: Literal["point", "bounds"] = Field(
        default="point", description="How hidden is read: point rates or interval bounds (V1)."
    )
    seeds: Seeds = Field(description="The master seed (R23).")
    class_d: ClassD | None = Field(
        default=None, description="Insignificance bar; required for class D (D-5.1)."
    )
    signing: Signing = Field(default_factory=Signing, description="Statement signing (K5).")
    audits: Audits = Field(
        default_factory=Audits, description="White-box audits: supplementary, never adjudicating (C-H6)."
    )
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
        if self.models.pre_removal.install is None and self.target.provenance is None:
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
        check_audit_states(self.audits, self.models)
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
    def bar_threshold(self) -> float:
        """The threshold every upper bound is held to: Class D's declared insignificance threshold (D-5.1), else τ
        (R20, R21); the facts written from this config carry the same (``remnant.standard.derive.bar_threshold``)."""
        return self.class_d.insignificance_threshold if self.class_d is not None else self.tau

    @property
    def source(self) -> Path | None:
        """The file this config was read from, if any (named in later errors)."""
        return self._source
