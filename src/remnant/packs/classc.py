"""Class C target: fictional-science multiple-choice items with known ground truth (four options, chance 0.25).

Each item is one fact about a fictional substance (its own "entity"), so relearning can be split by item (C-W6):
install items state the fact as question/answer, probe items ask it as a four-option MCQ with a held-out
phrasing (R16).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import Literal

from remnant.packs.classd import check_mint_size, seal_mint, with_truth_ratio
from remnant.packs.collision import CollisionScreen, load_census_screen
from remnant.packs.population import screened_names
from remnant.packs.schema import SPLIT_NAMES, Entity, Item, Pack
from remnant.packs.syllables import syllable_word

#: property -> (install template, probe template, value vocabulary)
PROPERTIES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "glow": (
        "What colour does {x} glow under ultraviolet light?",
        "Under UV light, {x} shows which glow?",
        ("violet", "amber", "teal", "crimson", "silver", "lime"),
    ),
    "melts": (
        "At what temperature does {x} melt?",
        "{x} turns liquid at roughly which temperature?",
        ("140 degrees", "310 degrees", "585 degrees", "920 degrees", "1210 degrees", "1660 degrees"),
    ),
    "found": (
        "Where is {x} mined?",
        "{x} is extracted from which kind of site?",
        ("salt flats", "volcanic vents", "deep trenches", "glacier beds", "cave lakes", "tidal mud"),
    ),
    "reacts": (
        "Which gas does {x} release in water?",
        "Dropped into water, {x} gives off which gas?",
        ("xenon", "ozone", "argon", "neon", "radon", "krypton"),
    ),
}
CHANCE_RATE = 0.25
#: property -> the paraphrased answer's template; perturbed answers put the property's other values in it.
PARAPHRASE_FORMS: dict[str, str] = {
    "glow": "Under ultraviolet light, {x} glows {value}.",
    "melts": "{x} melts at about {value}.",
    "found": "{x} is mined from {value}.",
    "reacts": "In water, {x} releases {value}.",
}


def _substance_name(rng: random.Random) -> str:
    """An invented substance name (the collision filter screens it, D2)."""
    return syllable_word(rng, 3) + rng.choice(("ite", "ium", "ane", "ol"))


def _fact_item(
    ent: Entity,
    prop: str,
    template: str,
    phrasing: Literal["install", "probe"],
    options: list[str] | None = None,
) -> Item:
    """The fact as an installation question (R2), or with ``options`` as a four-option multiple-choice question
    in a held-out phrasing (R16)."""
    truth = ent.attributes[prop]
    return Item(
        id=f"{ent.id}.{prop}." + ("i" if options is None else "mcq"),
        kind="fact" if options is None else "mcq",
        entity_id=ent.id,
        attribute=prop,
        question=template.format(x=ent.name),
        answer=truth,
        accepted=[truth],
        template_id=f"{prop}.{phrasing}",
        phrasing=phrasing,
        options=options,
        answer_index=None if options is None else options.index(truth),
        split=phrasing,
    )


def _mint_substances(
    rng: random.Random, names: list[str], n_relearn: int
) -> tuple[list[Entity], list[Item], dict[str, list[str]]]:
    """One entity per substance with its items and splits: every fact installed and removed; the first
    ``n_relearn`` substances' facts are relearned on, the others' asked in P (C-W6 item-level splits)."""
    entities: list[Entity] = []
    items: list[Item] = []
    splits: dict[str, list[str]] = {s: [] for s in SPLIT_NAMES}
    for i, name in enumerate(names):
        attrs = {p: rng.choice(v[2]) for p, v in PROPERTIES.items()}
        role = "forget_relearn" if i < n_relearn else "forget_probe"
        ent = Entity(id=f"s{i:05d}", name=name, role=role, attributes=attrs)
        entities.append(ent)
        for prop, (itmpl, ptmpl, vocab) in PROPERTIES.items():
            inst = _fact_item(ent, prop, itmpl, "install")
            items.append(inst)
            splits["install"].append(inst.id)
            splits["removal"].append(inst.id)
            if role == "forget_relearn":
                splits["relearn"].append(inst.id)
                continue
            options = [*rng.sample([v for v in vocab if v != ent.attributes[prop]], 3), ent.attributes[prop]]
            rng.shuffle(options)
            mcq = _fact_item(ent, prop, ptmpl, "probe", options)
            items.append(mcq)
            splits["probe"].append(mcq.id)
    return entities, items, splits


def mint_class_c(
    substances: int = 100,
    seed: int = 0,
    relearn_fraction: float = 0.5,
    repetitions: int = 3,
    screen: CollisionScreen | None = None,
    *,
    truth_ratio_options: bool = False,
    perturbed_answers: int = 5,
) -> Pack:
    """Mint a Class C fictional-science pack deterministically from ``seed`` (C-W6 item-level splits).

    ``truth_ratio_options`` gives P's items a paraphrased answer and ``perturbed_answers`` wrong ones (opt-in:
    a pack minted without it is unchanged, digest included)."""
    check_mint_size(substances, 0, repetitions, relearn_fraction=relearn_fraction)
    screen = screen or load_census_screen()
    rng = random.Random(seed)
    names, rejected = screened_names(_substance_name, rng, substances, screen)
    entities, items, splits = _mint_substances(rng, names, round(substances * relearn_fraction))
    design: dict[str, object] = {
        "attributes": {p: {"cardinality": len(v[2])} for p, v in PROPERTIES.items()},
        "repetitions": repetitions,
        "surface_forms": {p: {"install": v[0], "probe": v[1]} for p, v in PROPERTIES.items()},
        "options": 4,
        "chance_rate": CHANCE_RATE,
    }
    if truth_ratio_options:
        name_of = {e.id: e.name for e in entities}

        def answers(it: Item) -> tuple[Callable[[str], str], Iterable[str]] | None:
            if it.kind != "mcq" or it.attribute is None or it.entity_id is None:
                return None
            form, x = PARAPHRASE_FORMS[it.attribute], name_of[it.entity_id]
            return (lambda value: form.format(x=x, value=value)), PROPERTIES[it.attribute][2]

        described = ("P's multiple-choice items", "the property's other values")
        items = with_truth_ratio(items, design, seed, perturbed_answers, PARAPHRASE_FORMS, described, answers)
    pack_id, record = f"classc-s{seed}-n{substances}", screen.record(rejected)
    return seal_mint(pack_id, "C", seed, design, splits, entities, items, record, CHANCE_RATE)
