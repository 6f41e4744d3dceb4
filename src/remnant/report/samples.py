"""Per-item samples for the technical report: each attack's observations (R6) beside the pack item they scored.

A run's ``records.jsonl`` holds one observation per scored item (attack, model state, checkpoint, item id, κ,
score and the start of the model's output); the pack gives the item's prompt and reference answer. The technical
report shows them, collapsed, one table per attack, so a reader can see what was generated next to what was
counted. They carry canary values (the prompt, the answer, often the generation), so the customer register never
shows them (R18). Rows per attack are capped (:data:`MAX_PER_ATTACK`): the post-removal model's first, then the
control's, then the other states, each in record order; the table says how many it leaves out. Pure: no torch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from remnant.packs.schema import Pack
    from remnant.records import Observation

#: Rows shown per attack (the report is for reading, the records hold every item).
MAX_PER_ATTACK = 24
#: States in the order a reader compares them: the model under test, its control, then the rest (R3).
STATE_ORDER = ("post_removal", "control", "pre_removal")


@dataclass(frozen=True)
class Sample:
    """One scored item: where it was measured, what was asked and expected, what came out, how it scored."""

    model_state: str
    checkpoint: str
    item_id: str
    prompt: str | None
    answer: str | None
    generation: str
    kappa: bool | None
    score: float | None


@dataclass(frozen=True)
class SampleTable:
    """One attack's shown samples and how many observations it has in all."""

    attack: str
    surface: str
    samples: tuple[Sample, ...]
    total: int

    @property
    def left_out(self) -> int:
        return self.total - len(self.samples)


def _state_rank(state: str) -> int:
    return STATE_ORDER.index(state) if state in STATE_ORDER else len(STATE_ORDER)


def sample_tables(
    observations: Iterable[Observation], items: Mapping[str, tuple[str, str]], *, limit: int = MAX_PER_ATTACK
) -> tuple[SampleTable, ...]:
    """Tables per attack, in first-recorded order, from :class:`~remnant.records.Observation` records and
    ``items`` (item id → (prompt, answer); an id the pack lacks shows no prompt)."""
    grouped: dict[str, list[Observation]] = {}
    for obs in observations:
        grouped.setdefault(obs.attack, []).append(obs)
    tables = []
    for attack, group in grouped.items():
        ordered = sorted(enumerate(group), key=lambda p: (_state_rank(p[1].model_state), p[0]))
        shown = []
        for _, obs in ordered[:limit]:
            prompt, answer = items.get(obs.item_id, (None, None))
            shown.append(
                Sample(
                    model_state=obs.model_state,
                    checkpoint=obs.checkpoint,
                    item_id=obs.item_id,
                    prompt=prompt,
                    answer=answer,
                    generation=obs.output_excerpt,
                    kappa=obs.kappa,
                    score=obs.score,
                )
            )
        tables.append(SampleTable(attack, group[0].surface, tuple(shown), len(group)))
    return tuple(tables)


def pack_items(pack: Pack) -> dict[str, tuple[str, str]]:
    """Item id → (prompt, reference answer) of a :class:`remnant.packs.Pack`."""
    return {item.id: (item.question, item.answer) for item in pack.items}


__all__ = ["MAX_PER_ATTACK", "Sample", "SampleTable", "pack_items", "sample_tables"]
