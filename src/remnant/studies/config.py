"""The studies' configs: everything a study decides with, declared (and frozen, :mod:`.registration`) before it runs.

Each config is the study's pre-registration (R14 applied to research, docs/studies.md): the metrics and their
orientation, the filters, the seed every bootstrap generator is derived from
(:func:`remnant.config.derive_seed`), the decision rule. A TOML file gives any subset of the fields; the
rest keep the defaults written here, which follow the papers the studies reproduce (the UDS paper §4, the J-Access paper
Test 2 and 3, the Standard's Annex B.4/B.6) and are listed with their sources in docs/studies.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from remnant.errors import ConfigError
from remnant.jsonio import read_toml
from remnant.studies.orientation import Orientation


class StudyModel(BaseModel):
    """Every study config and record refuses an unknown field (a hostile or mistyped file fails loudly)."""

    model_config = ConfigDict(extra="forbid")


class PoolStudyModel(StudyModel):
    """A study of a pool folder (``remnant sweep``): it may pre-register the pool's spec by digest (R14)."""

    pool_spec: str | None = Field(
        default=None,
        pattern=r"^sha256:[0-9a-f]{64}$",
        description="sha256 of the pool spec (the pool folder's spec.toml) the study is pre-registered against: a "
        "pool recalibrated after a pilot is a recorded deviation (R15), a pool of another spec is refused "
        "(None: not declared).",
    )


def _in_unit(value: float, info: ValidationInfo) -> float:
    if not 0.0 < value < 1.0:
        raise ValueError(f"{info.field_name} must lie strictly between 0 and 1, got {value}")
    return value


class MetaEvalConfig(PoolStudyModel):
    """Faithfulness and robustness of every metric over a pool (the UDS paper §4; docs/latent.md)."""

    study: Literal["meta-eval"] = Field(default="meta-eval", description="Study kind.")
    seed: int = Field(default=0, ge=0, description="Pre-registered seed; every bootstrap derives from it.")
    metrics: list[str] | None = Field(
        default=None, description="Metrics studied (None: every non-utility metric column)."
    )
    orientation: dict[str, Orientation] = Field(
        default_factory=dict, description="Orientation per metric, over the defaults (studies.orientation)."
    )
    n_resamples: int = Field(default=2000, ge=100, description="Bootstrap resamples per interval.")
    level: float = Field(default=0.95, description="Two-sided interval level.")
    utility_floor: float = Field(
        default=0.8,
        ge=0.0,
        description="Robustness filter: utility ≥ this × the full model's (the UDS paper §4).",
    )
    faithfulness_filter: bool = Field(
        default=True,
        description="Robustness filter: keep models the metric's faithfulness threshold calls unlearned.",
    )
    threshold_rule: Literal["accuracy", "youden"] = Field(
        default="accuracy",
        description="Faithfulness threshold: accuracy (the UDS reference code's accuracy-maximising midpoint) "
        "or youden (Youden's J; differs when the pools differ in size).",
    )
    reference_shift: Literal["retain_model", "mean", "median"] = Field(
        default="retain_model",
        description="Δ_ret: one never-saw model's relearning shift (the UDS reference code's retain model), "
        "or the never-saw pool's mean or median shift.",
    )
    retain_model: str | None = Field(
        default=None,
        description="The never-saw model behind Δ_ret when reference_shift = retain_model "
        "(None: the never-saw model whose id sorts first).",
    )
    epsilon: float = Field(
        default=1e-6, gt=0.0, description="ε in the Q and R denominators (the UDS reference code's 1e-6)."
    )
    min_per_pool: int = Field(default=2, ge=1, description="Models each pool needs for an AUC.")
    min_pool: int = Field(
        default=8,
        ge=2,
        description="Models the target, never-saw and unlearned pools each need before a ranking is "
        "called supported (rankable).",
    )

    _unit_fields = field_validator("level")(_in_unit)

    @model_validator(mode="after")
    def _retain_model_needs_its_rule(self) -> MetaEvalConfig:
        if self.retain_model is not None and self.reference_shift != "retain_model":
            raise ValueError(
                f"retain_model {self.retain_model!r} is declared but reference_shift is "
                f"{self.reference_shift!r}, which never reads it"
            )
        return self


