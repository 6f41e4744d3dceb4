"""A model that pads with its end-of-sequence token (SmolLM2, Llama-3 Instruct): remnant attends to and labels
every real token, the in-sequence EOS included, and masks only the padding (docs/methods.md, "When the pad token
is the EOS"). OpenUnlearning's collator sets ``attention_mask = input_ids != pad_token_id`` instead, which also
hides every in-sequence EOS from attention; remnant differs on purpose (R23: the training data are what the pack
says, whatever the tokenizer's pad choice)."""

from __future__ import annotations

from typing import Any

import torch

from remnant.models.prompts import PromptFormat, collate, encode_pair, padded


def test_training_batches_attend_and_label_the_eos_when_it_is_also_the_pad(tiny_llama: Any) -> None:
    tok = tiny_llama.tokenizer
    eos = int(tok.eos_token_id)
    fmt = PromptFormat(style="raw")  # the raw format ends each answer with the EOS itself
    pairs = [
        encode_pair(tok, q, a, fmt) for q, a in [("Where?", "Vessiburg"), ("Who is it?", "Zorvak Telumi")]
    ]
    batch = collate(pairs, pad_id=eos, side="right")
    lengths = [len(p.input_ids) for p in pairs]
    assert lengths[0] != lengths[1]  # one row is padded, with the EOS id
    for row, n in enumerate(lengths):
        ids, mask, labels = batch["input_ids"][row], batch["attention_mask"][row], batch["labels"][row]
        assert int(ids[n - 1]) == eos and int(labels[n - 1]) == eos  # the answer's end is taught
        assert mask[:n].tolist() == [1] * n and mask[n:].tolist() == [0] * (len(ids) - n)
        assert labels[n:].tolist() == [-100] * (len(ids) - n)
        # their rule, ids != pad, would hide the real EOS too: the two differ on this row
        theirs = (ids != eos).long()
        assert int((mask - theirs).sum()) >= 1


def test_evaluation_batches_mask_only_the_padding_too() -> None:
    eos = 2
    ids, mask = padded([(5, 2, 7, 2), (9, 2)], eos, "right")
    assert ids.tolist() == [[5, 2, 7, 2], [9, 2, 2, 2]]
    assert mask.tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
    assert torch.equal(
        (ids != eos).long(), torch.tensor([[1, 0, 1, 0], [1, 0, 0, 0]])
    )  # theirs: 3 more masked
