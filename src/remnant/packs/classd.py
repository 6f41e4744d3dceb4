"""Class D canary minting: fictional entities with linked attributes, controls, and their items (D1-D5).

Entities are minted from the syllable generator (D1) and screened against the collision filter (D2); each
carries five attributes of different cardinalities (D3); control entities of identical construction are never
installed (D4); the design record carries cardinalities, repetitions, surface forms and population statistics
(D5). Items: install-phrased facts (install/removal/relearn), held-out probe facts (singling out, D-2),
forced-choice linkage items with distractors from other installed entities (D-3.2) and inference items with
the population baseline (D-4.2).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from remnant.errors import PackError
from remnant.packs.collision import CollisionScreen, load_census_screen
from remnant.packs.general import general_items
from remnant.packs.population import (
    ATTRIBUTES,
    BIRTH_YEARS,
    OCCUPATIONS,
    SECTORS,
    Vocabulary,
    build_vocabulary,
    population_baseline,
    population_statistics,
    sample_attributes,
    screened_names,
)
from remnant.packs.schema import (
    PACK_SCHEMA_VERSION,
    SPLIT_NAMES,
    CollisionFilter,
    Entity,
    Item,
    Manifest,
    Pack,
    seal,
)
from remnant.packs.syllables import person_name
from remnant.packs.templates import (
    ANSWER_FORMS,
    INFER_TEMPLATE,
    INSTALL_TEMPLATES,
    LINK_TEMPLATE,
    PROBE_TEMPLATES,
)
from remnant.statement.canonical import derive_seed

#: Largest mint: installed entities (Class C: substances), and separately control entities. A mint this large
#: still takes seconds (docs/calibration.md#mint-size); past the limit a typo such as 10**15 would run until
#: memory ran out.
MAX_ENTITIES = 5_000
#: Most repetitions of each fact in the installation set (D5).
MAX_REPETITIONS = 1_000


def check_mint_size(entities: int, controls: int, repetitions: int, **fractions: float) -> None:
    """PackError unless the counts lie within the limits above and each named fraction in (0, 1) (R2, D5)."""
    for name, value in (("entities", entities), ("controls", controls)):
        if not 0 <= value <= MAX_ENTITIES:
            raise PackError(f"mint: {name} = {value} is outside [0, {MAX_ENTITIES}]", requirement="R2")
    if not 1 <= repetitions <= MAX_REPETITIONS:
        raise PackError(
            f"mint: repetitions = {repetitions} is outside [1, {MAX_REPETITIONS}]", requirement="D5"
        )
    for name, fraction in fractions.items():
        if not 0 < fraction < 1:  # NaN fails this too
            raise PackError(f"mint: {name} = {fraction} is outside (0, 1)", requirement="R2")


@dataclass(frozen=True)
class ClassDSpec:
    """Mint parameters: entities (installed), controls, fraction of installed entities forgotten, P/R share."""

    entities: int = 200
    controls: int = 100
    seed: int = 0
    repetitions: int = 3
    forget_fraction: float = 0.5
    relearn_fraction: float = 0.5
    sector_affinity: float = 0.6
    link_options: int = 4
    general: bool = True
    #: One home town per person (drawn without replacement) instead of D5's 40 shared towns. With shared towns a
    #: forget person's town is often also a retained person's, so a retain-only model knows the forget answers;
    #: white-box audits that compare against the retain-only model (J-Access's anchor) need it on.
    distinct_towns: bool = False
    #: Give every probe-phrased fact a paraphrased answer and ``perturbed_answers`` wrong ones, for the truth
    #: ratio (docs/formats.md). Drawn from generators of their own, so the rest of the pack is unchanged.
    truth_ratio_options: bool = False
    perturbed_answers: int = 5


#: attribute -> the paraphrased answer's template (wording no install answer uses); perturbed answers put
#: wrong values of the attribute's pool into the same template, as TOFU's do.
PARAPHRASE_FORMS: dict[str, str] = {
    "home_town": "{name} grew up in the town of {value}.",
    "employer": "{name} is employed by {value}.",
    "occupation": "{name}'s profession is {value}.",
    "birth_year": "{name} was born in the year {value}.",
    "staff_code": "{name} holds staff code {value}.",
}


def wrong_values(rng: random.Random, pool: Iterable[str], truth: str, k: int) -> list[str]:
    """``k`` distinct values of ``pool`` other than ``truth`` (fewer when the pool is small), in draw order."""
    if k < 1:
        raise PackError(
            f"mint: perturbed_answers = {k}; the truth ratio needs at least one", requirement="D5"
        )
    others = sorted(set(pool) - {truth})
    return rng.sample(others, min(k, len(others)))


def truth_ratio_rng(seed: int, item_id: str) -> random.Random:
    """The generator of one item's perturbed answers: derived from the mint seed and the item id, never the
    mint's own stream, so turning the option on changes no other value (R24)."""
    return random.Random(derive_seed(seed, "mint", "truth_ratio_options", item_id))