class RecoveryConfig(PoolStudyModel):
    """Does a pre-attack metric predict recovery under relearning (the J-Access paper, Test 2)."""

    study: Literal["recovery"] = Field(default="recovery", description="Study kind.")
    seed: int = Field(default=0, ge=0, description="Pre-registered seed.")
    metrics: list[str] | None = Field(
        default=None, description="Predictors (None: every non-utility metric)."
    )
    orientation: dict[str, Orientation] = Field(default_factory=dict, description="Orientation overrides.")
    outcome: str = Field(
        default="auto",
        description="Metric recovery is read on (auto: kappa, else forget_Q_A_ROUGE, else forget_Q_A_Prob).",
    )
    outcome_kind: Literal["revival", "shift"] = Field(
        default="revival",
        description="revival: item-level revival rate (items table); shift: the model-level change in the outcome.",
    )
    revival_fraction: float = Field(
        default=0.5,
        description="An item revives at ≥ this × the original model's value (the J-Access paper).",
    )
    steps_column: str = Field(
        default="steps_to_recover", description="Results column with the relearning steps to recover."
    )
    steps_horizon: float | None = Field(
        default=None, description="Attack horizon: a missing steps value is censored here (None: excluded)."
    )
    covariates: list[str] = Field(
        default=["forget_quality", "utility"], description="Controlled for by the partial correlation."
    )
    alpha: float = Field(default=0.05, description="Family-wise error rate (Holm across metrics).")
    min_per_method: int = Field(
        default=4, ge=4, description="Models a method needs for its own ρ (Fisher z)."
    )
    min_pool: int = Field(
        default=8,
        ge=2,
        description="Unlearned models with an outcome the study needs before comparing predictors (rankable).",
    )

    _unit_fields = field_validator("revival_fraction", "alpha")(_in_unit)


class PrimaryCell(StudyModel):
    """The configuration the predictive test reads (B.6: the pre-registered primary configuration)."""

    layer: int = Field(description="Layer.")
    position: str = Field(description="Token position.")
    setting: str = Field(default="-", description="Hyper-parameter setting label.")


class ReadmissionRule(StudyModel):
    """Annex B.4's decision rule with its thresholds (B.6 used δ = 0.10 and 80 %)."""

    margin: float = Field(default=0.10, gt=0.0, description="Equivalence margin δ for both nulls (C-H3).")
    pass_fraction: float = Field(default=0.80, description="Share of evaluable cells a null must hold in.")
    rho_min: float = Field(default=0.5, description="Spearman ρ (reading vs recovery) needed to promote.")
    alpha: float = Field(default=0.05, description="One-sided level of the predictive test.")
    require_significance: bool = Field(default=True, description="Promotion also needs p < alpha.")
    min_layers: int = Field(default=3, ge=1, description="C-H4: layers the cells must span.")
    min_positions: int = Field(default=2, ge=1, description="C-H4: token positions the cells must span.")
    min_settings: int = Field(
        default=2, ge=1, description="C-H4: settings of a fitted hyper-parameter (estimators that have one)."
    )
    primary: PrimaryCell | None = Field(
        default=None,
        description="Primary configuration (None: middle layer, first position, middle setting).",
    )

    _unit_fields = field_validator("pass_fraction", "alpha")(_in_unit)


class ReadmissionConfig(StudyModel):
    """A latent estimator through the Standard's readmission bar (C-H9, Annex B.1-B.4)."""

    study: Literal["readmission"] = Field(default="readmission", description="Study kind.")
    estimator: Literal["direction", "uds", "j_access"] = Field(description="The latent estimator tested.")
    rule: ReadmissionRule = Field(default_factory=ReadmissionRule, description="The decision rule (B.4).")
    preset: Literal["tiny", "cpu"] | None = Field(default=None, description="Design sizing preset.")
    design: dict[str, Any] = Field(
        default_factory=dict,
        description="The model states' design: remnant.studies.latent_probe.LatentProbeConfig fields (B.2).",
    )
    estimator_params: dict[str, Any] = Field(
        default_factory=dict,
        description="The estimator's grid: uds {taus}, j_access {ks, positions, lens}; see docs/studies.md.",
    )


