"""The Class D battery's inputs (§5, D-2 to D-5.3): what it runs (recorded as its components), the three risks'
probe sets (target canaries and never-installed control entities, D4) and many-shot demonstrations. The engine
measures them (:mod:`remnant.engine.classd`; C-Q2: an attack undefined for a risk is recorded *not applicable*).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from remnant.classd.canaries import RETAIN_SPLIT, RISKS, CanaryProbes
from remnant.classd.singling_out import CONTEXT_ATTRIBUTE, IDENTIFIER, identifier_probes
from remnant.score.probe import Probe
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


__all__ = [
    "BatterySpec",
    "class_d_canaries",
    "demonstrations",
]