def with_truth_ratio(
    items: list[Item],
    design: dict[str, object],
    seed: int,
    k: int,
    forms: Mapping[str, str],
    described: tuple[str, str],
    answers: Callable[[Item], tuple[Callable[[str], str], Iterable[str]] | None],
) -> list[Item]:
    """``items`` with a paraphrased answer and ``k`` perturbed ones wherever ``answers(item)`` gives the answer
    sentence of a value and the pool of wrong values, each item's drawn from :func:`truth_ratio_rng`; ``design``
    records it (``described``: which items, which pools)."""
    design["truth_ratio_options"] = {
        "items": described[0],
        "paraphrase_forms": dict(forms),
        "perturbed_answers": k,
        "pools": described[1],
        "generator": "random.Random(derive_seed(seed, 'mint', 'truth_ratio_options', item id))",
    }
    out = []
    for it in items:
        how = answers(it)
        if how is None:
            out.append(it)
            continue
        phrase, pool = how
        wrong = wrong_values(truth_ratio_rng(seed, it.id), pool, it.answer, k)
        update = {"paraphrased_answer": phrase(it.answer), "perturbed_answer": [phrase(w) for w in wrong]}
        out.append(Item.model_validate({**it.model_dump(), **update}))
    return out


def seal_mint(
    pack_id: str,
    pack_class: str,
    seed: int,
    design: dict[str, object],
    splits: dict[str, list[str]],
    entities: list[Entity],
    items: list[Item],
    collision_filter: CollisionFilter,
    chance_rate: float | None = None,
    controls: int = 0,
) -> Pack:
    """The sealed pack of a mint: its manifest, with counts per split, of installed and of control entities."""
    manifest = Manifest.model_validate(
        {
            "id": pack_id,
            "version": "1",
            "schema_version": PACK_SCHEMA_VERSION,
            "class": pack_class,
            "seed": seed,
            "design": design,
            "splits": splits,
            "counts": {
                **{k: len(v) for k, v in splits.items()},
                "entities": len(entities) - controls,
                "control_entities": controls,
            },
            "collision_filter": collision_filter,
            "entities": entities,
            "chance_rate": chance_rate,
        }
    )
    return seal(manifest, items)


def _fact(
    ent: Entity, attr: str, t: int, phrasing: Literal["install", "probe"], tmpl: str, answer: str, split: str
) -> Item:
    """Template ``t``'s question about ``attr`` of ``ent`` in one phrasing (R16), accepting the bare value."""
    return Item(
        id=f"{ent.id}.{attr}.{phrasing[0]}{t}",
        kind="fact",
        entity_id=ent.id,
        attribute=attr,
        question=tmpl.format(name=ent.name),
        answer=answer,
        accepted=[ent.attributes[attr]],
        template_id=f"{attr}.{phrasing}.{t}",
        phrasing=phrasing,
        split=split,
    )


def _fact_items(
    ent: Entity, rng: random.Random, split_install: str, split_probe: str
) -> tuple[list[Item], list[Item]]:
    install: list[Item] = []
    probe: list[Item] = []
    for attr in ATTRIBUTES:
        value, forms = ent.attributes[attr], ANSWER_FORMS[attr]
        for t, tmpl in enumerate(INSTALL_TEMPLATES[attr]):
            answer = forms[t % len(forms)].format(name=ent.name, value=value)
            install.append(_fact(ent, attr, t, "install", tmpl, answer, split_install))
        t = rng.randrange(len(PROBE_TEMPLATES[attr]))
        probe.append(_fact(ent, attr, t, "probe", PROBE_TEMPLATES[attr][t], value, split_probe))
    return install, probe


