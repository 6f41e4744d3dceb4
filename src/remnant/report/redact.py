"""Redaction of canary values for the customer register (R18: fixtures are held privately).

A fixture that leaks is contaminated for every later assessment and can no longer support Tier 4 (R18), so the
customer report must carry no entity name, attribute value or item text. The customer template is built from
structured fields and fixed wording; the only free text it shows (the claim, the scope qualifier, the verdict's
reasons, deviations) passes through a :class:`Redactor`. When the pack is not at hand to say what its canaries are,
the redactor withholds that free text entirely rather than guess.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from remnant.packs.schema import Pack

REDACTED = "[redacted]"
WITHHELD = "[withheld: the target pack was not available to check this text for canary values (R18)]"

#: Canary tokens shorter than this are matched only as whole strings, never as name parts.
MIN_NAME_PART = 3


def canary_strings(pack: Pack) -> frozenset[str]:
    """Every string of ``pack`` (a :class:`remnant.packs.Pack`) that would leak the fixture if shown (R18).

    The pack id (it embeds the mint seed), entity names and each part of them, every attribute value, and each
    item's question, answer, accepted answers, options and given values.
    """
    found: set[str] = {pack.manifest.id}  # a minted pack's id names its seed, from which it can be re-minted
    for entity in pack.manifest.entities:
        found.add(entity.name)
        found.update(part for part in entity.name.split() if len(part) >= MIN_NAME_PART)
        found.update(entity.attributes.values())
    for item in pack.items:
        if item.kind == "general":  # general-knowledge utility items are public text, not the fixture
            continue
        found.update((item.question, item.answer, *item.accepted))
        found.update(item.options or ())
        found.update((item.given or {}).values())
    return frozenset(s.strip() for s in found if s and s.strip())


class Redactor:
    """Replace canary strings in free text with ``[redacted]``; withhold the text when canaries are unknown."""

    def __init__(self, canaries: Iterable[str] | None) -> None:
        self.known = canaries is not None
        ordered = sorted({c for c in canaries or () if c}, key=len, reverse=True)
        # Whole-word matches only: a birth year must not eat part of a number, a name part part of a word.
        self._pattern = (
            re.compile("|".join(rf"(?<!\w){re.escape(c)}(?!\w)" for c in ordered), re.IGNORECASE)
            if ordered
            else None
        )

    def __call__(self, text: object) -> str:
        if text is None:
            return ""
        value = str(text)
        if not self.known:
            return WITHHELD if value.strip() else value
        if self._pattern is None:
            return value
        return self._pattern.sub(REDACTED, value)

    def leaks(self, text: str) -> list[str]:
        """The canary strings found in ``text`` (whole-word), for checks and tests."""
        if self._pattern is None:
            return []
        return sorted({m.group(0) for m in self._pattern.finditer(text)})
