"""The split rules of a target pack, one definition run by mint (``seal``) and by every load (R16, C-W6, D4).

The pack digest is unkeyed, so a pack that matches its digest proves only that nobody changed it *since it was
last sealed*; anyone can move a probe item into the install split and reseal. Every load therefore re-checks
what minting guaranteed, and :func:`check_splits` is the only place that says what that is:

- **ids**: every split is one of :data:`~remnant.packs.schema.SPLIT_NAMES` and all of them are declared; item ids
  are unique; a split lists an id once, and only ids of items in ``items.jsonl``; every item is in some split,
  and its own ``split`` field names a split that lists it; ``counts`` agree with the splits; every item's entity
  is in the entity table, whose ids are unique;
- **R16**: P (the ``probe`` split, and every item whose own split is ``probe``) shares no item and no question
  text (case-folded) with a set used to install, remove or tune (``install``, ``removal``, ``relearn``), and no
  item with ``retain`` (many-shot demonstrations) or ``general``;
- **C-W6**: the relearning set shares no item, no question and no entity with P (entity level: relearning on
  another fact of a scored person teaches the scored item);
- **D4**: control entities are never installed: no entity of the ``controls`` split, and no entity whose role is
  ``control``, is in ``install``, ``removal`` or ``relearn``; each split holds entities of its role;
- **required splits**: the splits the pack's class needs hold items (:data:`REQUIRED_SPLITS`). Splits that only
  some assessments need (``relearn``, ``retain``, ``general``) are checked against the config at
  pre-registration (:mod:`remnant.config.pack_fit`).

Each refusal is a :class:`~remnant.errors.PackError` naming the pack file (or pack id when minting), the split or
item, and the requirement.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING

from remnant.errors import PackError

if TYPE_CHECKING:
    from remnant.packs.schema import Item, Pack

#: Sets used to install the target, to remove it, or to tune either process: P is disjoint from each (R16).
TUNING_SPLITS: tuple[str, ...] = ("install", "removal", "relearn")

#: Splits a pack of each class must hold items in, with the requirement that needs them.
REQUIRED_SPLITS: dict[str, dict[str, str]] = {
    "C": {"install": "R2", "removal": "R2", "probe": "R16"},
    "D": {"install": "R2", "removal": "R2", "probe": "R16", "controls": "D4"},
}

#: Entity roles each split may hold items of, and the requirement a stray entity breaks.
_SPLIT_ROLES: dict[str, tuple[frozenset[str], str]] = {
    "install": (frozenset({"forget_probe", "forget_relearn", "retain", "item"}), "D4"),
    "removal": (frozenset({"forget_probe", "forget_relearn", "item"}), "R16"),
    "relearn": (frozenset({"forget_relearn", "item"}), "C-W6"),
    "probe": (frozenset({"forget_probe", "item"}), "R16"),
    "retain": (frozenset({"retain", "item"}), "R16"),
    "controls": (frozenset({"control"}), "D4"),
}


def check_splits(pack: Pack, *, source: str | None = None, required: Collection[str] | None = None) -> None:
    """Raise PackError unless ``pack`` keeps every split rule in the module docstring.

    ``source`` names the pack in messages (the ``pack.json`` path on load; the pack id when minting).
    ``required`` overrides the splits that must hold items (default :data:`REQUIRED_SPLITS` of its class).
    """
    where = source or f"pack {pack.manifest.id}"
    _check_ids(pack, where)
    _check_held_out(pack, where)
    _check_bookkeeping(pack, where)
    _check_entities(pack, where)
    need = REQUIRED_SPLITS[pack.manifest.pack_class]
    names = need if required is None else {name: need.get(name, "R16") for name in required}
    for name, requirement in names.items():
        if not pack.manifest.splits.get(name):
            raise PackError(
                f"{where}: split {name!r} is empty; a class {pack.manifest.pack_class} pack needs items in it",
                requirement=requirement,
            )


def _check_ids(pack: Pack, where: str) -> None:
    """Split names, unique item ids, and split lists that name each existing item once."""
    from remnant.packs.schema import SPLIT_NAMES

    splits = pack.manifest.splits
    unknown = sorted(set(splits) - set(SPLIT_NAMES))
    if unknown:
        raise PackError(
            f"{where}: split {unknown[0][:80]!r} is not a pack split (pack splits: {', '.join(SPLIT_NAMES)})",
            requirement="R16",
        )
    missing = [name for name in SPLIT_NAMES if name not in splits]
    if missing:
        raise PackError(
            f"{where}: declares no split {missing[0]!r} (every pack declares all of {', '.join(SPLIT_NAMES)})",
            requirement="R16",
        )
    repeated = _first_repeat(it.id for it in pack.items)
    if repeated is not None:
        raise PackError(f"{where}: item id {repeated!r} appears twice in items.jsonl", requirement="R16")
    ids = {it.id for it in pack.items}
    for name in SPLIT_NAMES:
        members = splits[name]
        twice = _first_repeat(members)
        if twice is not None:
            raise PackError(f"{where}: split {name!r} lists item {twice!r} twice", requirement="R16")
        dangling = next((i for i in members if i not in ids), None)
        if dangling is not None:
            raise PackError(
                f"{where}: split {name!r} lists item {dangling!r}, which items.jsonl does not hold",
                requirement="R16",
            )


def _check_held_out(pack: Pack, where: str) -> None:
    """P against the tuning sets (R16), the relearning set (C-W6) and the other splits; controls (D4)."""
    splits = pack.manifest.splits
    probe_ids = set(splits["probe"]) | {it.id for it in pack.items if it.split == "probe"}
    for name in (*TUNING_SPLITS, "retain", "controls", "general"):
        leaked = next((i for i in splits[name] if i in probe_ids), None)
        if leaked is None:
            continue
        if name == "relearn":
            message, requirement = "the relearning set must be disjoint from P (R16)", "C-W6"
        elif name == "controls":
            message, requirement = "control entities are never installed or scored as P", "D4"
        else:
            message, requirement = "P must be disjoint from every set used to install, remove or tune", "R16"
        raise PackError(
            f"{where}: split {name!r} lists probe item {leaked!r}; {message}", requirement=requirement
        )
    probe = [pack.item(i) for i in probe_ids]
    for name in reversed(TUNING_SPLITS):  # relearn first: its repeat is the more specific C-W6
        questions = {_text(it.question): it.id for it in pack.split(name)}
        for it in probe:
            if _text(it.question) in questions:
                relearn = name == "relearn"
                why = (
                    "the relearning set (C-W6), a set used to tune (R16)"
                    if relearn
                    else "every set used to install, remove or tune (R16)"
                )
                raise PackError(
                    f"{where}: probe item {it.id!r} repeats the question of {name!r} item "
                    f"{questions[_text(it.question)]!r}; P is held out from {why}",
                    requirement="C-W6" if relearn else "R16",
                )
    p_entities = {it.entity_id for it in probe if it.entity_id is not None}
    both = sorted(p_entities & _entities(pack.split("relearn")))
    if both:
        raise PackError(
            f"{where}: entity {both[0]!r} is in both P (split 'probe') and R (split 'relearn'); relearning must "
            "not teach a scored entity",
            requirement="C-W6",
        )
    installed = _entities(it for name in TUNING_SPLITS for it in pack.split(name))
    controls = sorted(_entities(pack.split("controls")) & installed)
    if controls:
        raise PackError(
            f"{where}: control entity {controls[0]!r} (split 'controls') is in a training split; controls "
            "are never installed",
            requirement="D4",
        )


def _check_bookkeeping(pack: Pack, where: str) -> None:
    """Every item in some split, its own ``split`` field among them; ``counts`` agree with the splits."""
    from remnant.packs.schema import SPLIT_NAMES

    splits = pack.manifest.splits
    listed_in: dict[str, set[str]] = {}
    for name in SPLIT_NAMES:
        for item_id in splits[name]:
            listed_in.setdefault(item_id, set()).add(name)
    for it in pack.items:
        names = listed_in.get(it.id)
        if not names:
            raise PackError(f"{where}: item {it.id!r} is in no split", requirement="R16")
        if it.split not in names:
            raise PackError(
                f"{where}: item {it.id!r} says its split is {it.split[:80]!r}, which does not list it "
                f"(listed in {', '.join(sorted(names))})",
                requirement="R16",
            )
    for name in SPLIT_NAMES:
        count = pack.manifest.counts.get(name)
        if count is not None and count != len(splits[name]):
            raise PackError(
                f"{where}: counts.{name} is {count} but split {name!r} lists {len(splits[name])} items",
                requirement="R16",
            )


def _check_entities(pack: Pack, where: str) -> None:
    """Unique entity ids; every item's entity known; each split holds entities of its role (D4, R16, C-W6)."""
    entities = pack.manifest.entities
    repeated = _first_repeat(e.id for e in entities)
    if repeated is not None:
        raise PackError(
            f"{where}: entity id {repeated!r} appears twice in the entity table", requirement="R16"
        )
    role = {e.id: e.role for e in entities}
    for it in pack.items:
        if it.entity_id is not None and it.entity_id not in role:
            raise PackError(
                f"{where}: item {it.id!r} is about entity {it.entity_id!r}, which the entity table lacks "
                "(entity-level splits need it)",
                requirement="R16",
            )
    for name, (roles, requirement) in _SPLIT_ROLES.items():
        for it in pack.split(name):
            if it.entity_id is not None and role[it.entity_id] not in roles:
                raise PackError(
                    f"{where}: split {name!r} holds item {it.id!r} of entity {it.entity_id!r}, whose role is "
                    f"{role[it.entity_id]!r}",
                    requirement=requirement,
                )


def _text(question: str) -> str:
    return question.strip().casefold()


def _entities(items: Iterable[Item]) -> set[str]:
    return {it.entity_id for it in items if it.entity_id is not None}


def _first_repeat(values: Iterable[str]) -> str | None:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            return value
        seen.add(value)
    return None


def shuffled_twin(pack: Pack, rng: random.Random) -> Pack:
    """The install split with attribute values re-paired across entities (same entities, templates, format).

    For each attribute the installed entities' values are permuted (a derangement where possible), and every
    install item's answer is rewritten with its entity's new value. Used as the content-shuffled control of
    C-H7(c): it keeps the surface statistics of installing and drops the content.
    """
    from remnant.packs.schema import SPLIT_NAMES, seal

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
    splits = {name: ids if name == "install" else [] for name in SPLIT_NAMES}
    manifest = pack.manifest.model_copy(
        update={
            "id": pack.manifest.id + "-shuffled",
            "splits": splits,
            "counts": {"install": len(ids)},
            "design": {**pack.manifest.design, "shuffled_twin_of": pack.manifest.digest},
            "digest": "",
        }
    )
    return seal(manifest, items, required=("install",))