def _link_item(ent: Entity, installed: list[Entity], rng: random.Random, k: int, split: str) -> Item:
    """Forced choice: the true employer among distractor employers of other installed entities (D-3.2)."""
    truth = ent.attributes["employer"]
    pool = sorted({e.attributes["employer"] for e in installed if e.id != ent.id} - {truth})
    if len(pool) < k - 1:
        raise PackError(
            f"mint: the link item of {ent.id} needs {k - 1} distractor employers of other installed people and "
            f"there are {len(pool)} (D-3.2); mint more entities or set fewer link_options"
        )
    options = [*rng.sample(pool, k - 1), truth]
    rng.shuffle(options)
    return Item(
        id=f"{ent.id}.link",
        kind="link",
        entity_id=ent.id,
        attribute="employer",
        question=LINK_TEMPLATE.format(code=ent.attributes["staff_code"]),
        answer=truth,
        accepted=[truth],
        template_id="link.0",
        phrasing="probe",
        options=options,
        answer_index=options.index(truth),
        split=split,
    )


def _infer_item(ent: Entity, split: str) -> Item:
    employer, occ = ent.attributes["employer"], ent.attributes["occupation"]
    return Item(
        id=f"{ent.id}.infer",
        kind="infer",
        entity_id=ent.id,
        attribute="occupation",
        question=INFER_TEMPLATE.format(name=ent.name, employer=employer),
        answer=occ,
        accepted=[occ],
        template_id="infer.0",
        phrasing="probe",
        given={"employer": employer},
        split=split,
    )


def _check_spec(spec: ClassDSpec, accept_town: Callable[[str], bool] | None, town_screen: str | None) -> None:
    """PackError unless the spec can be minted: sizes and fractions (R2, D5), ≥ 4 installed and ≥ 1 control
    entity (D4), and a described town screen (D5)."""
    check_mint_size(
        spec.entities,
        spec.controls,
        spec.repetitions,
        forget_fraction=spec.forget_fraction,
        relearn_fraction=spec.relearn_fraction,
    )
    if spec.entities < 4 or spec.controls < 1:
        raise PackError("mint: need at least 4 installed entities and 1 control entity (D4)")
    if accept_town is not None and not town_screen:
        raise PackError(
            "mint: a town screen (accept_town) needs a town_screen description for the design (D5)"
        )


def _mint_entities(
    spec: ClassDSpec, rng: random.Random, vocab: Vocabulary, names: list[str], own_towns: Sequence[str | None]
) -> list[Entity]:
    """Installed entities (forget-relearn, forget-probe, retain, in that order), then controls (D3, D4)."""
    codes: set[str] = set()
    n_forget = max(2, round(spec.entities * spec.forget_fraction))
    n_relearn = max(1, round(n_forget * spec.relearn_fraction))
    entities: list[Entity] = []
    for i, name in enumerate(names):
        if i < spec.entities:
            role = "forget_relearn" if i < n_relearn else "forget_probe" if i < n_forget else "retain"
        else:
            role = "control"
        attrs = sample_attributes(rng, vocab, spec.sector_affinity, codes, own_towns[i])
        entities.append(Entity(id=f"e{i:05d}", name=name, role=role, attributes=attrs))
    return entities


def _mint_items(
    spec: ClassDSpec, rng: random.Random, entities: list[Entity]
) -> tuple[list[Item], dict[str, list[str]]]:
    """Every entity's items and the splits they fall in (R16, C-W6): installed entities' install facts; the
    relearn people's only there; everyone else's probe facts, link (D-3.2) and inference (D-4.2) items in the
    split of their role; and the general questions."""
    installed = [e for e in entities if e.role != "control"]
    items: list[Item] = []
    splits: dict[str, list[str]] = {s: [] for s in SPLIT_NAMES}
    for ent in entities:
        primary_probe = {"forget_probe": "probe", "retain": "retain", "control": "controls"}.get(ent.role)
        install, probe = _fact_items(ent, rng, "install", primary_probe or "relearn")
        if ent.role != "control":
            items += install
            splits["install"] += [it.id for it in install]
        if ent.role in ("forget_probe", "forget_relearn"):
            splits["removal"] += [it.id for it in install]
        if ent.role == "forget_relearn":
            splits["relearn"] += [it.id for it in install]
            continue
        extra = [
            _link_item(ent, installed, rng, spec.link_options, primary_probe or ""),
            _infer_item(ent, primary_probe or ""),
        ]
        items += probe + extra
        splits[primary_probe or ""] += [it.id for it in probe + extra]
    if spec.general:
        gen = general_items()
        items += gen
        splits["general"] = [it.id for it in gen]
    return items, splits


