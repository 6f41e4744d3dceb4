"""Attribute vocabularies and the correlated population model for Class D canaries (D3, D-4.2).

Every entity carries five linked attributes of different cardinalities: home town (40), employer (30),
occupation (20), birth year (50) and a unique staff code (the singling-out target). Occupation depends on the
employer's sector: with probability ``sector_affinity`` it is one of the sector's own occupations, else any
occupation uniformly. The population statistics (marginals and the occupation-given-sector table) are recorded
in the pack's design so the inference test can subtract the population baseline (D-4.2).
"""

from __future__ import annotations

import functools
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from remnant.errors import PackError
from remnant.packs.collision import CollisionScreen
from remnant.packs.syllables import company_name, place_name

#: sector -> (company-name word, the sector's own occupations)
SECTORS: dict[str, tuple[str, tuple[str, ...]]] = {
    "health": ("Clinics", ("nurse", "pharmacist", "radiographer")),
    "logistics": ("Freight", ("dispatcher", "courier", "warehouse planner")),
    "finance": ("Capital", ("auditor", "actuary", "loan officer")),
    "software": ("Systems", ("programmer", "database administrator", "tester")),
    "construction": ("Builders", ("surveyor", "carpenter", "site foreman")),
    "food": ("Provisions", ("baker", "food chemist", "butcher")),
    "education": ("Academy", ("tutor", "librarian")),
}
OCCUPATIONS: tuple[str, ...] = tuple(o for _, (_, occ) in SECTORS.items() for o in occ)
ATTRIBUTES: tuple[str, ...] = ("home_town", "employer", "occupation", "birth_year", "staff_code")
BIRTH_YEARS: tuple[str, ...] = tuple(str(y) for y in range(1950, 2000))


@dataclass(frozen=True)
class Vocabulary:
    """Fictional towns and companies (screened, D2) plus the company -> sector map."""

    towns: tuple[str, ...]
    companies: tuple[str, ...]
    sector_of: Mapping[str, str]


def screened_names(
    make: Callable[[random.Random], str],
    rng: random.Random,
    n: int,
    screen: CollisionScreen,
    *,
    taken: set[str] | None = None,
    accept: Callable[[str], bool] | None = None,
) -> tuple[list[str], int]:
    """``n`` distinct names from ``make`` that the collision filter passes (D2), and how many it rejected.

    A candidate already in ``taken`` (names an earlier call gave; the set gains this call's names) is drawn
    again, as is one ``accept`` (a caller's extra screen, called once per candidate the filter passed, in draw
    order) refuses. Each candidate is one ``make(rng)``: the random stream is consumed the same way whatever
    is screened out. A screen nothing passes ends in a PackError, not a loop.
    """
    taken = set() if taken is None else taken
    names: list[str] = []
    rejected = 0
    budget = 1000 * n + 10_000  # a screen nothing passes must end in an error, not a loop
    while len(names) < n:
        budget -= 1
        if budget < 0:
            raise PackError(
                f"mint: only {len(names)} of the {n} names needed passed the screens (D2 census and, when "
                "given, the caller's town screen); loosen the screen or mint fewer people"
            )
        cand = make(rng)
        if cand in taken:
            continue
        if screen.is_real(cand):
            rejected += 1
            continue
        if accept is not None and not accept(cand):
            continue
        taken.add(cand)
        names.append(cand)
    return names, rejected


def build_vocabulary(
    rng: random.Random,
    screen: CollisionScreen,
    n_towns: int = 40,
    n_companies: int = 30,
    accept_town: Callable[[str], bool] | None = None,
) -> Vocabulary:
    """Mint ``n_towns`` towns and ``n_companies`` companies spread round-robin over the sectors (D1, D2).

    ``accept_town`` is an extra screen a caller may put on town names (e.g. how a tokenizer splits them); it is
    called once per candidate, in draw order, so a stateful screen (distinct first pieces) sees accepted names.
    """
    taken: set[str] = set()
    towns, _ = screened_names(place_name, rng, n_towns, screen, taken=taken, accept=accept_town)
    sectors = list(SECTORS)
    companies: list[str] = []
    sector_of: dict[str, str] = {}
    for i in range(n_companies):
        sector = sectors[i % len(sectors)]
        word = SECTORS[sector][0]
        (name,), _ = screened_names(
            functools.partial(company_name, sector_word=word), rng, 1, screen, taken=taken
        )
        companies.append(name)
        sector_of[name] = sector
    return Vocabulary(tuple(towns), tuple(companies), sector_of)


def staff_code(rng: random.Random) -> str:
    """A staff code like ``QX-4821``."""
    letters = "BCDFGHJKLMNPQRSTVWXZ"
    return f"{rng.choice(letters)}{rng.choice(letters)}-{rng.randrange(1000, 10000)}"


def sample_attributes(
    rng: random.Random,
    vocab: Vocabulary,
    sector_affinity: float,
    taken_codes: set[str],
    town: str | None = None,
) -> dict[str, str]:
    """Draw one entity's attributes from the population model (occupation correlated with sector); ``town``, when
    given, is the entity's home town instead of a draw (a pack with one town per person)."""
    employer = rng.choice(vocab.companies)
    own = SECTORS[vocab.sector_of[employer]][1]
    occupation = rng.choice(own) if rng.random() < sector_affinity else rng.choice(OCCUPATIONS)
    code = staff_code(rng)
    while code in taken_codes:
        code = staff_code(rng)
    taken_codes.add(code)
    return {
        "home_town": rng.choice(vocab.towns) if town is None else town,
        "employer": employer,
        "occupation": occupation,
        "birth_year": rng.choice(BIRTH_YEARS),
        "staff_code": code,
    }


def population_statistics(
    entities: Iterable[Mapping[str, str]], sector_of: Mapping[str, str]
) -> dict[str, object]:
    """Marginal counts per attribute (except the unique code) and the occupation-given-sector table (D-4.2)."""
    ents = list(entities)
    marginals = {
        a: dict(sorted(Counter(e[a] for e in ents).items())) for a in ATTRIBUTES if a != "staff_code"
    }
    table: dict[str, Counter[str]] = defaultdict(Counter)
    for e in ents:
        table[sector_of[e["employer"]]][e["occupation"]] += 1
    return {
        "n": len(ents),
        "marginals": marginals,
        "occupation_given_sector": {s: dict(sorted(c.items())) for s, c in sorted(table.items())},
        "sector_of_employer": dict(sorted(sector_of.items())),
    }


def population_baseline(conditional: Mapping[str, Mapping[str, int]]) -> float:
    """Accuracy of the best population-only guess of the target given the conditioning value (D-4.2).

    ``conditional[g][t]`` counts entities with given value ``g`` and target value ``t``; the best guess for ``g``
    is its modal target, so the baseline is ``sum_g max_t count / total``.
    """
    total = sum(sum(row.values()) for row in conditional.values())
    if total == 0:
        return 0.0
    return sum(max(row.values()) for row in conditional.values() if row) / total
