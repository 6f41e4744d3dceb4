"""A probe: one scored question with its ground truth, in the form every scorer and attack reads.

Built from a pack :class:`~remnant.packs.schema.Item` (plus the entity's name where the item is about one), so
attacks need not know the pack schema. Multiple-choice probes render their options as lettered lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

ResponseFormat = Literal["free_text", "multiple_choice"]
RESPONSE_FORMATS: tuple[ResponseFormat, ...] = ("free_text", "multiple_choice")
LETTERS = "ABCDEFGHIJ"


@dataclass(frozen=True)
class Probe:
    """One scored question (R6): accepted answers for κ; options and the true index for multiple choice."""

    item_id: str
    question: str
    answer: str
    accepted: tuple[str, ...]
    options: tuple[str, ...] | None = None
    answer_index: int | None = None
    attribute: str | None = None
    entity: str | None = None

    @property
    def chance_rate(self) -> float:
        """Chance of a correct answer by guessing: 1/options for multiple choice, 0 for free text."""
        return 1.0 / len(self.options) if self.options else 0.0

    @property
    def answer_letter(self) -> str | None:
        return LETTERS[self.answer_index] if self.options and self.answer_index is not None else None

    def rendered_question(self) -> str:
        """The question as shown to the model: free text as is; multiple choice with lettered options."""
        if not self.options:
            return self.question
        lines = [self.question, *(f"{LETTERS[i]}. {opt}" for i, opt in enumerate(self.options))]
        return "\n".join(lines) + "\nAnswer with the letter of the correct option."

    @classmethod
    def from_item(cls, item: Any, entity_name: str | None = None) -> Probe:
        """A probe from a pack item (``remnant.packs.schema.Item``); ``entity_name`` from its entity."""
        options = tuple(item.options) if item.options else None
        return cls(
            item_id=item.id,
            question=item.question,
            answer=item.answer,
            accepted=tuple(item.accepted),
            options=options,
            answer_index=item.answer_index,
            attribute=item.attribute,
            entity=entity_name,
        )


def probes_from_pack(pack: Any, split: str) -> list[Probe]:
    """Every item of ``split`` as a probe, with entity names filled in from the pack's manifest."""
    names = {ent.id: ent.name for ent in pack.manifest.entities}
    return [Probe.from_item(it, names.get(it.entity_id or "")) for it in pack.split(split)]


def target_format(probes: list[Probe]) -> ResponseFormat:
    """The response format of a target: multiple choice only when every probe has options."""
    if probes and all(p.options for p in probes):
        return "multiple_choice"
    return "free_text"