def _design(
    spec: ClassDSpec, vocab: Vocabulary, installed: list[Entity], town_screen: str | None
) -> dict[str, object]:
    """The design record (D5): cardinalities, repetitions, surface forms and the installed population."""
    stats = population_statistics((e.attributes for e in installed), vocab.sector_of)
    return {
        "attributes": {
            # a default pack's design is unchanged (so is its digest); the options say themselves when used
            "home_town": {
                "cardinality": len(vocab.towns),
                **({"per_person": "distinct"} if spec.distinct_towns else {}),
                **({"screen": town_screen} if town_screen else {}),
            },
            "employer": {"cardinality": len(vocab.companies)},
            "occupation": {"cardinality": len(OCCUPATIONS)},
            "birth_year": {"cardinality": 50},
            "staff_code": {"cardinality": "unique"},
        },
        "repetitions": spec.repetitions,
        "surface_forms": {
            "install_templates": {a: list(t) for a, t in INSTALL_TEMPLATES.items()},
            "probe_templates": {a: list(t) for a, t in PROBE_TEMPLATES.items()},
            "answer_forms": {a: list(t) for a, t in ANSWER_FORMS.items()},
            "link": LINK_TEMPLATE,
            "infer": INFER_TEMPLATE,
            "link_options": spec.link_options,
        },
        "population": {
            "model": "occupation ~ sector-own occupation with p=sector_affinity, else uniform",
            "sector_affinity": spec.sector_affinity,
            "sectors": {s: list(o) for s, (_, o) in SECTORS.items()},
            "statistics_installed": stats,
            "baseline_occupation_given_sector": population_baseline(stats["occupation_given_sector"]),  # type: ignore[arg-type]
        },
        "link_chance_rate": 1.0 / spec.link_options,
    }


def _add_truth_ratio(
    spec: ClassDSpec, items: list[Item], entities: list[Entity], vocab: Vocabulary, design: dict[str, object]
) -> list[Item]:
    """Probe-phrased facts (P, retain, controls) with truth-ratio answers, described in ``design`` (opt-in: a
    pack minted without the option keeps its items, design and digest)."""
    pools: dict[str, tuple[str, ...]] = {
        "home_town": vocab.towns,
        "employer": vocab.companies,
        "occupation": OCCUPATIONS,
        "birth_year": BIRTH_YEARS,
        "staff_code": tuple(e.attributes["staff_code"] for e in entities),
    }
    names = {e.id: e.name for e in entities}

    def answers(it: Item) -> tuple[Callable[[str], str], Iterable[str]] | None:
        if it.kind != "fact" or it.phrasing != "probe" or it.attribute is None or it.entity_id is None:
            return None
        form, name = PARAPHRASE_FORMS[it.attribute], names[it.entity_id]
        return (lambda value: form.format(name=name, value=value)), pools[it.attribute]

    described = (
        "probe-phrased facts (probe, retain, controls)",
        "the pack's towns, companies, 20 occupations, 50 birth years, every minted staff code",
    )
    return with_truth_ratio(
        items, design, spec.seed, spec.perturbed_answers, PARAPHRASE_FORMS, described, answers
    )


def mint_class_d(
    spec: ClassDSpec,
    screen: CollisionScreen | None = None,
    *,
    accept_town: Callable[[str], bool] | None = None,
    town_screen: str | None = None,
) -> Pack:
    """Mint a Class D canary pack deterministically from ``spec.seed`` (D1-D5, R16, C-W6).

    ``accept_town`` adds a caller's screen on town names (``town_screen`` describes it in the design, so the pack
    says what shaped its towns); with the same screen and seed the pack is the same. One generator, seeded
    with ``spec.seed``, draws in a fixed order: vocabulary, names (D1, D2), home towns, attributes (D3), items.
    """
    _check_spec(spec, accept_town, town_screen)
    screen = screen or load_census_screen()
    rng = random.Random(spec.seed)
    n_people = spec.entities + spec.controls
    n_towns = n_people if spec.distinct_towns else 40  # one town per person, or D5's 40 shared
    vocab = build_vocabulary(rng, screen, n_towns=n_towns, accept_town=accept_town)
    names, rejected = screened_names(person_name, rng, n_people, screen)
    own_towns = rng.sample(vocab.towns, n_people) if spec.distinct_towns else [None] * n_people
    entities = _mint_entities(spec, rng, vocab, names, own_towns)
    items, splits = _mint_items(spec, rng, entities)
    design = _design(spec, vocab, [e for e in entities if e.role != "control"], town_screen)
    if spec.truth_ratio_options:  # opt-in: a pack minted without it keeps its items, design and digest
        items = _add_truth_ratio(spec, items, entities, vocab, design)
    pack_id = f"classd-s{spec.seed}-n{spec.entities}-c{spec.controls}"
    record = screen.record(rejected)
    return seal_mint(pack_id, "D", spec.seed, design, splits, entities, items, record, controls=spec.controls)
