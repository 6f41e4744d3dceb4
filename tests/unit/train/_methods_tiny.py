"""Shared helpers for the removal-method tests: a tiny Class D pack as RemovalData and short runs of a method
on a fresh copy of the tiny Llama (so the session fixture is never modified)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import torch

from remnant.models.prompts import PromptFormat, collate, encode_pair
from remnant.packs import ClassDSpec, Item, Pack, mint_class_d
from remnant.train.losses import sequence_nll
from remnant.train.methods.base import QA, RemovalData

#: Loop settings for the tiny runs: 8 forget items, 2 steps an epoch, no warmup, a fast learning rate.
FAST: dict[str, Any] = {"lr": 2e-3, "epochs": 3, "batch_size": 4, "grad_accum": 1, "warmup_epochs": 0.0}


@lru_cache(maxsize=1)
def tiny_pack() -> Pack:
    return mint_class_d(ClassDSpec(entities=4, controls=1, general=False, seed=0))


def forget_items(n: int = 8) -> list[Item]:
    return tiny_pack().split("removal")[:n]


def retain_items(n: int = 8) -> list[Item]:
    pack = tiny_pack()
    retain_entities = {e.id for e in pack.manifest.entities if e.role == "retain"}
    return [it for it in pack.split("install") if it.entity_id in retain_entities][:n]


def removal_data(alternates: tuple[tuple[str, ...], ...] = ()) -> RemovalData:
    return RemovalData(
        forget=tuple(QA(it.question, it.answer) for it in forget_items()),
        retain=tuple(QA(it.question, it.answer) for it in retain_items()),
        alternates=alternates,
    )


def fresh_model(state: Any) -> Any:
    model = copy.deepcopy(state.model)
    model.eval()
    return model


@dataclass(frozen=True)
class Run:
    model: Any
    result: Any


def run_method(state: Any, name: str, params: dict[str, Any], data: RemovalData, seed: int = 0) -> Run:
    from remnant import registry
    from remnant.train.removal import apply_removal

    method = registry.create("method", name, {**FAST, **params})
    if not data.alternates and not method.needs_alternates:
        # removal.encode_data zips forget with alternates strictly, so a method without alternates needs one
        # empty tuple per item until that accepts an empty alternates field.
        data = replace(data, alternates=tuple(() for _ in data.forget))
    model, result = apply_removal(method, fresh_model(state), state.tokenizer, data, seed=seed)
    return Run(model=model, result=result)


@torch.no_grad()
def mean_answer_nll(model: Any, tokenizer: Any, pairs: list[tuple[str, str]]) -> float:
    """Mean over items of the summed answer NLL S(y|x): higher means the answers are less likely."""
    fmt = PromptFormat.for_tokenizer(tokenizer)
    encoded = [encode_pair(tokenizer, q, a, fmt) for q, a in pairs]
    batch = collate(encoded, pad_id=int(tokenizer.pad_token_id), side="right")
    return float(sequence_nll(model, batch).mean())


def same_weights(a: Any, b: Any) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
