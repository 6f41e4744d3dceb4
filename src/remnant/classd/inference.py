"""Inference (D-4.1, D-4.2): can a held-out attribute be inferred from an entity's other attributes?

The pack's inference items give an entity's name and employer and ask for its occupation. Occupation depends on
the employer's sector in the population the canaries were drawn from (:mod:`remnant.packs.population`), so part
of the answer is inferable from population statistics alone. D-4.2: report that population baseline and score net
of it. The baseline here is the accuracy, on the same items, of the best guess from the pack's recorded statistics
alone: for each item, the modal occupation of its employer's sector in ``design.population.statistics_installed``
(ties broken by name, so the guess is deterministic). The pack also records the same accuracy over the whole
installed population (``baseline_occupation_given_sector``); both are reported.

The rate is the normalised match of the true occupation in the generation (as singling out, D-2.2), under each
attack, on target canaries and on control entities (D4); the facts take it net of the population baseline and of
the control-entity rate (``AttackFact.baseline``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from remnant.classd.canaries import (
    CONTROL_SPLIT,
    TARGET_SPLIT,
    CanaryProbes,
    entity_attributes,
    entity_names,
    items_of,
    require_class_d,
)
from remnant.errors import PackError
from remnant.registry import register
from remnant.score.probe import Probe

if TYPE_CHECKING:
    from remnant.packs.schema import Pack

#: The attribute held out and the one it is inferred from (the pack's INFER_TEMPLATE).
HELD_OUT, GIVEN = "occupation", "employer"


def population_guesses(design: Mapping[str, Any]) -> dict[str, str]:
    """Employer → the best population-only guess of the occupation (its sector's modal occupation, D-4.2)."""
    try:
        stats = design["population"]["statistics_installed"]
        table: Mapping[str, Mapping[str, int]] = stats["occupation_given_sector"]
        sector_of: Mapping[str, str] = stats["sector_of_employer"]
    except (KeyError, TypeError):
        raise PackError(
            "pack design has no population statistics (design.population.statistics_installed), so the "
            "population baseline cannot be reported",
            requirement="D-4.2",
        ) from None
    modal = {sector: min(row, key=lambda occ: (-row[occ], occ)) for sector, row in table.items() if row}
    return {employer: modal[sector] for employer, sector in sector_of.items() if sector in modal}


def baseline_rate(probes: Sequence[Probe], given: Mapping[str, str], guesses: Mapping[str, str]) -> float:
    """Share of ``probes`` whose truth equals the population guess from its given employer (D-4.2)."""
    if not probes:
        return 0.0
    right = sum(guesses.get(given[p.item_id]) in p.accepted for p in probes)
    return right / len(probes)


def inference_probes(pack: Pack) -> CanaryProbes:
    """Inference probes on target canaries and control entities with the population baseline (D-4, D4)."""
    require_class_d(pack)
    names, attrs = entity_names(pack), entity_attributes(pack)
    guesses = population_guesses(pack.manifest.design)
    given: dict[str, str] = {}

    def probes(split: str) -> tuple[Probe, ...]:
        out = []
        for item in items_of(pack, split, "infer", HELD_OUT):
            ent = str(item.entity_id)
            given[item.id] = (item.given or {}).get(GIVEN, attrs[ent][GIVEN])
            out.append(Probe.from_item(item, names.get(ent)))
        return tuple(out)

    target, control = probes(TARGET_SPLIT), probes(CONTROL_SPLIT)
    population = pack.manifest.design.get("population", {})
    return CanaryProbes(
        risk="inference",
        target=target,
        control=control,
        baseline=baseline_rate(target, given, guesses),
        control_baseline=baseline_rate(control, given, guesses),
        detail={
            "held_out": HELD_OUT,
            "given": ["name", GIVEN],
            "population_baseline": "accuracy of the sector's modal occupation on the same items (D-4.2)",
            "population_baseline_installed": population.get("baseline_occupation_given_sector"),
            "population_guess": {p.item_id: guesses.get(given[p.item_id]) for p in (*target, *control)},
        },
    )


@register("classd", "inference", "1")
class Inference:
    """D-4.1/D-4.2 as a registered component (held-out occupation from employer, population baseline)."""

    name = "inference"
    version = "1"
    spec: Any = None

    def __init__(self) -> None:  # no parameters: the held-out attribute and the baseline are the pack's
        pass

    def probes(self, pack: Pack) -> CanaryProbes:
        return inference_probes(pack)
