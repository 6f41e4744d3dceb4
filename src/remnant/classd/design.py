"""The canary design (D5) in the record, the warning when designs differ, and what a pack size supports (R21).

D5: "Canary design materially determines audit power. The assessment MUST record the canary design — attribute
cardinality, repetition count in the installation set, and surface form — and MUST NOT compare rates across
assessments using different canary designs without stating the difference." :func:`design_of` reads the design
from a pack (declared values from its manifest, measured ones from its install split); :func:`comparison_warning`
states every difference, and returns None only when the designs match.

R21: Tier 4 for Class D needs the upper bound below the declared threshold, which the Standard calibrates as
"n ≥ 500 canaries" at zero recoveries. :func:`canary_support` says what a pack size can support, both by the bound
(the requirement) and by the table's count (the calibration constant): ``remnant plan`` calls it. Pure: no torch.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from remnant.standard.minima import (
    max_recoveries_for_removed,
    min_n_for_zero_recoveries,
    r21_row,
    upper_bound,
)
from remnant.statement.canonical import canonical_sha256

if TYPE_CHECKING:
    from remnant.packs.schema import Pack

#: The fields two designs must share for their rates to be compared without a stated difference (D5).
COMPARED = (
    "attribute_cardinality",
    "repetitions",
    "install_items_per_fact",
    "install_epochs",
    "surface_forms_digest",
    "link_options",
    "sector_affinity",
)


class CanaryDesign(BaseModel):
    """The canary design of one assessment (D5), as the record, statement appendix and report carry it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pack_id: str = Field(description="Pack identity.")
    pack_digest: str = Field(description="Pack digest.")
    attribute_cardinality: dict[str, int | str] = Field(
        description="Distinct values each attribute is drawn from ('unique' for identifiers) (D5)."
    )
    repetitions: int | None = Field(description="Repetition count in the installation set, as declared (D5).")
    install_items_per_fact: int | None = Field(
        description="Install items per (entity, attribute), counted in the install split (D5, measured)."
    )
    install_epochs: float | None = Field(
        default=None, description="Epochs the installation ran over the install set, where known (D5)."
    )
    surface_forms: dict[str, int] = Field(
        description="How many install templates, probe templates and answer phrasings the pack uses (D5)."
    )
    surface_forms_digest: str = Field(
        description="sha256 of the pack's surface forms, so equality is exact (D5)."
    )
    link_options: int | None = Field(description="Options per forced-choice linkage item (D-3.2).")
    sector_affinity: float | None = Field(description="Population correlation occupation ~ sector (D-4.2).")
    entities: int = Field(ge=0, description="Installed canary entities.")
    control_entities: int = Field(ge=0, description="Never-installed control entities (D4).")
    probe_entities: int = Field(ge=0, description="Entities in the scored probe set P (the n of each rate).")


def _install_items_per_fact(pack: Pack) -> int | None:
    if "install" not in pack.manifest.splits:
        return None
    counts = Counter(
        (it.entity_id, it.attribute)
        for it in pack.split("install")
        if it.entity_id is not None and it.attribute
    )
    values = set(counts.values())
    return values.pop() if len(values) == 1 else (max(values) if values else None)


def design_of(pack: Pack, *, install_epochs: float | None = None) -> CanaryDesign:
    """The D5 design record of a Class D pack (``install_epochs`` from the installation, when known)."""
    design = pack.manifest.design
    forms = design.get("surface_forms", {})

    def total(key: str) -> int:
        value = forms.get(key, {})
        return sum(len(v) for v in value.values()) if isinstance(value, dict) else 0

    roles = Counter(ent.role for ent in pack.manifest.entities)
    return CanaryDesign(
        pack_id=pack.manifest.id,
        pack_digest=pack.digest,
        attribute_cardinality={a: v.get("cardinality") for a, v in design.get("attributes", {}).items()},
        repetitions=design.get("repetitions"),
        install_items_per_fact=_install_items_per_fact(pack),
        install_epochs=install_epochs,
        surface_forms={
            "install_templates": total("install_templates"),
            "probe_templates": total("probe_templates"),
            "answer_forms": total("answer_forms"),
        },
        surface_forms_digest="sha256:"
        + canonical_sha256({k: v for k, v in forms.items() if k != "link_options"}),
        link_options=forms.get("link_options"),
        sector_affinity=design.get("population", {}).get("sector_affinity"),
        entities=sum(n for role, n in roles.items() if role != "control"),
        control_entities=roles.get("control", 0),
        probe_entities=roles.get("forget_probe", 0),
    )