class GoodhartConfig(StudyModel):
    """A removal run that also minimises an audit's score (the J-Access paper, Test 3). A study, never a method."""

    study: Literal["goodhart"] = Field(default="goodhart", description="Study kind.")
    audit: Literal["j_access", "uds"] = Field(default="j_access", description="The audit optimised against.")
    base_method: str = Field(
        default="npo",
        description="Registered loss method the penalty is added to (npo: the design presets size it).",
    )
    method_params: dict[str, Any] = Field(default_factory=dict, description="The base method's parameters.")
    weights: list[float] = Field(
        default=[0.0, 5.0, 10.0], description="Penalty weights λ (the J-Access paper: 0, 5, 10)."
    )
    seeds: list[int] = Field(
        default=[0, 1, 2], description="Removal seeds per weight (the J-Access paper: three)."
    )
    preset: Literal["tiny", "cpu"] | None = Field(default=None, description="Sizing preset.")
    design: dict[str, Any] = Field(
        default_factory=dict, description="Pack, install and relearning settings (LatentProbeConfig fields)."
    )
    audit_params: dict[str, Any] = Field(
        default_factory=dict, description="Surrogate and audit settings (k, layers, positions, tau)."
    )
    tolerance: float = Field(
        default=0.05, ge=0.0, description="Recovery 'did not fall' if it stays within this of λ = 0's."
    )

    @field_validator("weights")
    @classmethod
    def _weights(cls, v: list[float]) -> list[float]:
        if not v or any(w < 0 for w in v) or 0.0 not in v:
            raise ValueError("weights must be non-negative and include 0 (the unpenalised baseline)")
        return sorted(set(v))


_KINDS: dict[str, type[BaseModel]] = {
    "meta-eval": MetaEvalConfig,
    "recovery": RecoveryConfig,
    "readmission": ReadmissionConfig,
    "goodhart": GoodhartConfig,
}


#: Fields added to a study's config after studies could already be frozen, with the value that reproduces what the
#: code did before the field existed. A frozen config (prereg.json) or a written result lacking one was computed
#: under that value, so it is read as declaring it (R14: an old study keeps meaning what it meant); a rerun that
#: does not declare it is then refused field by field by the pre-registration check (R15), not silently changed.
LEGACY_VALUES: dict[str, dict[str, Any]] = {
    "meta-eval": {"threshold_rule": "youden", "min_pool": 8, "pool_spec": None},
    "recovery": {"min_pool": 8, "pool_spec": None},
}


def with_legacy_values(kind: str, values: dict[str, object]) -> dict[str, object]:
    """``values`` (a whole config as frozen or written) with every later-added field it lacks at its old value."""
    return {**LEGACY_VALUES.get(kind, {}), **values}


def build_config(kind: str, data: dict[str, object], *, source: str = "config") -> Any:
    """The config of study ``kind`` from plain data; ConfigError naming the source on any bad field (R14)."""
    cls = _KINDS.get(kind)
    if cls is None:
        raise ConfigError(f"unknown study {kind!r}; known: {', '.join(_KINDS)}", requirement="R14")
    declared = data.get("study", kind)
    if declared != kind:
        raise ConfigError(f"{source}: declares study {declared!r}, not {kind!r}", requirement="R14")
    try:
        return cls.model_validate({**data, "study": kind})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ConfigError(f"{source}: field {where!r}: {first['msg']}", requirement="R14") from None


def load_config(kind: str, path: str | Path | None, overrides: dict[str, Any] | None = None) -> Any:
    """The config of study ``kind``: the TOML file's fields (when given), then ``overrides`` (None: not given;
    a table merged one level deep), over the defaults."""
    data: dict[str, Any] = read_toml(Path(path), requirement="R14") if path is not None else {}
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        # a table given on the command line (e.g. design.models) is laid over the file's table, not swapped for it
        both = isinstance(value, dict) and isinstance(data.get(key), dict)
        data[key] = {**data[key], **value} if both else value
    return build_config(kind, data, source=str(path) if path is not None else "defaults")


__all__ = [
    "LEGACY_VALUES",
    "GoodhartConfig",
    "MetaEvalConfig",
    "PrimaryCell",
    "ReadmissionConfig",
    "ReadmissionRule",
    "RecoveryConfig",
    "StudyModel",
    "build_config",
    "load_config",
    "with_legacy_values",
]
