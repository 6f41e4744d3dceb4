"""Many-shot and in-context prompts come from one renderer, byte for byte as before it was shared (C-Q1).

``render_many_shot`` (many-shot attack) renders through ``render_prompt_ids`` with shots (the in-context attack's renderer).
The golden lengths and digests below were recorded from the two separate implementations before they were
merged, on the tiny tokenizer; the chat, chat-with-system, raw and raw-with-system formats and 0, 1, 3 and 8
demonstrations (the last ones multiple choice, answered "B. option") cover every branch.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest

from remnant.attacks.base import AttackContext
from remnant.attacks.dialogue import demo_answer
from remnant.attacks.many_shot import render_many_shot
from remnant.errors import ModelError
from remnant.models.prompts import PromptFormat, render_prompt_ids
from remnant.score.probe import Probe

FORMATS = {
    "chat": PromptFormat(style="chat"),
    "chat_sys": PromptFormat(style="chat", system_prompt="Be brief."),
    "raw": PromptFormat(style="raw"),
    "raw_sys": PromptFormat(style="raw", system_prompt="Be brief."),
}

# (prompt length, first 16 hex digits of sha256 of the JSON id list), recorded before the merge
GOLDEN = {
    "chat/0": (29, "28857e31f7a58266"),
    "chat/1": (50, "cf39eb3db0c7f68b"),
    "chat/3": (100, "9ff1d454e84b07b1"),
    "chat/8": (340, "f77194d5a2817f95"),
    "chat_sys/0": (44, "830f7d46e4bf47c5"),
    "chat_sys/1": (65, "cd03600f7578e5a1"),
    "chat_sys/3": (115, "0f39fb67264b3ed6"),
    "chat_sys/8": (355, "5fb2c4cec57077fd"),
    "raw/0": (26, "8db02d5000f0b75a"),
    "raw/1": (43, "cc1ef1e4bad10d7b"),
    "raw/3": (85, "d58a8dea91d126b8"),
    "raw/8": (305, "2bdfd4abf3b0b156"),
    "raw_sys/0": (36, "4355fd8d47a600cf"),
    "raw_sys/1": (53, "f330a7dfab07a8dc"),
    "raw_sys/3": (95, "3d39503582507383"),
    "raw_sys/8": (315, "a0e8bd3abf1d5d70"),
}


def _digest(ids: list[int]) -> str:
    return hashlib.sha256(json.dumps(ids).encode()).hexdigest()[:16]


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_many_shot_and_dialogue_render_the_recorded_ids(
    case: str, attack_ctx: AttackContext, probes: list[Probe], mc_probes: list[Probe]
) -> None:
    tok = attack_ctx.tokenizer
    fmt_name, k = case.split("/")
    demos = [*attack_ctx.demonstrations, *mc_probes][: int(k)]
    question = probes[0].rendered_question()
    many = render_many_shot(tok, FORMATS[fmt_name], demos, question)
    shots = [(d.rendered_question(), demo_answer(d)) for d in demos]
    assert render_prompt_ids(tok, question, FORMATS[fmt_name], shots=shots) == many
    assert (len(many), _digest(many)) == GOLDEN[case]
    assert all(isinstance(t, int) for t in many)


def test_many_shot_chat_needs_a_chat_template(tiny_llama: Any, attack_ctx: AttackContext) -> None:
    tok = copy.deepcopy(tiny_llama.tokenizer)
    tok.chat_template = None
    with pytest.raises(ModelError, match="chat template"):
        render_many_shot(tok, FORMATS["chat"], attack_ctx.demonstrations[:2], "Q?")
