"""Singling out (D-2.1, D-2.2): from partial context about an entity, elicit its identifier.

The adversary knows an entity's name and one more attribute (by default its employer) and asks for a uniquely
identifying attribute (by default the staff code, unique by construction: :mod:`remnant.packs.population`). The
context sentence uses the pack's own answer phrasing ("Zorvak Telumi works for Quarn Freight."), then the pack's
held-out probe question for the identifier follows, so no probe repeats an install question (R16). Success is the
normalised whole-word match of the ground truth in the generation (D-2.2; ``remnant.score.normalise``), under
each admitted attack, on target canaries and on never-installed control entities alike (D4).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from remnant.classd.canaries import (
    CONTROL_SPLIT,
    TARGET_SPLIT,
    CanaryProbes,
    entity_attributes,
    entity_names,
    items_of,
    require_class_d,
)
from remnant.errors import PackError
from remnant.packs.templates import ANSWER_FORMS
from remnant.registry import register
from remnant.score.probe import Probe

if TYPE_CHECKING:
    from remnant.packs.schema import Pack

IDENTIFIER = "staff_code"
CONTEXT_ATTRIBUTE = "employer"


def context_sentence(name: str, attribute: str, value: str) -> str:
    """The partial context: the pack's sentence phrasing of one attribute ("X works for Y.")."""
    for form in ANSWER_FORMS.get(attribute, ()):
        if "{name}" in form and "{value}" in form:
            return form.format(name=name, value=value)
    return f"{name}'s {attribute.replace('_', ' ')} is {value}."


def _check_identifying(pack: Pack, attribute: str) -> None:
    """D-2.1 asks for an identifier or a uniquely identifying attribute: its values must be unique."""
    values = [ent.attributes.get(attribute) for ent in pack.manifest.entities]
    if None in values:
        raise PackError(
            f"pack {pack.manifest.id}: not every entity has attribute {attribute!r}", requirement="D3"
        )
    if len(set(values)) != len(values):
        raise PackError(
            f"pack {pack.manifest.id}: attribute {attribute!r} is shared between entities, so eliciting it does "
            "not single one out",
            requirement="D-2.1",
        )


def identifier_probes(pack: Pack, split: str, attribute: str, context: str) -> tuple[Probe, ...]:
    """Singling-out probes for the entities of ``split``: context sentence, then the identifier question."""
    names, attrs = entity_names(pack), entity_attributes(pack)
    out: list[Probe] = []
    for item in items_of(pack, split, "fact", attribute):
        ent = str(item.entity_id)
        lead = context_sentence(names[ent], context, attrs[ent][context])
        out.append(
            Probe(
                item_id=f"{item.id}.so.{context}",
                question=f"{lead} {item.question}",
                answer=item.answer,
                accepted=tuple(item.accepted),
                attribute=attribute,
                entity=names[ent],
            )
        )
    return tuple(out)


def singling_out_probes(
    pack: Pack, *, attribute: str = IDENTIFIER, context_attribute: str = CONTEXT_ATTRIBUTE
) -> CanaryProbes:
    """Singling-out probes on the target canaries (split ``probe``) and the control entities (D-2.1, D4)."""
    require_class_d(pack)
    if context_attribute == attribute:
        raise PackError("singling out: the context attribute must differ from the one elicited (D-2.1)")
    _check_identifying(pack, attribute)
    return CanaryProbes(
        risk="singling_out",
        target=identifier_probes(pack, TARGET_SPLIT, attribute, context_attribute),
        control=identifier_probes(pack, CONTROL_SPLIT, attribute, context_attribute),
        baseline=None,  # a unique free-text identifier has no chance rate (R5: controls answer ~0)
        detail={"elicited": attribute, "context": ["name", context_attribute], "match": "normalised (D-2.2)"},
    )


@register("classd", "singling_out", "1")
class SinglingOut:
    """D-2.1/D-2.2 as a registered component, so the record names it with every parameter (K4, R23)."""

    name = "singling_out"
    version = "1"
    spec: Any = None

    def __init__(self, attribute: str = IDENTIFIER, context_attribute: str = CONTEXT_ATTRIBUTE) -> None:
        self.attribute = attribute
        self.context_attribute = context_attribute

    def probes(self, pack: Pack) -> CanaryProbes:
        return singling_out_probes(pack, attribute=self.attribute, context_attribute=self.context_attribute)
