"""The Class D battery on one model state: the three risks under every admitted attack (§5, D-2 to D-5.3).

:func:`class_d_canaries` builds the three probe sets from a pack; :func:`run_battery` runs them on the model state
in an :class:`~remnant.attacks.base.AttackContext` — the direct query, linkability by option likelihood, and each
attack given (prefill, many-shot, repeated sampling …) where it is defined for the risk's response format and the
track (C-Q2: otherwise recorded *not applicable*). Each measurement counts target canaries and never-installed
control entities under the identical attack on the same state (D4). :meth:`BatteryResult.facts_attacks` gives the
attack entries of the verdict facts. Relearning (D-5.3) is measured by the engine
(:class:`remnant.engine.classd.BatteryRelearning`).

torch is imported only through the attack context and the likelihood scoring, inside the functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from remnant.classd.canaries import RETAIN_SPLIT, RISKS, CanaryProbes, RiskCounts, count
from remnant.classd.linkability import score_by_likelihood
from remnant.classd.singling_out import CONTEXT_ATTRIBUTE, IDENTIFIER, identifier_probes
from remnant.score.probe import Probe, target_format
from remnant.standard.vocabulary import Risk

if TYPE_CHECKING:
    from remnant.packs.schema import Pack


@dataclass(frozen=True)
class BatterySpec:
    """What the battery measures: the singling-out attributes and the two linkability scorings (D-2.1, D-3)."""

    identifier: str = IDENTIFIER
    context_attribute: str = CONTEXT_ATTRIBUTE
    linkability_likelihood: bool = True
    linkability_generation: bool = True
    risks: tuple[Risk, ...] = RISKS
    #: Give many-shot attacks demonstrations of the risk's own question shape on retained entities.
    risk_demonstrations: bool = True

    def components(self) -> dict[Risk, Any]:
        """The registered ``classd`` components of :attr:`risks`, each carrying its parameters (K4, R23)."""
        from remnant import registry

        params: dict[Risk, dict[str, object]] = {
            "singling_out": {"attribute": self.identifier, "context_attribute": self.context_attribute},
            "linkability": {
                "likelihood": self.linkability_likelihood,
                "generation": self.linkability_generation,
            },
            "inference": {},
        }
        return {risk: registry.create("classd", risk, params[risk]) for risk in self.risks}

    def describe(self) -> dict[str, dict[str, object]]:
        """Every component's name, version and parameters, JSON-ready (what the record names)."""
        return {risk: c.spec.to_dict() for risk, c in self.components().items()}


def class_d_canaries(pack: Pack, spec: BatterySpec | None = None) -> dict[Risk, CanaryProbes]:
    """The target and control probe sets of each risk in ``spec.risks`` (D-2.1, D-3.1, D-4.1, D4)."""
    return {risk: c.probes(pack) for risk, c in (spec or BatterySpec()).components().items()}


def demonstrations(pack: Pack, risk: Risk, spec: BatterySpec | None = None) -> tuple[Probe, ...]:
    """Many-shot demonstrations for ``risk``: the same question shape on *retained* entities, never the target."""
    from remnant.classd.canaries import entity_names, items_of

    spec = spec or BatterySpec()
    if risk == "singling_out":
        return identifier_probes(pack, RETAIN_SPLIT, spec.identifier, spec.context_attribute)
    kind = "link" if risk == "linkability" else "infer"
    names = entity_names(pack)
    return tuple(
        Probe.from_item(it, names.get(str(it.entity_id))) for it in items_of(pack, RETAIN_SPLIT, kind)
    )


@dataclass(frozen=True)
class NotApplicable:
    """A risk × attack pair the attack is undefined for: recorded, never counted as withstood (C-Q2)."""

    risk: Risk
    attack: str
    reason: str

    def fact(self) -> dict[str, object]:
        return {
            "name": f"{self.risk}/{self.attack}",
            "surface": "inference_time",
            "status": "not_applicable",
            "reason": self.reason,
            "risk": self.risk,
        }


