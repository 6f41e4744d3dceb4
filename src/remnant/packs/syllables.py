"""Fictional names from a syllable generator (D1): built from onsets, nuclei and codas, never from name lists."""

from __future__ import annotations

import random

ONSETS = (
    "b",
    "br",
    "d",
    "dr",
    "f",
    "g",
    "gr",
    "h",
    "k",
    "kr",
    "l",
    "m",
    "n",
    "p",
    "qu",
    "r",
    "s",
    "t",
    "th",
    "v",
    "vr",
    "z",
    "zh",
    "x",
    "y",
    "sk",
    "tr",
    "j",
)
NUCLEI = ("a", "e", "i", "o", "u", "ae", "ei", "ou", "y", "ia", "uo")
CODAS = ("", "", "", "n", "r", "l", "th", "sk", "x", "m", "nd", "rk", "z", "v")


def syllable_word(rng: random.Random, syllables: int) -> str:
    """A capitalised word of ``syllables`` onset+nucleus+coda syllables (coda only on the last one)."""
    parts = [rng.choice(ONSETS) + rng.choice(NUCLEI) for _ in range(syllables)]
    parts[-1] += rng.choice(CODAS)
    return "".join(parts).capitalize()


def person_name(rng: random.Random) -> str:
    """A two-part fictional person name, e.g. ``Vraeni Tholusk``."""
    return f"{syllable_word(rng, rng.choice((2, 3)))} {syllable_word(rng, rng.choice((2, 3)))}"


def place_name(rng: random.Random) -> str:
    """A fictional town name with a place-like suffix."""
    return syllable_word(rng, 2) + rng.choice(("ford", "mere", "holt", "vale", "by", "stead", "wick", "ton"))


def company_name(rng: random.Random, sector_word: str) -> str:
    """A fictional company name, e.g. ``Zhoukar Logistics``."""
    return f"{syllable_word(rng, 2)} {sector_word}"
