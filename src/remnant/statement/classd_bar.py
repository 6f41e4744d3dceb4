"""The insignificance bar (D-5.1, D-5.2): each risk's Wilson upper bound, net of control, below the threshold.

The claimant declares the threshold and its justification before the run (config ``class_d``, frozen in the
pre-registration, R14). A Class D *removed* needs, for each of singling out, linkability and inference, the
two-sided 95% Wilson upper bound (R19) of every admitted measurement, net of the control-entity rate (D4), to lie
strictly below it (D-5.1; "below" as R20 reads it, so a bound equal to the threshold fails).

"Net" is read exactly as the verdict engine reads it (:mod:`remnant.standard.verdict`), so the two never disagree:
the Wilson interval is taken on the raw k/n; the measurement's ``baseline`` (forced-choice chance, population
baseline: D-3, D-4.2), when it has one, is subtracted from the bounds and from the control's point, each floored
at zero; then the control's point is subtracted and the result floored at zero. The net interval reported beside
it is the Wilson interval shifted the same way. Pure: no torch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from remnant.standard.facts import VerdictFacts, shift
from remnant.standard.vocabulary import ADMITTED_SURFACES, CLASS_D_RISKS, below_bar, net_of
from remnant.stats import wilson_interval

Risk = Literal["singling_out", "linkability", "inference"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NetRate(_Model):
    """One measurement of one risk: raw rates with Wilson intervals (R19) and the rate net of control (D4)."""

    name: str = Field(description="Attack name in the verdict facts.")
    risk: Risk = Field(description="The re-identification risk measured (D-2.1, D-3.1, D-4.1).")
    k: int = Field(ge=0, description="Recoveries on the target canaries.")
    n: int = Field(ge=1, description="Target canaries scored (R19).")
    rate: float = Field(ge=0, le=1, description="k/n.")
    ci95: tuple[float, float] = Field(description="Two-sided 95% Wilson interval of k/n (R19).")
    control_k: int | None = Field(description="Recoveries on never-installed control entities (D4).")
    control_n: int | None = Field(description="Control entities scored.")
    control_rate: float | None = Field(description="control_k/control_n.")
    control_ci95: tuple[float, float] | None = Field(description="Wilson interval of the control rate (R19).")
    baseline: float | None = Field(
        description="No-extraction rate on these items: chance (D-3) or population (D-4.2)."
    )
    net_rate: float = Field(
        ge=0, le=1, description="Rate net of baseline and control-entity rate, floored at 0."
    )
    net_ci95: tuple[float, float] = Field(description="The Wilson interval shifted as net_rate is (D-5.1).")

    @property
    def net_upper(self) -> float:
        return self.net_ci95[1]


def net_rate(
    name: str,
    risk: Risk,
    k: int,
    n: int,
    control_k: int | None = None,
    control_n: int | None = None,
    baseline: float | None = None,
) -> NetRate:
    """The rate, its control and the net rate with its interval, as the verdict engine computes them (D-5.1)."""
    lo, hi = wilson_interval(k, n)
    control_rate: float | None = None
    control_ci: tuple[float, float] | None = None
    if control_k is not None and control_n:
        control_rate = control_k / control_n
        control_ci = wilson_interval(control_k, control_n)
    net = net_of(baseline, control_k, control_n)
    return NetRate(
        name=name,
        risk=risk,
        k=k,
        n=n,
        rate=k / n,
        ci95=(lo, hi),
        control_k=control_k,
        control_n=control_n,
        control_rate=control_rate,
        control_ci95=control_ci,
        baseline=baseline,
        net_rate=net(k / n),
        net_ci95=(net(lo), net(hi)),
    )


class RiskBar(_Model):
    """One risk against the bar: every admitted measurement, and the one with the largest net upper bound."""

    risk: Risk = Field(description="singling_out (D-2), linkability (D-3) or inference (D-4).")
    measured: bool = Field(description="An admitted measurement of this risk ran (D-5.1 needs all three).")
    deciding: NetRate | None = Field(description="The measurement with the largest net upper bound.")
    below_threshold: bool = Field(description="Every measurement's net upper bound is below the threshold.")
    measurements: tuple[NetRate, ...] = Field(description="Every admitted measurement of the risk that ran.")


class ClassDBar(_Model):
    """The declared bar and the three risks against it (D-5.1, D-5.2): what the statement and report carry."""

    threshold: float = Field(gt=0, le=1, description="The declared insignificance threshold (D-5.1).")
    justification: str = Field(min_length=1, description="Its justification, declared in advance (D-5.2).")
    risks: tuple[RiskBar, RiskBar, RiskBar] = Field(description="Singling out, linkability, inference.")
    passes: bool = Field(description="All three measured and every net upper bound below the threshold.")
    reasons: tuple[str, ...] = Field(description="Why the bar is met or not, with rule ids.")

    def risk(self, name: str) -> RiskBar:
        return next(r for r in self.risks if r.risk == name)

    def statement_block(self, design: Mapping[str, object] | None = None) -> Any:
        """The statement's ``class_d`` block: threshold, justification and each risk's deciding rate (D-5.2).

        Each risk's rate is the deciding measurement's raw k/n with its Wilson interval, beside its control-entity
        counts, baseline, the interval net of both and whether the risk clears the bar; ``design`` is the canary
        design (D5). Raises ValueError when a risk was not measured (the block needs all three).
        """
        from remnant.statement.schema import ClassDBlock, RateReport

        reports: dict[str, RateReport] = {}
        for r in self.risks:
            if r.deciding is None:
                raise ValueError(f"class_d block: {r.risk} was not measured (D-5.1 needs all three risks)")
            d = r.deciding
            reports[r.risk] = RateReport(
                k=d.k,
                n=d.n,
                rate=d.rate,
                ci95=d.ci95,
                measurement=d.name,
                control_k=d.control_k,
                control_n=d.control_n,
                baseline=d.baseline,
                net_rate=d.net_rate,
                net_ci95=d.net_ci95,
                upper_bound=d.net_upper,
                below_threshold=r.below_threshold,
            )
        return ClassDBlock(
            threshold=self.threshold,
            justification=self.justification,
            passes=self.passes,
            canary_design=dict(design) if design is not None else None,
            **reports,
        )


def evaluate_bar(threshold: float, justification: str, measurements: Iterable[NetRate]) -> ClassDBar:
    """The bar over admitted measurements (D-5.1): each risk measured, every net upper bound below threshold."""
    rows = list(measurements)
    reasons: list[str] = []
    risks: list[RiskBar] = []
    for risk in CLASS_D_RISKS:
        mine = tuple(m for m in rows if m.risk == risk)
        deciding = max(mine, key=lambda m: m.net_upper, default=None)
        below = bool(mine) and all(below_bar(m.net_upper, threshold) for m in mine)
        label = risk.replace("_", " ")
        if deciding is None:
            reasons.append(f"{label}: no admitted measurement ran (D-5.1)")
        else:
            word = "below" if below else "not below"
            reasons.append(
                f"{label}: largest Wilson upper bound net of control {deciding.net_upper:.4f} ({deciding.name}, "
                f"{deciding.k}/{deciding.n} against control {deciding.control_k}/{deciding.control_n}"
                + (f", baseline {deciding.baseline:g}" if deciding.baseline else "")
                + f") is {word} the threshold {threshold:g} (D-5.1)"
            )
        risks.append(
            RiskBar(
                risk=risk, measured=bool(mine), deciding=deciding, below_threshold=below, measurements=mine
            )
        )
    passes = all(r.below_threshold for r in risks)
    return ClassDBar(
        threshold=threshold,
        justification=justification,
        risks=(risks[0], risks[1], risks[2]),
        passes=passes,
        reasons=tuple(reasons),
    )


def bar_from_facts(facts: VerdictFacts | Mapping[str, Any]) -> ClassDBar:
    """The bar from the verdict facts (V1) over the attacks the verdict admits (R0.2, C2, C-H6, C-W6)."""
    vf = facts if isinstance(facts, VerdictFacts) else VerdictFacts.model_validate(facts)
    if vf.class_ != "D" or vf.insignificance is None:
        raise ValueError(
            "bar_from_facts: Class D facts with a declared insignificance threshold are needed (D-5.1)"
        )
    admitted = ADMITTED_SURFACES[vf.track]
    # A measurement's own no-extraction rate, else the target's chance rate: the verdict's shift (R19, D-3)
    rows = [
        net_rate(a.name, a.risk, a.k, a.n, a.control_k, a.control_n, shift(a.baseline, vf.chance_rate))
        for a in vf.attacks
        if a.risk is not None
        and a.status == "run"
        and a.adjudicating
        and a.surface in admitted
        and a.k is not None
        and a.n is not None
    ]
    return evaluate_bar(vf.insignificance.threshold, vf.insignificance.justification, rows)
