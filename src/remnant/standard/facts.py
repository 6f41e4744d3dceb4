"""The facts a verdict rests on (V1): rates as k/n per attack, the pre-registered τ and φ, and utility.

This is the input of ``remnant verdict`` and the ``facts`` block of a conformance statement; the verdict reads
nothing else (V1 is a function of these values alone). Validation names the field and the requirement it
enforces, so bad input is refused before a verdict is drawn from it.

Class D (§5) adds the declared ``insignificance`` bar (D-5.1, D-5.2) and, per attack, the ``risk`` it measures
(D-2.1, D-3.1, D-4.1), its never-installed control entities (D4) and its ``baseline`` (D-3, D-4.2), each used by
the D-5.1 bar on *removed*. ``installation`` (optional) records how the target was fixed (R2); an installation that
did not reach its target makes *removed* impossible. Each field's description says how it is read.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from remnant.standard.vocabulary import Risk, Status, Surface


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", populate_by_name=True, frozen=True, allow_inf_nan=False, validate_default=True
    )


class UtilityFacts(_Model):
    """Utility at the two stages R12 keeps apart; ``null`` when not measured."""

    removal_stage: float | None = Field(
        ge=0.0,
        description="u(θ_U) normalised against the pre-removal model (R11); the floor test uses it (R13).",
    )
    attack_stage: float | None = Field(
        ge=0.0,
        description="Utility re-measured during the attack (R12, C-W4); reported, never the floor test.",
    )
    removal_stage_undefined: list[str] | None = Field(
        default=None,
        min_length=1,
        description="The declared metrics on which the pre-removal model was measured at zero, so u(θ_U)/u(θ) "
        "is undefined although both models were measured (R11); left out when that is not the case.",
    )

    @model_validator(mode="after")
    def _undefined_means_no_value(self) -> UtilityFacts:
        if self.removal_stage_undefined is not None and self.removal_stage is not None:
            raise ValueError(
                "removal_stage_undefined: set beside a removal_stage value; a zero pre-removal reference leaves "
                "the removal-stage ratio undefined (R11)"
            )
        return self

    @model_serializer(mode="wrap")
    def _without_undefined(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The key is written only when it applies, so the facts of a measured or unmeasured utility keep their
        form; it reads back as null."""
        data: dict[str, Any] = handler(self)
        if data.get("removal_stage_undefined") is None:
            data.pop("removal_stage_undefined", None)
        return data


#: Slack on ``measured == k/n`` for an installation read back from JSON (a float written and parsed again).
_MEASURED_TOL = 1e-9
_MEASUREMENT_FIELDS = ("metric", "k", "n", "measured", "target", "reached")


class InstallationFact(_Model):
    """How the removal target was fixed (R2), and for an installation the strength the pre-removal model reached.

    ``fixed_by: "installation"``: the target was installed here, and ``metric`` (κ, or w), ``k``/``n`` on the
    installed items, ``measured`` (= k/n), the declared ``target`` and ``reached`` are all given; ``reached`` true
    needs ``measured`` ≥ ``target``. ``reached`` false beside ``measured`` ≥ ``target`` is accepted: it only
    withholds *removed* (an installation run that diverged after its last score records that). ``fixed_by:
    "provenance"``: the claimant's documented provenance fixes the target (``provenance``), nothing was installed
    or measured here, and every measurement field stays null.
    """

    fixed_by: Literal["installation", "provenance"] = Field(
        description="How the target was fixed: installed here, or by the claimant's documented provenance (R2)."
    )
    metric: Literal["kappa", "w"] | None = Field(
        default=None, description="The metric the installation target is declared on (κ; w where it gates)."
    )
    k: int | None = Field(default=None, ge=0, description="Installed items the pre-removal model gets right.")
    n: int | None = Field(default=None, gt=0, description="Installed items scored (R19).")
    measured: float | None = Field(
        default=None, ge=0.0, le=1.0, description="k/n: the strength the pre-removal model reached (R2)."
    )
    target: float | None = Field(
        default=None, ge=0.0, le=1.0, description="The declared installation target (pre-registered, R14)."
    )
    reached: bool | None = Field(default=None, description="Whether measured reached the target (R2).")
    provenance: str | None = Field(
        default=None, min_length=1, description="The documented provenance that fixes the target (R2)."
    )

    @field_validator("fixed_by", mode="before")
    @classmethod
    def _known_way(cls, value: Any) -> Any:
        if value not in ("installation", "provenance"):
            raise ValueError(
                f"{value!r} is neither 'installation' nor 'provenance', the two ways R2 fixes a target"
            )
        return value

    @model_validator(mode="after")
    def _consistent(self) -> InstallationFact:
        given = [f for f in _MEASUREMENT_FIELDS if getattr(self, f) is not None]
        if self.fixed_by == "provenance":
            if given or not self.provenance:
                raise ValueError(
                    f"fixed_by 'provenance' needs the provenance text and no measurement (got "
                    f"{', '.join(given) or 'no provenance'}); nothing was installed or measured here (R2)"
                )
            return self
        missing = [f for f in _MEASUREMENT_FIELDS if getattr(self, f) is None]
        if missing or self.provenance is not None:
            raise ValueError(
                f"fixed_by 'installation' needs {', '.join(_MEASUREMENT_FIELDS)} and no provenance"
                + (f" (missing: {', '.join(missing)})" if missing else "")
                + " (R2: the strength installed and its target)"
            )
        k, n, measured, target = self.k, self.n, self.measured, self.target
        assert k is not None and n is not None and measured is not None and target is not None
        if k > n:
            raise ValueError(f"k={k} exceeds n={n} (R2)")
        if abs(measured - k / n) > _MEASURED_TOL:
            raise ValueError(f"measured {measured:g} is not k/n = {k}/{n} (R2, R19)")
        if self.reached and measured < target:
            raise ValueError(
                f"reached is true but measured {measured:g} ({k}/{n}) is below the target {target:g}: an "
                "installation that did not reach its target is not reached (R2)"
            )
        return self

    @property
    def unreached(self) -> bool:
        """An installation that did not reach its declared target (R2): *removed* is then unavailable."""
        return self.fixed_by == "installation" and self.reached is False


