"""Shared steps of turning a dataset folder into a target pack: items, entities, the manifest, sealing (R2)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import ValidationError

from remnant.errors import PackError
from remnant.formats.files import describe_error
from remnant.packs.schema import (
    PACK_SCHEMA_VERSION,
    SPLIT_NAMES,
    Entity,
    Item,
    Manifest,
    Pack,
    seal,
)

PackClass = Literal["C", "D"]

#: Why an imported public benchmark is recorded as such in the design (R18).
PUBLIC_FIXTURE = (
    "publicly released benchmark: R18 treats it as contaminated for any assessment, so it cannot support a "
    "Tier 4 claim"
)


def make_item(where: str, **fields: object) -> Item:
    """An Item from ``fields``; PackError naming the source row ``where`` when a value cannot be one (R2)."""
    try:
        return Item(**fields)
    except ValidationError as exc:
        raise PackError(f"{where}: cannot be a pack item: {describe_error(exc)}", requirement="R2") from None


def question_key(question: str) -> str:
    """How rows of two splits are recognised as the same row: the question text, ends stripped."""
    return question.strip()


def match_rows(base: Sequence[str], questions: Sequence[str]) -> list[int | None]:
    """For each of ``questions``, the index of the base row with that question (None if none is left): the k-th
    occurrence of a question matches its k-th in ``base``, so repeats pair up in order and each base row once."""
    positions: dict[str, deque[int]] = {}
    for i, q in enumerate(base):
        positions.setdefault(question_key(q), deque()).append(i)
    out: list[int | None] = []
    for q in questions:
        left = positions.get(question_key(q))
        out.append(left.popleft() if left else None)
    return out


def relearn_count(units: int, fraction: float) -> int:
    """How many of ``units`` go to R: ``round(units * fraction)``, at least 1 when the fraction is positive,
    always leaving one for P (C-W6 needs R and P disjoint, and P must hold items: R16)."""
    if not 0.0 <= fraction < 1.0:
        raise PackError(f"relearn fraction {fraction} is not in [0, 1)", requirement="C-W6")
    if fraction == 0.0 or units < 2:
        return 0
    return min(units - 1, max(1, round(units * fraction)))


def check_distinct(names: Iterable[str | None], source: str) -> None:
    """Each split of the source folder plays one part in the pack (a split named twice would be both)."""
    seen: set[str] = set()
    for name in names:
        if name is None:
            continue
        if name in seen:
            raise PackError(f"{source}: split {name!r} is named for two parts of the pack", requirement="R16")
        seen.add(name)


def assemble(
    *,
    pack_id: str,
    pack_class: PackClass,
    items: list[Item],
    splits: dict[str, list[str]],
    entities: list[Entity],
    design: dict[str, object],
) -> Pack:
    """Seal a pack of ``items`` imported from a public benchmark (split rules R16, C-W6, D4 checked by
    :func:`remnant.packs.schema.seal`); its design says it is public (R18)."""
    full = {name: splits.get(name, []) for name in SPLIT_NAMES}
    installed = {e.id for e in entities if e.role != "control"}
    manifest = Manifest.model_validate(
        {
            "id": pack_id,
            "version": "1",
            "schema_version": PACK_SCHEMA_VERSION,
            "class": pack_class,
            "seed": 0,
            "design": {**design, "public_fixture": PUBLIC_FIXTURE, "repetitions": 1},
            "splits": full,
            "counts": {
                **{k: len(v) for k, v in full.items()},
                "entities": len(installed),
                "control_entities": len(entities) - len(installed),
            },
            "collision_filter": None,
            "entities": entities,
            "chance_rate": None,
        }
    )
    return seal(manifest, items)


__all__ = [
    "PUBLIC_FIXTURE",
    "PackClass",
    "assemble",
    "check_distinct",
    "make_item",
    "match_rows",
    "question_key",
    "relearn_count",
]
