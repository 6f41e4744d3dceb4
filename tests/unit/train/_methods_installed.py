"""Helpers for the tests of the OpenUnlearning-ported methods: the tiny Llama with the forget answers installed,
a right-padded micro-batch, and a stand-in model with hand-set logits.

WGA and SatImp weight each forget token by its own probability, so on a random model (p ≈ 1/V) their gradients
vanish; a removal is only meaningful on a model that knows the answers, as θ is in an assessment. The installed
weights are trained once per test process and handed out as fresh copies.
"""

from __future__ import annotations

import copy
import math
from types import SimpleNamespace
from typing import Any

import torch
from _methods_tiny import FAST, forget_items, removal_data, retain_items

from remnant.models.prompts import PromptFormat, collate, encode_pair
from remnant.train.loop import TrainConfig, train
from remnant.train.methods.base import MethodBatch
from remnant.train.methods.idk import IDK_BANK
from remnant.train.objectives import PairsObjective

_INSTALLED: dict[int, dict[str, torch.Tensor]] = {}
Batch = dict[str, torch.Tensor]


def installed_model(state: Any) -> Any:
    """A fresh copy of the tiny Llama fine-tuned on the 8 forget answers (40 full-batch steps, lr 1e-2)."""
    key = id(state.model)
    if key not in _INSTALLED:
        model = copy.deepcopy(state.model)
        fmt = PromptFormat.for_tokenizer(state.tokenizer)
        pairs = [encode_pair(state.tokenizer, it.question, it.answer, fmt) for it in forget_items()]
        objective = PairsObjective(pairs, int(state.tokenizer.pad_token_id))
        train(model, objective, TrainConfig(lr=1e-2, epochs=40, batch_size=8, progress=False))
        _INSTALLED[key] = {k: v.detach().clone() for k, v in model.state_dict().items()}
    model = copy.deepcopy(state.model)
    model.load_state_dict(_INSTALLED[key])
    model.eval()
    return model


def forget_pairs() -> list[tuple[str, str]]:
    return [(it.question, it.answer) for it in forget_items()]


def remove(state: Any, name: str, params: dict[str, Any], seed: int = 0) -> tuple[Any, Any]:
    """``apply_removal`` of method ``name`` (FAST loop settings + ``params``) on the installed model."""
    from remnant import registry
    from remnant.train.removal import apply_removal

    method = registry.create("method", name, {**FAST, **params})
    return apply_removal(method, installed_model(state), state.tokenizer, removal_data(), seed=seed)


def micro_batch(tok: Any, n: int) -> MethodBatch:
    """The first ``n`` forget, retain and IDK rows, each part right-padded (padding present when ``n`` > 1)."""
    fmt = PromptFormat.for_tokenizer(tok)
    pid = int(tok.pad_token_id)

    def enc(pairs: list[tuple[str, str]]) -> Batch:
        return collate([encode_pair(tok, q, a, fmt) for q, a in pairs], pad_id=pid, side="right")

    forget = [(it.question, it.answer) for it in forget_items()[:n]]
    retain = [(it.question, it.answer) for it in retain_items()[:n]]
    idk = [(q, IDK_BANK[7 * i + 1]) for i, (q, _) in enumerate(forget)]
    return MethodBatch(
        forget=enc(forget), retain=enc(retain), alternate=enc(idk), forget_index=tuple(range(n))
    )


class FixedLogits(torch.nn.Module):
    """A stand-in model whose logits are a given tensor (so a loss can be worked out by hand)."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits = torch.nn.Parameter(logits.clone())

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Any:
        return SimpleNamespace(logits=self.logits)


def hand_batch() -> tuple[FixedLogits, dict[str, torch.Tensor]]:
    # position 0 predicts token 0 with p = 1/2; position 1 predicts token 1 with p = 3/4; position 2 nothing
    logits = torch.tensor([[[0.0, 0.0], [0.0, math.log(3.0)], [5.0, -5.0]]])
    batch = {
        "input_ids": torch.zeros(1, 3, dtype=torch.long),
        "attention_mask": torch.ones(1, 3, dtype=torch.long),
        "labels": torch.tensor([[-100, 0, 1]]),
    }
    return FixedLogits(logits), batch