class InsignificanceBar(_Model):
    """Class D's declared insignificance threshold (D-5.1) and its justification (D-5.2)."""

    threshold: float = Field(
        gt=0.0,
        le=1.0,
        description="Each rate's Wilson upper bound, net of control, must lie below it (D-5.1).",
    )
    justification: str = Field(min_length=1, description="Why this threshold (D-5.2).")


class AttackFact(_Model):
    """One attack's outcome on the post-removal model and on the control under the identical attack (R3, R4)."""

    name: str = Field(
        min_length=1,
        description="Attack name; 'prefill', 'many_shot' and 'repeated_sampling' are the C-Q1 minimum.",
    )
    surface: Surface = Field(
        description="relearning / inference_time / weight_transform adjudicate; latent never."
    )
    status: Status = Field(description="run, not_applicable (C-Q2), not_run, failed or diverged.")
    k: int | None = Field(default=None, ge=0, description="Recoveries on the post-removal model.")
    n: int | None = Field(default=None, gt=0, description="Items scored on the post-removal model (R19).")
    control_k: int | None = Field(
        default=None, ge=0, description="Recoveries on the control; null if not obtained."
    )
    control_n: int | None = Field(
        default=None, gt=0, description="Items scored on the control; null if not obtained."
    )
    control_model_k: int | None = Field(
        default=None,
        ge=0,
        description="Class D only: recoveries on the never-modified control model under the identical measurement "
        "(V1a); control_k/control_n then hold the never-installed control entities (D4, D-5.1).",
    )
    control_model_n: int | None = Field(
        default=None,
        gt=0,
        description="Class D only: items scored on the never-modified control model (V1a).",
    )
    reason: str | None = Field(default=None, description="Why the attack is not applicable, or did not run.")
    adjudicating: bool = Field(
        default=True,
        description="False for arms that are reported and never decide (C-W6 scored-item relearning; latent, C-H6).",
    )
    risk: Risk | None = Field(
        default=None,
        description="Class D only: the re-identification risk this attack measures (D-2.1/3.1/4.1).",
    )
    baseline: float | None = Field(
        default=None,
        ge=0.0,
        lt=1.0,
        description="Class D only: the rate reached without extraction on these items (forced-choice chance, "
        "D-3; population baseline, D-4.2); this attack's rates, bounds and control are net of it, floored at 0.",
    )

    @model_validator(mode="before")
    @classmethod
    def _latent_defaults_to_non_adjudicating(cls, data: Any) -> Any:
        # C-H6: a latent measurement carries no verdict weight, so its default is False, and True is refused below.
        if isinstance(data, dict) and data.get("surface") == "latent" and "adjudicating" not in data:
            data = {**data, "adjudicating": False}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> AttackFact:
        if self.surface == "latent" and self.adjudicating:
            raise ValueError(
                f"attack {self.name!r}: adjudicating must be false on the latent surface (C-H6: no verdict weight)"
            )
        if self.status == "run":
            if self.k is None or self.n is None:
                raise ValueError(
                    f"attack {self.name!r}: status 'run' needs k and n (R19: every rate with its n)"
                )
            if self.k > self.n:
                raise ValueError(
                    f"attack {self.name!r}: k={self.k} exceeds n={self.n} (k must satisfy 0 <= k <= n)"
                )
            if (self.control_k is None) != (self.control_n is None):
                raise ValueError(
                    f"attack {self.name!r}: control_k and control_n must both be given or both be null (R4)"
                )
            if self.control_k is not None and self.control_n is not None and self.control_k > self.control_n:
                raise ValueError(
                    f"attack {self.name!r}: control_k={self.control_k} exceeds control_n={self.control_n}"
                )
            model_k, model_n = self.control_model_k, self.control_model_n
            if model_k is not None and model_n is not None and model_k > model_n:
                raise ValueError(
                    f"attack {self.name!r}: control_model_k={model_k} exceeds control_model_n={model_n}"
                )
        else:
            given = [f for f in ("k", "n", "control_k", "control_n") if getattr(self, f) is not None]
            if given:
                raise ValueError(
                    f"attack {self.name!r}: {', '.join(given)} given but status is {self.status!r}; "
                    "only an attack that ran has results"
                )
            if self.status == "not_applicable" and not (self.reason and self.reason.strip()):
                raise ValueError(
                    f"attack {self.name!r}: status 'not_applicable' needs a reason (C-Q2: why it is undefined)"
                )
        return self


