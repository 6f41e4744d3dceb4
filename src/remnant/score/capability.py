"""Capability κ: teacher-forced greedy match and batched greedy generation (R6; docs/latent.md).

``greedy_match`` decides in one forward pass whether greedy decoding would reproduce the answer ids: the argmax
at every answer position must equal the next answer token. It must agree with ``generate_greedy``. Logits are
computed only on the answer-predicting positions (``logits_to_keep``), not on the whole prompt: the output head
of a large vocabulary would otherwise cost more than the answer tokens themselves.

Every batch is built on the CPU and moved to the model's device (:func:`~remnant.models.device.model_device`)
before the forward pass, so the same scorer runs a model on a GPU or on the CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from remnant.models.device import model_device
from remnant.models.forward_keywords import answer_logits
from remnant.models.prompts import EncodedPair, collate, pad_id


@torch.no_grad()
def greedy_predictions(
    model: Any,
    pairs: Sequence[EncodedPair],
    *,
    batch_size: int = 16,
    full_logits: bool = False,
    by_length: bool = True,
) -> list[list[int]]:
    """Per pair, the argmax token at each position that predicts an answer token (teacher-forced, R6).

    The fast path hands the model a boolean ``logits_to_keep`` mask (batch × width, True on the answer-predicting
    positions ``prompt_len - 1 .. prompt_len + n - 2``): transformers then applies the output head to those rows
    only, flattened row-major, instead of to every prompt position (SmolLM2's head is 49,152 words wide). The
    model's own forward still runs, so any post-head step (Gemma's logit soft-capping) is applied as before.
    ``full_logits=True`` (or a model whose forward has no ``logits_to_keep``) computes every position's logits
    and gathers afterwards: the reference the equivalence test and the benchmark compare against.

    Batches are cut from the pairs in order of length, so each pads only to the longest of rows of about its own
    length (in the caller's order, every batch pads to its longest row); the predictions come back in the pairs'
    order. ``by_length=False`` keeps the caller's order: the benchmark's baseline.
    """
    lengths = [len(p.input_ids) for p in pairs]
    order = sorted(range(len(pairs)), key=lengths.__getitem__) if by_length else list(range(len(pairs)))
    predictions = _predictions_in_order(model, [pairs[i] for i in order], batch_size, full_logits)
    out: list[list[int]] = [[] for _ in pairs]
    for i, pred in zip(order, predictions, strict=True):
        out[i] = pred
    return out


def _predictions_in_order(
    model: Any, pairs: Sequence[EncodedPair], batch_size: int, full_logits: bool
) -> list[list[int]]:
    out: list[list[int]] = []
    device = model_device(model)
    for start in range(0, len(pairs), batch_size):
        chunk = list(pairs[start : start + batch_size])
        batch = collate(chunk, pad_id=0, side="right")
        on_device = {
            **batch,
            "input_ids": batch["input_ids"].to(device),
            "attention_mask": batch["attention_mask"].to(device),
        }
        # (rows kept, vocab): argmax on the device, then split per pair in row-major order on the CPU
        flat = answer_logits(model, on_device, full=full_logits)[0].argmax(dim=-1).cpu()
        at = 0
        for p in chunk:
            n = len(p.answer_ids)
            out.append([int(t) for t in flat[at : at + n]])
            at += n
    return out


def greedy_match(
    model: Any,
    pairs: Sequence[EncodedPair],
    *,
    batch_size: int = 16,
    full_logits: bool = False,
    by_length: bool = True,
) -> list[bool]:
    """Teacher-forced fast path for κ (R6): True where greedy decoding reproduces every answer token."""
    preds = greedy_predictions(
        model, pairs, batch_size=batch_size, full_logits=full_logits, by_length=by_length
    )
    return [pred == list(p.answer_ids) for pred, p in zip(preds, pairs, strict=True)]


@torch.no_grad()
def generate_greedy(
    model: Any,
    tokenizer: Any,
    prompt_ids_list: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    batch_size: int = 16,
) -> list[str]:
    """Greedy continuations (left-padded batches), decoded without special tokens (R6 generation path).

    Where :func:`~remnant.models.greedy.pruned_decoding_applies`, a finished row leaves its batch and the last
    steps are drafted (:mod:`remnant.models.greedy`: ``generate``'s greedy tokens in fewer steps, ending a row at
    the generation config's end-of-sequence ids only, as ``generate`` does); otherwise ``generate`` runs."""
    from remnant.models.greedy import greedy_new_ids

    pad = pad_id(tokenizer)
    texts: list[str] = []
    for start in range(0, len(prompt_ids_list), batch_size):
        chunk = [list(p) for p in prompt_ids_list[start : start + batch_size]]
        rows = greedy_new_ids(
            model,
            chunk,
            pad_id=pad,
            max_new_tokens=max_new_tokens,
            eos_token_id=None,
            generate_options={"pad_token_id": pad},
        )
        texts += [tokenizer.decode(row, skip_special_tokens=True) for row in rows]
    return texts


@torch.no_grad()
def generate_greedy_ids(
    model: Any,
    tokenizer: Any,
    prompt_ids: Sequence[int],
    *,
    max_new_tokens: int,
    use_cache: bool | None = None,
) -> list[int]:
    """Greedy continuation ids of one prompt, unpadded (``model.generate``): the reference for the fast-path
    equivalence tests, and the plain-ids decoding of an attack's single input; ``use_cache`` set overrides the
    model's generation config."""
    ids = torch.tensor([list(prompt_ids)], dtype=torch.long, device=model_device(model))
    extra = {} if use_cache is None else {"use_cache": use_cache}
    gen = model.generate(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        pad_token_id=pad_id(tokenizer),
        **extra,
    )
    return [int(t) for t in gen[0, ids.shape[1] :]]
