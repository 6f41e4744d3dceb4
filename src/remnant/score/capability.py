"""Capability κ: teacher-forced greedy match and batched greedy generation (R6; algorithms.md §3).

``greedy_match`` decides in one forward pass whether greedy decoding would reproduce the answer ids: the argmax
at every answer position must equal the next answer token. It must agree with ``generate_greedy``.

Every batch is built on the CPU and moved to the model's device (:func:`model_device`) before the forward pass,
so the same scorer runs a model on a GPU or on the CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from remnant.models.prompts import EncodedPair, collate


def model_device(model: Any) -> torch.device:
    """The device of the model's first parameter: where input batches must be before the forward pass."""
    device: torch.device = next(model.parameters()).device
    return device


def _pad_id(tokenizer: Any) -> int:
    pid = tokenizer.pad_token_id
    return int(pid if pid is not None else tokenizer.eos_token_id)


@torch.no_grad()
def greedy_match(model: Any, pairs: Sequence[EncodedPair], *, batch_size: int = 16) -> list[bool]:
    """Teacher-forced fast path for κ (R6): True where greedy decoding reproduces every answer token."""
    out: list[bool] = []
    device = model_device(model)
    for start in range(0, len(pairs), batch_size):
        chunk = list(pairs[start : start + batch_size])
        batch = collate(chunk, pad_id=0, side="right")
        ids, mask = batch["input_ids"].to(device), batch["attention_mask"].to(device)
        # argmax on the device, then compared on the CPU: the answer ids are Python lists
        pred = model(input_ids=ids, attention_mask=mask).logits.argmax(dim=-1).cpu()
        for row, p in enumerate(chunk):
            n = len(p.answer_ids)
            positions = torch.arange(p.prompt_len - 1, p.prompt_len - 1 + n)
            target = torch.tensor(p.answer_ids)
            out.append(bool((pred[row, positions] == target).all()))
    return out


@torch.no_grad()
def generate_greedy(
    model: Any,
    tokenizer: Any,
    prompt_ids_list: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    batch_size: int = 16,
) -> list[str]:
    """Greedy continuations (left-padded batches), decoded without special tokens (R6 generation path)."""
    pad = _pad_id(tokenizer)
    device = model_device(model)
    texts: list[str] = []
    for start in range(0, len(prompt_ids_list), batch_size):
        chunk = [list(p) for p in prompt_ids_list[start : start + batch_size]]
        width = max(len(p) for p in chunk)
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in chunk], device=device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in chunk], device=device)
        gen = model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=pad,
        )
        for row in gen[:, width:]:
            texts.append(tokenizer.decode(row, skip_special_tokens=True))
    return texts


@torch.no_grad()
def generate_greedy_ids(
    model: Any, tokenizer: Any, prompt_ids: Sequence[int], *, max_new_tokens: int
) -> list[int]:
    """Greedy continuation ids of one prompt (unpadded reference for the fast-path equivalence test)."""
    ids = torch.tensor([list(prompt_ids)], device=model_device(model))
    gen = model.generate(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        pad_token_id=_pad_id(tokenizer),
    )
    return [int(t) for t in gen[0, ids.shape[1] :]]