def shift(baseline: float | None, chance: float | None) -> float | None:
    """What a measurement's rates and its control's are net of: its own no-extraction rate where it has one
    (forced-choice chance, D-3; population, D-4.2), else the target's chance rate (R19). The verdict, the tier's
    evidence and the Class D bar all read it here."""
    return baseline if baseline is not None else chance


class VerdictFacts(_Model):
    """The verdict input (``remnant verdict FACTS.json``; a statement's ``facts`` block)."""

    standard_version: Literal["0.3"] = Field(
        description="Yuyari Standard version the verdict is drawn under (Z3)."
    )
    class_: Literal["C", "D"] = Field(alias="class", description="Claim class (§1.1).")
    track: Literal["W", "Q"] = Field(description="Access track (R0.1).")
    gating_metric: str = Field(min_length=1, description="The declared gating metric g, κ or w (R7).")
    tau: float = Field(gt=0.0, le=1.0, description="Threshold τ on g (pre-registered, R14).")
    phi: float = Field(ge=0.0, description="Utility floor φ (pre-registered, R9).")
    evidence_rule: Literal["point", "bounds"] = Field(
        default="point",
        description="How hidden is read: point values (V1, Annex D.4) or the interval bounds (lower g_a, upper g_C,a).",
    )
    utility: UtilityFacts = Field(description="Removal-stage and attack-stage utility (R11, R12).")
    attacks: list[AttackFact] = Field(description="Every attack attempted, run or not (C-Q2, K4).")
    chance_rate: float | None = Field(
        default=None,
        ge=0.0,
        lt=1.0,
        description="Multiple-choice chance rate: every rate, bound and comparison is net of it, floored at 0 (§2 κ).",
    )
    insignificance: InsignificanceBar | None = Field(
        default=None, description="Class D only: the declared insignificance bar (D-5.1, D-5.2)."
    )
    installation: InstallationFact | None = Field(
        default=None,
        description="How the target was fixed (R2): the installation's strength against its target, or "
        "provenance; an unreached installation makes removed impossible. Left out when not recorded.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> VerdictFacts:
        seen: set[str] = set()
        for index, attack in enumerate(self.attacks):
            if attack.name in seen:
                raise ValueError(
                    f"attacks[{index}].name: duplicate attack name {attack.name!r}; each attack needs its own "
                    "name (per-cell results and decisive_attacks refer to it, R22)"
                )
            seen.add(attack.name)
            if attack.risk is not None and self.class_ != "D":
                raise ValueError(
                    f"attacks[{index}].risk: set on a Class {self.class_} assessment; risks are Class D (§5)"
                )
            if attack.baseline is not None and self.class_ != "D":
                raise ValueError(
                    f"attacks[{index}].baseline: set on a Class {self.class_} assessment; a per-attack baseline "
                    "is Class D's (D-4.2); a multiple-choice target uses chance_rate"
                )
        if self.insignificance is not None and self.class_ != "D":
            raise ValueError(
                f"insignificance: set on a Class {self.class_} assessment; the bar is Class D's (D-5.1)"
            )
        return self

    @model_serializer(mode="wrap")
    def _without_unrecorded_installation(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """``installation`` is written only when recorded, so facts that never carried it keep their bytes (the
        statement's facts, R24); it reads back as null."""
        data: dict[str, Any] = handler(self)
        if data.get("installation") is None:
            data.pop("installation", None)
        return data
