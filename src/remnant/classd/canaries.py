"""What the three Class D tests share: target and control canary probes, and counts net of control (D4).

Every Class D rate is measured twice under the identical attack on the same model state: on the installed
canaries the claim is about (the pack's ``probe`` split, entities P) and on never-installed control entities of
identical construction (the ``controls`` split). The control-entity rate is what the attack gives on entities the
model never saw, and every rate is reported net of it (D4, D-2.2, D-3.1, D-4.1). Where items have a rate that is
reached without extracting anything — forced-choice chance (D-3) or the population baseline (D-4.2) — it travels
with the counts as ``baseline`` and the verdict facts take both rates net of it
(:class:`remnant.standard.facts.AttackFact`).

Target and control probes go through the attack in one call, in a fixed order, so their prompts, seeds and scoring
are identical (C-Q4); the outcomes are split back by item id. Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from remnant.errors import PackError
from remnant.score.probe import Probe
from remnant.score.rates import count_items
from remnant.standard.vocabulary import CLASS_D_RISKS, Risk

if TYPE_CHECKING:
    from remnant.packs.schema import Pack

RISKS = CLASS_D_RISKS
#: Pack splits: installed canaries the claim is about, never-installed controls (D4), retained entities.
TARGET_SPLIT, CONTROL_SPLIT, RETAIN_SPLIT = "probe", "controls", "retain"


@dataclass(frozen=True)
class CanaryProbes:
    """One risk's probes on target and control entities, with the no-extraction baseline of each set.

    ``baseline`` is the rate reached without extraction on the target probes (None where it is zero, as for
    free-text identifiers); ``control_baseline`` the same on the control probes. ``detail`` says how the
    baseline was found (recorded with the result, D-4.2).
    """

    risk: Risk
    target: tuple[Probe, ...]
    control: tuple[Probe, ...]
    baseline: float | None = None
    control_baseline: float | None = None
    detail: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.target or not self.control:
            raise PackError(
                f"{self.risk}: needs target and control canaries (D4); got {len(self.target)} target and "
                f"{len(self.control)} control probes",
                requirement="D4",
            )
        ids = [p.item_id for p in (*self.target, *self.control)]
        if len(set(ids)) != len(ids):
            raise PackError(f"{self.risk}: probe ids repeat between target and control sets")

    @property
    def probes(self) -> tuple[Probe, ...]:
        """Target then control probes: the one sequence an attack runs on (identical treatment, C-Q4)."""
        return (*self.target, *self.control)


def measurement_name(risk: str, method: str, surface: str = "inference_time") -> str:
    """The attack name of a Class D measurement in the verdict facts: ``risk``, then ``/relearning`` on that
    surface (D-5.3), then ``/method`` unless it is the direct query: ``singling_out``, ``linkability/likelihood``,
    ``singling_out/prefill``, ``inference/relearning``."""
    parts = (
        [risk] + ([surface] if surface != "inference_time" else []) + ([method] if method != "direct" else [])
    )
    return "/".join(parts)


@dataclass(frozen=True)
class RiskCounts:
    """One measurement of one risk on one model state: k/n on target canaries beside control entities (D4).

    ``method`` names the measurement (``"direct"``, an attack name, ``"likelihood"``); ``expected_k`` and
    ``control_expected_k`` are the exact expected counts of analytic attacks (then k is their rounding, as
    :func:`remnant.attacks.harness.cell` does). ``hits`` maps item id to its score for the record.
    """

    risk: Risk
    method: str
    surface: str
    k: int
    n: int
    control_k: int
    control_n: int
    baseline: float | None = None
    expected_k: float | None = None
    control_expected_k: float | None = None
    hits: Mapping[str, bool | float] = field(default_factory=dict)
    detail: Mapping[str, object] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The attack name in the verdict facts (:func:`measurement_name`)."""
        return measurement_name(self.risk, self.method, self.surface)

    @property
    def rate(self) -> float:
        return self.k / self.n

    @property
    def control_rate(self) -> float:
        return self.control_k / self.control_n

    def fact(self, *, adjudicating: bool = True) -> dict[str, object]:
        """This measurement as an attack entry of the verdict facts (V1; D4 control, D-4.2 baseline)."""
        entry: dict[str, object] = {
            "name": self.name,
            "surface": self.surface,
            "status": "run",
            "k": self.k,
            "n": self.n,
            "control_k": self.control_k,
            "control_n": self.control_n,
            "risk": self.risk,
        }
        if self.baseline:
            entry["baseline"] = self.baseline
        if not adjudicating:
            entry["adjudicating"] = False
        return entry


def count(
    canaries: CanaryProbes,
    scores: Mapping[str, bool | float],
    *,
    method: str,
    surface: str = "inference_time",
    detail: Mapping[str, object] | None = None,
) -> RiskCounts:
    """Counts from per-item scores (bool hits, or probabilities from analytic attacks) on both sets (D4)."""
    missing = [p.item_id for p in canaries.probes if p.item_id not in scores]
    if missing:
        raise ValueError(f"{canaries.risk}/{method}: no score for item {missing[0]!r}")

    # the one rule from item results to counts (no willingness on a canary set)
    target = count_items([scores[p.item_id] for p in canaries.target], ())
    control = count_items([scores[p.item_id] for p in canaries.control], ())
    return RiskCounts(
        risk=canaries.risk,
        method=method,
        surface=surface,
        k=target.k,
        n=len(canaries.target),
        control_k=control.k,
        control_n=len(canaries.control),
        baseline=canaries.baseline,
        expected_k=target.expected_k,
        control_expected_k=control.expected_k,
        hits={p.item_id: scores[p.item_id] for p in canaries.probes},
        detail={**canaries.detail, **(detail or {})},
    )


def entity_names(pack: Pack) -> dict[str, str]:
    """Entity id → name, from the pack manifest."""
    return {ent.id: ent.name for ent in pack.manifest.entities}


def entity_attributes(pack: Pack) -> dict[str, Mapping[str, str]]:
    """Entity id → attributes, from the pack manifest (ground truth, D3)."""
    return {ent.id: ent.attributes for ent in pack.manifest.entities}


def items_of(pack: Pack, split: str, kind: str, attribute: str | None = None) -> list[Any]:
    """Items of ``kind`` (and ``attribute``) in ``split``, in the manifest's order; a missing split gives []."""
    if split not in pack.manifest.splits:
        return []
    return [
        it
        for it in pack.split(split)
        if it.kind == kind and (attribute is None or it.attribute == attribute) and it.entity_id is not None
    ]


def require_class_d(pack: Pack) -> None:
    """Refuse a pack that is not a Class D canary pack (D1–D5)."""
    if pack.manifest.pack_class != "D":
        raise PackError(
            f"pack {pack.manifest.id}: Class D tests need a Class D canary pack, not class "
            f"{pack.manifest.pack_class}",
            requirement="D3",
        )
