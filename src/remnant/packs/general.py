"""General-knowledge utility questions with known answers (R10's general-utility set).

Capitals and common facts are shipped as data (``data/general.json``); simple arithmetic is generated
deterministically. Binding keeps only the questions the never-modified control answers correctly (R10).
"""

from __future__ import annotations

import json
from importlib import resources

from remnant.errors import PackError
from remnant.packs.schema import Item, Pack, seal


def _arithmetic() -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for a in range(2, 12):
        for b in range(2, 12, 2):
            out.append((f"What is {a} plus {b}?", str(a + b)))
    for a in range(2, 10):
        for b in range(2, 10, 3):
            out.append((f"What is {a} times {b}?", str(a * b)))
    for a in range(20, 60, 5):
        out.append((f"What is {a} minus 10?", str(a - 10)))
    return out


def general_items() -> list[Item]:
    """All shipped general questions as pack items (kind ``general``, split ``general``)."""
    data = json.loads(
        resources.files("remnant.packs").joinpath("data/general.json").read_text(encoding="utf-8")
    )
    rows = [(r["question"], list(r["accepted"]), r["topic"]) for r in data["items"]]
    rows += [(q, [a], "arithmetic") for q, a in _arithmetic()]
    return [
        Item(
            id=f"g{i:04d}",
            kind="general",
            question=q,
            answer=acc[0],
            accepted=acc,
            template_id=f"general.{topic}",
            phrasing="probe",
            split="general",
        )
        for i, (q, acc, topic) in enumerate(rows)
    ]


def with_general(pack: Pack) -> Pack:
    """``pack`` with the shipped general questions as its ``general`` split, resealed (R10).

    Class D packs carry them from minting; a Class C pack gains them here (``remnant mint --class C --general``)
    so that a ``general_qa_kappa`` utility has something to measure.
    """
    if pack.manifest.splits.get("general"):
        raise PackError(f"pack {pack.manifest.id}: already has a general split", requirement="R10")
    general = general_items()
    ids = [it.id for it in general]
    splits = {**pack.manifest.splits, "general": ids}
    manifest = pack.manifest.model_copy(
        update={"splits": splits, "counts": {**pack.manifest.counts, "general": len(ids)}, "digest": ""}
    )
    return seal(manifest, [*pack.items, *general])
