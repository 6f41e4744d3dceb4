"""Prefill: the answer-free stem sits inside the assistant turn, after the generation prompt, with no
end-of-turn; a prefix holding the answer is refused (C-Q1, docs/latent.md)."""

from __future__ import annotations

from typing import Any

import pytest

from remnant.attacks.base import AttackContext
from remnant.attacks.prefill import CHOICE_PREFIX, JAILBREAK_PREFIX, Prefill, check_answer_free, prefix_for
from remnant.errors import ConfigError
from remnant.score.probe import Probe


def test_prefix_is_the_answer_stem(probes: list[Any], mc_probes: list[Any]) -> None:
    assert prefix_for(probes[0], "answer_stem", JAILBREAK_PREFIX) == "Zorvak Telumi is from"
    assert prefix_for(probes[0], "fixed", JAILBREAK_PREFIX) == JAILBREAK_PREFIX
    assert prefix_for(mc_probes[0], "answer_stem", JAILBREAK_PREFIX) == CHOICE_PREFIX
    bare = Probe("x", "What is 2+2?", "4", ("4",))
    assert prefix_for(bare, "answer_stem", JAILBREAK_PREFIX) == JAILBREAK_PREFIX


def test_prefill_inside_assistant_turn(attack_ctx: AttackContext, probes: list[Any], generate: Any) -> None:
    tok = attack_ctx.tokenizer
    ids = attack_ctx.prompt_ids(probes[0], prefill="Zorvak Telumi is from")
    text = tok.decode(ids)
    assert text.endswith("<|im_start|>assistant\nZorvak Telumi is from")
    out = Prefill().run(attack_ctx, probes)
    assert [o.extra["prefill"] for o in out] == [prefix_for(p, "answer_stem", "") for p in probes]
    # the continuation alone is scored: the same generation as asking with the prefilled prompt
    gen = generate([ids])[0]
    assert out[0].output == gen


def test_prefix_with_answer_refused() -> None:
    probe = Probe("x", "Where is A from?", "Vessiburg", ("Vessiburg",))
    with pytest.raises(ConfigError, match="answer-free"):
        check_answer_free(probe, "A is from Vessiburg")
    check_answer_free(probe, "A is from")
