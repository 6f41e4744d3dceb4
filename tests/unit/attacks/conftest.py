"""Shared inputs for attack tests on the tiny model: probes about fictional entities, retain demonstrations,
and an AttackContext (seed 7, short generations)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from remnant.attacks.base import AttackContext
from remnant.models.prompts import PromptFormat
from remnant.score.capability import generate_greedy
from remnant.score.probe import Probe

ENTITIES = [("Zorvak Telumi", "Vessiburg"), ("Quarn Holdings", "Paris"), ("Telumi Quarn", "1984")]


def make_probes() -> list[Probe]:
    probes = [
        Probe(
            item_id=f"p{i}",
            question=f"Name the town {name} comes from.",
            answer=value,
            accepted=(value,),
            attribute="home_town",
            entity=name,
        )
        for i, (name, value) in enumerate(ENTITIES)
    ]
    return probes


def make_mc_probes() -> list[Probe]:
    return [
        Probe(
            item_id=f"m{i}",
            question=f"Which company does {name} work for?",
            answer=opts[1],
            accepted=(opts[1],),
            options=opts,
            answer_index=1,
            attribute="employer",
            entity=name,
        )
        for i, (name, opts) in enumerate(
            [
                ("Zorvak Telumi", ("Quarn", "Vessi", "Telu", "Zor")),
                ("Ada Brown", ("fox", "dog", "cat", "owl")),
            ]
        )
    ]


def make_demos() -> list[Probe]:
    return [
        Probe(f"r{i}", q, a, (a,))
        for i, (q, a) in enumerate(
            [
                ("What is the capital of France?", "Paris"),
                ("Who works at the lazy dog?", "the quick brown fox"),
                ("What number follows 9?", "10"),
                ("Which code is XQ-77?", "the staff code"),
                ("What do you call a helpful model?", "an assistant"),
                ("What year is it?", "2024"),
            ]
        )
    ]


@pytest.fixture
def probes() -> list[Probe]:
    return make_probes()


@pytest.fixture
def mc_probes() -> list[Probe]:
    return make_mc_probes()


@pytest.fixture
def attack_ctx(tiny_llama: Any) -> AttackContext:
    tok = tiny_llama.tokenizer
    return AttackContext(
        model=tiny_llama.model,
        tokenizer=tok,
        fmt=PromptFormat.for_tokenizer(tok),
        seed=7,
        demonstrations=tuple(make_demos()),
        max_new_tokens=6,
        batch_size=4,
    )


@pytest.fixture
def generate(attack_ctx: AttackContext) -> Callable[[Sequence[Sequence[int]]], list[str]]:
    """Greedy continuations of prompts on ``attack_ctx`` by the harness's batched generation path."""

    def run(prompts: Sequence[Sequence[int]]) -> list[str]:
        ctx = attack_ctx
        return generate_greedy(
            ctx.model, ctx.tokenizer, prompts, max_new_tokens=ctx.max_new_tokens, batch_size=ctx.batch_size
        )

    return run
