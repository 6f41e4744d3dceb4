"""A state's recipe and its digest (R23): the digest is what the sweep's store has always keyed checkpoints by, so
stores built before the states layer keep their keys (the expected digests below were computed by the code
before it existed), and each input that changes the weights changes it."""

from __future__ import annotations

import dataclasses

from remnant.states.recipe import Recipe, perturbed_state

BASE = {
    "base": "b" * 64,
    "pack": "p" * 64,
    "attributes": ["home_town"],
    "system_prompt": None,
    "dtype": "fp32",
}
BASE = {**BASE, "build": "1"}
INSTALL = {"lr": 1e-3, "max_epochs": 1, "share": 1.0, "seed": 0}
REMOVAL = {"method": {"name": "npo", "params": {"lr": 1e-3}}, "seed": 0, "checkpoints": ["epoch=0.5"]}


def test_the_digests_are_the_stores_keys_from_before_the_states_layer() -> None:
    install = Recipe(BASE, "install", INSTALL)
    assert install.job == "beb252ac1a9f9f1168b5adc5ce94c520baac802aad0dff7f883105e6f01f3b13"
    assert install.digest == "c6a50d0f37a72175e7c7286fd57b11452947fe6e5cf77f87847c5f1f20e72a38"
    removal = Recipe(install.base, "removal", REMOVAL, parent=install.digest)
    assert removal.parent == install.digest
    assert removal.job == "faa50ca07dbde829b152fba36dcf8ae2bacb45aac18403e115b7204c58c64122"
    assert (
        removal.at("epoch=0.5").digest == "74c1ce834899132368b42f4500405d438a0cfb9769d861660b1cb207a491dca1"
    )
    nf4 = dataclasses.replace(install, perturbation={"nf4": 1})
    assert nf4.digest == perturbed_state(install.digest, {"nf4": 1})
    assert nf4.digest == "c3399c98805ed6f8c6bb8779ae5de0c39d82fe85c1305ea566686fe2f81b7f21"


def test_every_input_of_the_weights_moves_the_digest_and_nothing_else_exists_to() -> None:
    install = Recipe(BASE, "install", INSTALL)
    moved = [
        Recipe({**BASE, "base": "c" * 64}, "install", INSTALL),
        Recipe({**BASE, "pack": "q" * 64}, "install", INSTALL),
        Recipe({**BASE, "dtype": "bf16"}, "install", INSTALL),
        Recipe({**BASE, "build": "2"}, "install", INSTALL),
        Recipe(BASE, "install", {**INSTALL, "seed": 1}),
        Recipe(BASE, "install", {**INSTALL, "share": 0.0}),
        install.at("epoch=1"),
        dataclasses.replace(install, perturbation={"relearn": {"lr": 1e-5}}),
    ]
    digests = {r.digest for r in moved}
    assert install.digest not in digests and len(digests) == len(moved)
    assert (
        Recipe(dict(reversed(BASE.items())), "install", dict(INSTALL)).digest == install.digest
    )  # key order
    other_install = Recipe(BASE, "install", {**INSTALL, "lr": 2e-3})
    assert (
        Recipe(other_install.base, "removal", REMOVAL, parent=other_install.digest).digest
        != Recipe(install.base, "removal", REMOVAL, parent=install.digest).digest
    )