def design_differences(a: CanaryDesign, b: CanaryDesign) -> list[tuple[str, Any, Any]]:
    """(field, value in a, value in b) for every D5 field on which the designs differ."""
    return [(f, getattr(a, f), getattr(b, f)) for f in COMPARED if getattr(a, f) != getattr(b, f)]


def comparison_warning(a: CanaryDesign, b: CanaryDesign) -> str | None:
    """The D5 statement a comparison of two assessments must carry when their canary designs differ; else None."""
    diffs = design_differences(a, b)
    if not diffs:
        return None
    parts = "; ".join(f"{field}: {x!r} vs {y!r}" for field, x, y in diffs)
    return (
        f"D5: the canary designs of {a.pack_id} and {b.pack_id} differ ({parts}); canary design determines audit "
        "power, so their Class D rates are not directly comparable"
    )


class CanarySupport(BaseModel):
    """What n scored canaries can support against a threshold (R20, R21, D-5.1), for ``remnant plan``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n: int = Field(ge=0, description="Canaries scored per rate (entities in P).")
    threshold: float = Field(gt=0, le=1, description="The declared insignificance threshold (D-5.1).")
    upper_bound_at_zero: float | None = Field(
        description="Wilson 95% upper bound at zero recoveries on n (R19)."
    )
    bound_n: int = Field(
        description="Smallest n whose bound at zero recoveries is below the threshold (R21)."
    )
    table_n: int = Field(description="R21's Tier 4 (Class D) count: the Standard's calibration constant.")
    max_net_recoveries: int | None = Field(
        description="Most recoveries (net of a zero control rate) on n that still leave the bound below it."
    )
    bound_met: bool = Field(description="n can meet the bar at zero recoveries (the requirement, R21).")
    table_met: bool = Field(description="n meets R21's 500-canary count.")
    tier4_supportable: bool = Field(description="Both: the statistical bar of a Class D Tier 4 claim.")
    note: str = Field(description="The finding in words.")


def canary_support(n: int, threshold: float) -> CanarySupport:
    """What ``n`` canaries per rate can support against ``threshold`` (R21, D-5.1)."""
    row = r21_row(4, "D")
    need = min_n_for_zero_recoveries(threshold)
    at_zero = upper_bound(0, n) if n >= 1 else None
    bound_met = at_zero is not None and at_zero < threshold
    table_met = n >= row.table_n
    most = max_recoveries_for_removed(n, threshold) if n >= 1 else None
    if bound_met and table_met:
        note = f"{n} canaries can support a Class D Tier 4 claim at threshold {threshold:g} (R21)"
    else:
        short = []
        if not bound_met:
            short.append(f"the bound needs n ≥ {need} at zero recoveries")
        if not table_met:
            short.append(f"R21's count is {row.table_n} canaries")
        note = f"{n} canaries cannot support Class D Tier 4 at threshold {threshold:g}: " + "; ".join(short)
    return CanarySupport(
        n=n,
        threshold=threshold,
        upper_bound_at_zero=at_zero,
        bound_n=need,
        table_n=row.table_n,
        max_net_recoveries=most,
        bound_met=bound_met,
        table_met=table_met,
        tier4_supportable=bound_met and table_met,
        note=note,
    )


def pack_support(pack: Pack, threshold: float) -> CanarySupport:
    """:func:`canary_support` for the number of scored canary entities a pack has (its probe set P)."""
    return canary_support(design_of(pack).probe_entities, threshold)
