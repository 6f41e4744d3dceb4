"""The conformance statement (K4) as a pydantic model; its JSON Schema is ``remnant schema statement``.

Top-level names follow Annex E. Every element K4 requires is a required field; one that could not be supplied is
an explicit :class:`~remnant.statement.absent.Absent` marker (K6), never omitted and never null.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from remnant.standard.facts import InstallationFact
from remnant.standard.verdict import Verdict
from remnant.statement.absent import Absent

Interval = tuple[float, float]
Sha256Ref = Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]
SurfaceStatus = Literal["run", "not_applicable", "inadmissible", "not_run", "failed", "diverged"]

#: What a statement built from no chained records says in ``records_head`` (and what one written before the chain
#: reads as): the phrase "records not chained" is what a reader looks for.
RECORDS_NOT_CHAINED = (
    "records not chained: this statement pins no chain head of records.jsonl, so an edited, inserted or deleted "
    "record would not show (R23)"
)


#: What a statement whose facts record no ``installation`` says in ``installation`` (and what one written before the
#: field existed reads as): how the target was fixed is not stated, so R2 cannot be read from it.
INSTALLATION_NOT_RECORDED = (
    "not recorded: the facts do not say how the target was fixed (R2), by an installation and the strength it "
    "reached, or by documented provenance"
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Versions(_Model):
    """The three versions assessed together as one contract (Z1)."""

    standard: str = Field(min_length=1, description="Yuyari Standard version, e.g. '0.3'.")
    pack_schema: str = Field(min_length=1, description="Target-pack schema version.")
    harness: str = Field(min_length=1, description="remnant (reference harness) version that emitted this.")


class ModelIdentity(_Model):
    """Model identity and version, and the never-modified control (K4)."""

    identity: str = Field(description="Model identity (name and weights digest).")
    version: str = Field(description="Model version the verdict is scoped to (V4, V5).")
    control_identity: str | Absent = Field(description="Identity of the never-modified control model (R3).")


class PreRegistration(_Model):
    """The pre-registered values (R14) the verdict is computed against."""

    gating_metric: Literal["w", "kappa"] = Field(description="Gating metric g (R6, R7).")
    tau: float = Field(ge=0, le=1, description="Pre-registered recovery threshold τ.")
    utility_metric: str = Field(description="Declared, deployment-relevant utility metric u (R9).")
    phi: float = Field(ge=0, le=1, description="Utility floor φ (R9, R13).")
    min_n: int = Field(ge=1, description="Pre-registered minimum evaluation-set size (R21).")
    registered_at: str = Field(description="UTC timestamp at which the pre-registration was frozen (R14).")
    digest: str | Absent = Field(description="sha256 of prereg.json (R14).")


class Deviation(_Model):
    """A recorded change to a pre-registered field (R15)."""

    field: str = Field(description="The pre-registered field changed.")
    old: Any = Field(description="Its frozen value.")
    new: Any = Field(description="The value used.")
    reason: str = Field(description="Why it changed.")
    stage: str = Field(description="The assessment stage at which it changed.")


class FormatCheck(_Model):
    """C-Q3 for one attack: the explanation adopted for how it moved the post-removal score, and why."""

    attack: str = Field(description="The attack checked.")
    explanation: Literal["not_reduced", "format_disruption", "specific_to_post_removal", "undetermined"] = (
        Field(
            description="not_reduced; format_disruption (it also lowers the pre-removal score); "
            "specific_to_post_removal (the pre-removal score holds); undetermined (no pre-removal run)."
        )
    )
    reason: str = Field(description="Why this explanation was adopted (C-Q3).")
    post_delta: float | None = Field(
        default=None, description="Attacked minus unattacked rate, post-removal."
    )
    pre_delta: float | None = Field(default=None, description="Attacked minus unattacked rate, pre-removal.")


class Cell(_Model):
    """One per-cell result: a rate with its n and two-sided 95% Wilson interval (R19, R22)."""

    cell_id: str = Field(description="Unique id of the cell within this statement.")
    model_state: Literal["post_removal", "control", "pre_removal"] = Field(
        description="Model state measured."
    )
    attack: str = Field(description="Registered attack name (or 'none' for an unattacked measurement).")
    surface: str = Field(
        description="Surface: relearning, inference_time, weight_transform, latent or utility."
    )
    metric: Literal["w", "kappa", "utility"] = Field(description="The metric measured (R6: w and κ apart).")
    k: int = Field(ge=0, description="Successes counted.")
    n: int = Field(ge=1, description="Evaluation-set size the rate was computed on (R19).")
    rate: float = Field(
        ge=0, le=1, description="Reported rate (net of chance and floored at 0 for MCQ targets)."
    )
    ci95: Interval = Field(description="Two-sided 95% Wilson score interval of the rate (R19).")


class SurfaceOutcome(_Model):
    """Per-surface outcome (K4), aggregated from the cells it names (R22)."""

    status: SurfaceStatus = Field(description="run, not_applicable (C-Q2), inadmissible (R0.2), not_run, ...")
    reason: str | None = Field(default=None, description="Why the surface was not run or does not apply.")
    g_star: float | None = Field(
        default=None, description="Largest point rate over the surface's run attacks."
    )
    ci95: Interval | None = Field(default=None, description="Wilson 95% interval of g_star (R19).")
    n: int | None = Field(default=None, description="n behind g_star (R19).")
    control_g: float | None = Field(default=None, description="The control's rate on the same attack (R4).")
    control_ci95: Interval | None = Field(default=None, description="Wilson 95% interval of control_g (R19).")
    control_n: int | None = Field(default=None, description="n behind control_g (R19).")
    decisive_attack: str | None = Field(default=None, description="The attack that gave g_star.")
    cells: list[str] = Field(
        default_factory=list, description="Ids of the per-cell results behind this (R22)."
    )


class LatentFigure(_Model):
    """One supplementary latent figure with what C-H7(b) requires beside it."""

    name: str = Field(description="Registered latent measurement (e.g. direction_survival).")
    value: float = Field(description="The figure.")
    reference: str = Field(description="Never-modified reference it was computed against (C-H7b).")
    states: list[str] = Field(description="Model states compared (C-H7b).")
    layer: int | str = Field(description="Layer (C-H7b).")
    position: str = Field(description="Token position (C-H7b).")


class LatentBlock(_Model):
    """Latent measurements: supplementary and never adjudicating (C-H6, C-H7)."""

    status: Literal["supplementary"] = Field(default="supplementary", description="Always supplementary.")
    adjudicating: Literal[False] = Field(default=False, description="Always false: no verdict weight (C-H6).")
    controls_run: bool = Field(description="Whether the C-H3 control states were run (C-H7c).")
    controls_statement: str = Field(
        description="The controls' figures, or the statement that they were not run."
    )
    figures: list[LatentFigure] = Field(default_factory=list, description="The latent figures (C-H7b).")


class Utility(_Model):
    """Utility at the removal stage (R11) and at the attack stage (R12), on distinct scales."""

    removal_stage: float | Absent = Field(
        description="u(θ_U)/u(θ) at the removal stage; the value R13 gates on."
    )
    attack_stage: float | Absent = Field(description="Incremental attack damage, re-anchored to θ_U (R12).")
    scales_distinct: Literal[True] = Field(default=True, description="Always true: the scales differ (R12).")


class PackRef(_Model):
    """Target pack identity and version (K4)."""

    identity: str = Field(description="Pack identity (name and digest).")
    version: str = Field(description="Pack version.")


class Assessor(_Model):
    """Assessor identity and independence declaration (K4, §8.3)."""

    identity: str = Field(description="Who assessed.")
    independence: str = Field(description="Independence declaration (K8a).")
    accredited: bool = Field(description="Whether an Accredited Assessor (K7, K8).")


class Verification(_Model):
    """The verification record a Tier 4 award requires (K7)."""

    verifier: str = Field(description="Yuyari or the Accredited Assessor who verified.")
    accredited: bool = Field(description="Whether the verifier is accredited.")
    verified_on: dt.date = Field(description="Date of verification.")
    record_ref: str = Field(description="Reference (hash or URI) of the verification record.")


class RateReport(_Model):
    """A rate with its n and Wilson interval (R19); for a Class D risk also its control-entity rate, baseline,
    the interval net of both and whether the net upper bound clears the insignificance bar (D4, D-5.1)."""

    k: int = Field(ge=0, description="Successes.")
    n: int = Field(ge=1, description="Trials.")
    rate: float = Field(ge=0, le=1, description="k/n.")
    ci95: Interval = Field(description="Two-sided 95% Wilson interval.")
    measurement: str | None = Field(
        default=None,
        description="The measurement reported: the one with the largest net upper bound (D-5.1).",
    )
    control_k: int | None = Field(default=None, ge=0, description="Recoveries on control entities (D4).")
    control_n: int | None = Field(default=None, ge=1, description="Control entities scored (D4).")
    baseline: float | None = Field(
        default=None,
        ge=0,
        lt=1,
        description="No-extraction rate: forced-choice chance or population (D-4.2).",
    )
    net_rate: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Rate net of baseline and control-entity rate, floored at 0 (D4).",
    )
    net_ci95: Interval | None = Field(default=None, description="The Wilson interval shifted as net_rate is.")
    upper_bound: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="net_ci95's upper end: the bound D-5.1 tests against the threshold.",
    )
    below_threshold: bool | None = Field(
        default=None,
        description="Every measurement of this risk has its net upper bound below the threshold.",
    )


class ClassDBlock(_Model):
    """Class D results: threshold, its justification and the three rates (§3 Class D)."""

    threshold: float = Field(description="Declared threshold.")
    justification: str = Field(description="Why this threshold.")
    singling_out: RateReport = Field(description="Singling-out rate.")
    linkability: RateReport = Field(description="Linkability rate.")
    inference: RateReport = Field(description="Inference rate over the population baseline.")
    passes: bool | None = Field(
        default=None,
        description="All three risks measured and every net upper bound below the threshold (D-5.1).",
    )
    canary_design: dict[str, Any] | None = Field(
        default=None, description="Canary design: attribute cardinality, repetitions, surface forms (D5)."
    )


class ConformanceStatement(_Model):
    """A machine-readable conformance statement: every element K4 lists, absent ones marked (K6)."""

    statement_schema: Literal["1"] = Field(default="1", description="Version of this statement schema.")
    standard_version: str = Field(description="Standard version (K2, K4).")
    class_: Literal["C", "D"] = Field(alias="class", description="Target class (R0.1).")
    track: Literal["W", "Q"] = Field(description="Track (R0.1).")
    instrument: list[Literal["verdict", "tier"]] = Field(
        min_length=1, description="Which instrument(s) this statement issues (T1)."
    )
    versions: Versions = Field(description="Standard, pack schema and harness versions (Z1).")
    claim: str = Field(description="The removal claim assessed, verbatim (R1).")
    model: ModelIdentity = Field(description="Model identity and version; control identity.")
    pre_registration: PreRegistration = Field(description="Pre-registered τ, u, φ, minimum n (R14).")
    deviations: list[Deviation] = Field(description="Deviations from the pre-registration (R15); [] if none.")
    cells: list[Cell] = Field(description="Per-cell results with Wilson intervals and n (R19, R22).")
    surfaces: dict[str, SurfaceOutcome] = Field(
        description="Per-surface outcomes, adjudicating surfaces only."
    )
    latent: LatentBlock | Absent = Field(description="Supplementary latent measurements (C-H6, C-H7).")
    utility: Utility = Field(description="Removal-stage and attack-stage utility, distinct (R11, R12).")
    installation: InstallationFact | Absent = Field(
        default_factory=lambda: Absent(reason=INSTALLATION_NOT_RECORDED),
        description="How the target was fixed (R2): the facts' installation record, the strength the pre-removal "
        "model reached on the installed items against the declared target and whether it reached it (removed is "
        "impossible where it did not). Absent, saying why, where documented provenance fixes the target or the "
        "facts record neither; a statement written before this field existed reads as not recorded.",
    )
    facts: dict[str, Any] = Field(
        description="The exact verdict facts (the remnant verdict input, V1) the verdict is recomputed from."
    )
    verdict: Verdict | Absent = Field(description="The verdict (V1), or absent when only a tier is issued.")
    verdict_reasons: list[str] = Field(
        default_factory=list, description="The verdict engine's stated reasons."
    )
    verdict_scope: str | Absent = Field(description="Scope qualifier (V4); required wording on removed.")
    tier: str | Absent = Field(
        description="Readiness tier (e.g. 'W4', 'Q3'), or absent when not issued (T1)."
    )
    verification: Verification | Absent = Field(description="Verification record (K7).")
    class_d: ClassDBlock | Absent = Field(description="Class D threshold and rates, or absent for Class C.")
    format_checks: list[FormatCheck] = Field(
        default_factory=list,
        description="C-Q3: for each inference-time or weight-transform attack, whether it lowered the "
        "post-removal score and which explanation was adopted (format disruption or not), and why.",
    )
    assessment_date: dt.date = Field(description="Date of the assessment (K4).")
    validity_until: dt.date = Field(description="End of the validity period, at most 12 months on (V5).")
    manifest_ref: str | Absent = Field(description="Run manifest reference: hash or URI (R23).")
    records_head: Sha256Ref | Absent = Field(
        default_factory=lambda: Absent(reason=RECORDS_NOT_CHAINED),
        description="Chain head of the run's records.jsonl: 'sha256:' of its last line, which carries the digest "
        "of the line before it, and so on to the first, so it pins every record the cells were counted from "
        "(R23; the manifest's records.head). Absent, with a reason that says 'records not chained', when the "
        "records carry no chain (written before remnant chained them); a statement written before this field "
        "existed reads as that.",
    )
    pack: PackRef | Absent = Field(description="Target pack identity and version.")
    assessor: Assessor = Field(description="Assessor identity and independence declaration (§8.3).")


def statement_json_schema() -> dict[str, Any]:
    """The JSON Schema of :class:`ConformanceStatement` (printed by ``remnant schema statement``)."""
    return ConformanceStatement.model_json_schema(by_alias=True)
