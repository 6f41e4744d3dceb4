"""Training sets from a target pack: install, removal (forget), retain, relearn R and probe P (R16, C-W6).

In a Class D pack the install split holds install-phrased facts of every installed entity; removal holds those
of the entities to forget; relearn R holds those of the forget entities set aside for relearning; probe P holds
held-out phrasings about the other forget entities (disjoint from R at entity level). The retain set a method
trains on is the installed facts that are not being removed (install minus removal); the pack's ``retain``
split holds held-out phrasings of those entities and is for scoring retained capability.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from remnant.train.methods.base import QA, RemovalData

if TYPE_CHECKING:
    from remnant.packs.schema import Item, Pack


def as_qa(items: Sequence[Item], attributes: Collection[str] | None = None) -> tuple[QA, ...]:
    """Questions and answers of ``items`` (optionally only the listed attributes)."""
    return tuple(
        QA(it.question, it.answer) for it in items if attributes is None or it.attribute in attributes
    )


def split_qa(pack: Pack, split: str, attributes: Collection[str] | None = None) -> tuple[QA, ...]:
    """One split of ``pack`` as question/answer pairs."""
    return as_qa(pack.split(split), attributes)


def retain_training_qa(pack: Pack, attributes: Collection[str] | None = None) -> tuple[QA, ...]:
    """Installed items that removal must keep: the install split minus the removal split."""
    removal = set(pack.manifest.splits["removal"])
    return as_qa([it for it in pack.split("install") if it.id not in removal], attributes)


def removal_data(pack: Pack, attributes: Collection[str] | None = None) -> RemovalData:
    """Forget = the removal split; retain = installed items outside it; the pack and forget items kept beside
    them for methods that draw alternate answers from the facts (AltPO)."""
    forget = [it for it in pack.split("removal") if attributes is None or it.attribute in attributes]
    return RemovalData(
        forget=as_qa(forget),
        retain=retain_training_qa(pack, attributes),
        pack=pack,
        forget_items=tuple(forget),
    )


__all__ = ["as_qa", "removal_data", "retain_training_qa", "split_qa"]