@dataclass(frozen=True)
class BatteryResult:
    """Every measurement of the battery on one state, the not-applicable pairs, and the attacks' metadata."""

    measurements: tuple[RiskCounts, ...]
    not_applicable: tuple[NotApplicable, ...] = ()
    attacks: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    components: Mapping[str, object] = field(default_factory=dict)

    def facts_attacks(self) -> list[dict[str, object]]:
        """The attack entries of the verdict facts (V1), one per measurement and not-applicable pair."""
        return [m.fact() for m in self.measurements] + [na.fact() for na in self.not_applicable]

    def by_name(self) -> dict[str, RiskCounts]:
        return {m.name: m for m in self.measurements}

    def to_dict(self) -> dict[str, object]:
        return {
            "measurements": [m.to_dict() for m in self.measurements],
            "not_applicable": [na.__dict__ for na in self.not_applicable],
            "attacks": {k: dict(v) for k, v in self.attacks.items()},
            "components": dict(self.components),
        }


def measure(
    ctx: Any, canaries: CanaryProbes, attack: Any | None = None, *, surface: str = "inference_time"
) -> RiskCounts:
    """One risk under one attack (None: the direct query) on the context's model state, targets and controls in
    one call so prompts, seeds and scoring are identical (C-Q4, D4)."""
    from remnant.attacks.base import no_attack

    probes = list(canaries.probes)
    outcomes = attack.run(ctx, probes) if attack is not None else no_attack(ctx, probes)
    if [o.item_id for o in outcomes] != [p.item_id for p in probes]:
        raise RuntimeError(f"{canaries.risk}: attack outcomes do not match its probes")
    scores: dict[str, bool | float] = {o.item_id: o.kappa for o in outcomes}
    method = "direct" if attack is None else str(attack.name)
    return count(canaries, scores, method=method, surface=surface)


def run_battery(
    ctx: Any,
    pack: Pack,
    attacks: Sequence[Any] = (),
    *,
    track: str = "W",
    spec: BatterySpec | None = None,
    canaries: Mapping[Risk, CanaryProbes] | None = None,
) -> BatteryResult:
    """The Class D battery on ``ctx``'s model state: direct query, linkability by likelihood, and each attack.

    ``attacks`` are attack instances (``registry.create("attack", name, params)``) whose surface is
    ``inference_time``; weight-transform and relearning surfaces are run by the engine. Many-shot attacks use
    ``ctx.demonstrations``; give them :func:`demonstrations` of the risk for a like-for-like prompt.
    """
    spec = spec or BatterySpec()
    sets = dict(canaries) if canaries is not None else class_d_canaries(pack, spec)
    out: list[RiskCounts] = []
    na: list[NotApplicable] = []
    meta: dict[str, Mapping[str, object]] = {}
    for risk, canary in sets.items():
        generation = risk != "linkability" or spec.linkability_generation
        if generation:
            out.append(measure(ctx, canary))
        demos = demonstrations(pack, risk, spec) if spec.risk_demonstrations else ()
        risk_ctx = replace(ctx, demonstrations=demos) if demos else ctx
        if risk == "linkability" and spec.linkability_likelihood:
            out.append(score_by_likelihood(ctx.model, ctx.tokenizer, ctx.fmt, canary))
        if not generation:
            continue
        for attack in attacks:
            meta[attack.name] = attack.describe()
            reason = attack.applicable(target_format(list(canary.probes)), track)
            if reason is not None:
                na.append(NotApplicable(risk, attack.name, reason))
                continue
            out.append(measure(risk_ctx, canary, attack))
    return BatteryResult(tuple(out), tuple(na), meta, spec.describe())


__all__ = [
    "BatteryResult",
    "BatterySpec",
    "NotApplicable",
    "class_d_canaries",
    "demonstrations",
    "measure",
    "run_battery",
]
