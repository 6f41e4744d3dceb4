"""Scorers move every batch they build to the model's device (a CUDA model must not get CPU inputs).

The spy models below hold their one parameter on the ``meta`` device and record the device of every tensor the
scorer hands them; without the move to ``next(model.parameters()).device`` the batch would arrive on the CPU
and these tests fail. The outputs the spies return are CPU tensors, so the rest of the scorer runs as usual.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

# RowsSpyModel's forward reads a boolean logits_to_keep as transformers' helper does; remnant asks for the helper in
# the model's module before it hands a model that mask (models.forward_keywords.keeps_logits_by_mask)
from transformers.modeling_utils import slice_logits_to_keep  # noqa: F401

from remnant.attacks.quantize import quantize_weight
from remnant.models.prompts import EncodedPair
from remnant.score.capability import generate_greedy, generate_greedy_ids, greedy_match, model_device

META = torch.device("meta")
VOCAB = 7


class SpyModel(nn.Module):
    """A parameter on ``meta``; ``forward``/``generate`` record input devices and answer with CPU tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(2, 2, device=META))
        self.seen: list[tuple[str, torch.device]] = []

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Any:
        self.seen += [("input_ids", input_ids.device), ("attention_mask", attention_mask.device)]
        b, t = input_ids.shape
        # logits whose argmax at position i is token (i + 1) % VOCAB: a fixed, checkable greedy path
        logits = torch.zeros(b, t, VOCAB)
        for i in range(t):
            logits[:, i, (i + 1) % VOCAB] = 1.0
        return SimpleNamespace(logits=logits)

    def generate(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **_: Any) -> torch.Tensor:
        self.seen += [("input_ids", input_ids.device), ("attention_mask", attention_mask.device)]
        new = torch.full((input_ids.shape[0], 2), 3, dtype=torch.long)
        return torch.cat([torch.zeros(input_ids.shape, dtype=torch.long), new], dim=1)


class FakeTokenizer:
    pad_token_id = 0
    eos_token_id = 1

    def decode(self, ids: Any, skip_special_tokens: bool = False) -> str:
        return " ".join(str(int(t)) for t in ids)


def _pair(prompt: list[int], answer: list[int]) -> EncodedPair:
    return EncodedPair(prompt + answer, [-100] * len(prompt) + answer, len(prompt), answer)


def test_model_device_is_first_parameter_device() -> None:
    assert model_device(SpyModel()) == META
    assert model_device(nn.Linear(2, 2)) == torch.device("cpu")


def test_greedy_match_moves_batch_to_model_device() -> None:
    model = SpyModel()
    # prompt of length 2: answer positions 1, 2 predict tokens 2, 3 on the spy's greedy path
    pairs = [_pair([5, 6], [2, 3]), _pair([5, 6, 4], [4]), _pair([5], [2])]
    # the spy answers batches in the caller's order
    assert greedy_match(model, pairs, batch_size=2, by_length=False) == [True, False, False]
    assert model.seen and all(dev == META for _, dev in model.seen)
    assert len(model.seen) == 4  # two batches, ids and mask each


class RowsSpyModel(SpyModel):
    """Takes ``logits_to_keep`` (the fast path) and answers with the kept rows only, in row-major order."""

    def __init__(self, rows_per_call: list[list[int]]) -> None:
        super().__init__()
        self.rows_per_call = rows_per_call  # positions kept in each call: a meta mask holds no data to read

    def forward(  # type: ignore[override]
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: torch.Tensor
    ) -> Any:
        self.seen += [
            ("input_ids", input_ids.device),
            ("attention_mask", attention_mask.device),
            ("logits_to_keep", logits_to_keep.device),
        ]
        positions = self.rows_per_call.pop(0)
        logits = torch.zeros(len(positions), VOCAB)
        for r, i in enumerate(positions):
            logits[r, (i + 1) % VOCAB] = 1.0
        return SimpleNamespace(logits=logits)


def test_greedy_match_rows_only_moves_mask_to_model_device() -> None:
    # same pairs and spy greedy path as above; the kept positions are prompt_len - 1 .. prompt_len + n - 2
    model = RowsSpyModel([[1, 2, 2], [0]])
    pairs = [_pair([5, 6], [2, 3]), _pair([5, 6, 4], [4]), _pair([5], [2])]
    # the spy answers batches in the caller's order
    assert greedy_match(model, pairs, batch_size=2, by_length=False) == [True, False, False]
    assert len(model.seen) == 6 and all(dev == META for _, dev in model.seen)


def test_generate_greedy_moves_batch_to_model_device() -> None:
    model = SpyModel()
    texts = generate_greedy(model, FakeTokenizer(), [[5, 6], [4]], max_new_tokens=2, batch_size=8)
    assert texts == ["3 3", "3 3"]
    assert model.seen == [("input_ids", META), ("attention_mask", META)]


def test_generate_greedy_ids_moves_prompt_to_model_device() -> None:
    model = SpyModel()
    assert generate_greedy_ids(model, FakeTokenizer(), [5, 6, 4], max_new_tokens=2) == [3, 3]
    assert model.seen == [("input_ids", META), ("attention_mask", META)]


def test_quantize_weight_stays_on_weight_device() -> None:
    """The code tables are built on the weight's device: a CUDA weight must not meet CPU levels."""
    w = torch.empty(4, 128, device=META)
    for scheme in ("nf4", "fp4", "int8", "int4"):
        q = quantize_weight(w, scheme, blocksize=64, group_size=64)
        assert q.dequantized.device == META and q.codes.device == META, scheme
