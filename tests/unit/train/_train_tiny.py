"""Helpers for the loop/install/relearn tests: tiny Class D items encoded for the tiny Llama."""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import Any

import torch

from remnant.models.prompts import EncodedPair, PromptFormat, encode_pair
from remnant.packs import ClassDSpec, Pack, mint_class_d
from remnant.train.methods.base import QA


@lru_cache(maxsize=1)
def pack() -> Pack:
    return mint_class_d(ClassDSpec(entities=8, controls=2, general=False, seed=1))


def qa(split: str, attributes: tuple[str, ...] = ("home_town", "employer")) -> tuple[QA, ...]:
    from remnant.train.data import split_qa

    return split_qa(pack(), split, attributes)


def pairs(tokenizer: Any, items: tuple[QA, ...]) -> list[EncodedPair]:
    fmt = PromptFormat.for_tokenizer(tokenizer)
    return [encode_pair(tokenizer, q.question, q.answer, fmt) for q in items]


def fresh(state: Any) -> Any:
    model = copy.deepcopy(state.model)
    model.eval()
    return model


def weights(model: Any) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
