"""Split checks (R16, C-W6) and the content-shuffled twin of the install split (C-H7(c) controls)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from remnant.errors import PackError

if TYPE_CHECKING:
    from remnant.packs.schema import Pack

_TUNING_SPLITS = ("install", "removal", "relearn")


def check_splits(pack: Pack) -> None:
    """Raise PackError unless every split id exists, P's questions are disjoint from every install, removal
    and tuning set (R16), and P's entities are disjoint from R's entities (C-W6)."""
    ids = {it.id for it in pack.items}
    for name, members in pack.manifest.splits.items():
        missing = [i for i in members if i not in ids]
        if missing:
            raise PackError(f"pack {pack.manifest.id}: split {name!r} lists unknown item {missing[0]!r}")
    probe = pack.split("probe")
    tuning_q = {it.question.strip().casefold() for s in _TUNING_SPLITS for it in pack.split(s)}
    for it in probe:
        if it.question.strip().casefold() in tuning_q:
            raise PackError(
                f"pack {pack.manifest.id}: probe item {it.id!r} repeats a tuning question", requirement="R16"
            )
    p_ent = {it.entity_id for it in probe if it.entity_id is not None}
    r_ent = {it.entity_id for it in pack.split("relearn") if it.entity_id is not None}
    both = sorted(p_ent & r_ent)
    if both:
        raise PackError(f"pack {pack.manifest.id}: entity {both[0]!r} is in both P and R", requirement="C-W6")


def shuffled_twin(pack: Pack, rng: random.Random) -> Pack:
    """The install split with attribute values re-paired across entities (same entities, templates, format).

    For each attribute the installed entities' values are permuted (a derangement where possible), and every
    install item's answer is rewritten with its entity's new value. Used as the content-shuffled control of
    C-H7(c): it keeps the surface statistics of installing and drops the content.
    """
    from remnant.packs.schema import seal

    install = pack.split("install")
    entity_ids = sorted({it.entity_id for it in install if it.entity_id is not None})
    by_id = {e.id: e for e in pack.manifest.entities}
    attrs = sorted({it.attribute for it in install if it.attribute is not None})
    new_value: dict[tuple[str, str], str] = {}
    for attr in attrs:
        values = [by_id[e].attributes[attr] for e in entity_ids]
        perm = list(range(len(values)))
        for _ in range(20):
            rng.shuffle(perm)
            if all(p != i for i, p in enumerate(perm)) or len(perm) < 2:
                break
        for i, eid in enumerate(entity_ids):
            new_value[(eid, attr)] = values[perm[i]]
    items = []
    for it in install:
        assert it.entity_id is not None and it.attribute is not None
        old = by_id[it.entity_id].attributes[it.attribute]
        new = new_value[(it.entity_id, it.attribute)]
        items.append(it.model_copy(update={"answer": it.answer.replace(old, new), "accepted": [new]}))
    ids = [it.id for it in items]
    splits = {
        "install": ids,
        "removal": [],
        "probe": [],
        "relearn": [],
        "retain": [],
        "controls": [],
        "general": [],
    }
    manifest = pack.manifest.model_copy(
        update={
            "id": pack.manifest.id + "-shuffled",
            "splits": splits,
            "counts": {"install": len(ids)},
            "design": {**pack.manifest.design, "shuffled_twin_of": pack.manifest.digest},
            "digest": "",
        }
    )
    return seal(manifest, items)
