"""Minted packs keep their digests: the same spec and seed give the same pack, byte for byte (R16, R23, D5).

The digests below were computed with the minting code as it was before ``mint_class_d`` and ``mint_class_c`` were
split into smaller functions. They cover the options a golden digest in ``test_formats_mint.py`` does not: the
default sizes, the forget/relearn fractions the demo and the slow tests mint with, one town per person, a town
screen, truth-ratio answers, fewer link options without general questions, and Class C's fractions and options.
A change to one of them changes every pack a user would mint with those settings, so it must be deliberate.
"""

from __future__ import annotations

from typing import Any

import pytest

from remnant.packs import ClassDSpec, mint_class_c, mint_class_d
from remnant.packs.collision import load_census_screen

SCREEN = load_census_screen()

CLASS_D: dict[str, tuple[ClassDSpec, str]] = {
    "default": (ClassDSpec(), "d68f3d3d0bbc377b4c44be5a57ad535c197b14f8febdd71cc7118f0359f2fae8"),
    "canary_states": (
        ClassDSpec(entities=16, controls=8, seed=7),
        "aaf6fa5eb5d40b4fcd3631765ef353a395b917acf6bfc3ddeb8ec96c39ab3adb",
    ),
    "demo_fractions": (
        ClassDSpec(entities=32, controls=4, seed=20250601, forget_fraction=0.75, relearn_fraction=1 / 3),
        "553e96e482d1a603f4dafa13187641ef1001f75eb36390db021a08e944427596",
    ),
    "relearn_fractions": (
        ClassDSpec(entities=24, controls=8, seed=7, forget_fraction=2 / 3, relearn_fraction=0.75),
        "62bb8a4ef830a799549bdd0dd3d81fb43b646dfc44f150cdb47be3ba029917f9",
    ),
    "distinct_towns": (
        ClassDSpec(entities=32, controls=8, seed=7, distinct_towns=True),
        "5d430abd9d94c6410999ba348aa77ee7b6009f34336bfa9797d461c454d5e88d",
    ),
    "truth_ratio": (
        ClassDSpec(entities=12, controls=3, seed=1, truth_ratio_options=True, perturbed_answers=3),
        "ee3ea19178df7e99d87cf8685a22587912f8c524fe8930412d3bf0fb92562286",
    ),
    "no_general_three_options": (
        ClassDSpec(
            entities=12, controls=3, seed=2, general=False, link_options=3, sector_affinity=0.9, repetitions=5
        ),
        "9862bf41faf6ac502628be98461af41ece26f05fa66ae71fe1493ea2c3228c38",
    ),
    "distinct_towns_truth_ratio": (
        ClassDSpec(entities=40, controls=10, seed=5, distinct_towns=True, truth_ratio_options=True),
        "c6a4fc90a4291c328b185882da3dbe2ed6fd62f93648251385c01f6ee8b8205b",
    ),
}

CLASS_C: dict[str, tuple[dict[str, Any], str]] = {
    "default": ({}, "5eda4491c5452da8d0bb8c2db21799aa743c13e3214b6c1541a3fac3c12cd2b3"),
    "fractions": (
        {"substances": 50, "seed": 9, "relearn_fraction": 0.3, "repetitions": 2},
        "190882139e87732bc847bc6c667ab73bc67d4ef8debb5edd2ca7142989cfbca9",
    ),
    "truth_ratio": (
        {"substances": 20, "seed": 1, "truth_ratio_options": True},
        "2b15b5bcd1016b27e2aaf8116817d75ce771a9ed823fcf6fc10816ec3ed058c8",
    ),
    "truth_ratio_two": (
        {"substances": 20, "seed": 1, "truth_ratio_options": True, "perturbed_answers": 2},
        "bcfb25135418d362fb4d4f75921dac1f8a503b084f782f8542d87a8514356487",
    ),
}


@pytest.mark.parametrize("name", sorted(CLASS_D))
def test_class_d_digest(name: str) -> None:
    spec, digest = CLASS_D[name]
    assert mint_class_d(spec, SCREEN).digest == f"sha256:{digest}"


def test_class_d_digest_with_a_town_screen() -> None:
    pack = mint_class_d(
        ClassDSpec(entities=10, controls=2, seed=4),
        SCREEN,
        accept_town=lambda town: len(town) % 2 == 0,
        town_screen="even length",
    )
    assert pack.digest == "sha256:c3517ebdf256a9064bcae1db08861bd9318867a1ba80becf60f9a9e1f695e711"
    assert pack.manifest.design["attributes"]["home_town"]["screen"] == "even length"


@pytest.mark.parametrize("name", sorted(CLASS_C))
def test_class_c_digest(name: str) -> None:
    kwargs, digest = CLASS_C[name]
    assert mint_class_c(screen=SCREEN, **kwargs).digest == f"sha256:{digest}"
