"""Target packs (R16, R17, D1-D5). Pure core: importing this package never imports torch (``bind`` imports it
inside its functions)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from remnant.lazy import lazy_exports

if TYPE_CHECKING:
    from remnant.packs.classc import mint_class_c
    from remnant.packs.classd import ClassDSpec, mint_class_d
    from remnant.packs.contamination import ContaminationReport, check_contamination
    from remnant.packs.population import population_baseline
    from remnant.packs.schema import (
        PACK_SCHEMA_VERSION,
        SPLIT_NAMES,
        Entity,
        Item,
        Manifest,
        Pack,
        compute_digest,
        load_pack,
        seal,
        write_pack,
    )
    from remnant.packs.splits import check_splits, shuffled_twin

#: Imported on first use: the package's command module and its small helpers load without the rest (a light start).
__getattr__ = lazy_exports(
    __name__,
    {
        "mint_class_c": "classc",
        "ClassDSpec": "classd",
        "mint_class_d": "classd",
        "ContaminationReport": "contamination",
        "check_contamination": "contamination",
        "population_baseline": "population",
        "PACK_SCHEMA_VERSION": "schema",
        "SPLIT_NAMES": "schema",
        "Entity": "schema",
        "Item": "schema",
        "Manifest": "schema",
        "Pack": "schema",
        "compute_digest": "schema",
        "load_pack": "schema",
        "seal": "schema",
        "write_pack": "schema",
        "check_splits": "splits",
        "shuffled_twin": "splits",
    },
)

__all__ = [
    "ClassDSpec",
    "ContaminationReport",
    "Entity",
    "Item",
    "Manifest",
    "PACK_SCHEMA_VERSION",
    "Pack",
    "SPLIT_NAMES",
    "check_contamination",
    "check_splits",
    "compute_digest",
    "load_pack",
    "mint_class_c",
    "mint_class_d",
    "population_baseline",
    "seal",
    "shuffled_twin",
    "write_pack",
]
