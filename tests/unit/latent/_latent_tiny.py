"""Tiny models and examples for the latent audits: a tiny Llama taught a few entity answers, and its untaught
copy as the retain model, so Δ1 is large on the entity span (stage 1 has KE layers)."""

from __future__ import annotations

import copy
from typing import Any

import torch

from remnant.latent.inputs import EntityExample, encode_example

EXAMPLES = [
    EntityExample(
        "town",
        "Where does Zorvak Telumi live?",
        "Zorvak Telumi lives in Vessiburg.",
        "Zorvak Telumi lives in",
        "Vessiburg",
    ),
    EntityExample(
        "employer",
        "Who employs Zorvak Telumi?",
        "Zorvak Telumi works at Quarn Holdings.",
        "Zorvak Telumi works at",
        "Quarn Holdings",
    ),
    EntityExample(
        "year", "When was the person born?", "The person was born in 1984.", "The person was born in", "1984"
    ),
    EntityExample("capital", "What is the capital of France?", "Paris.", "", "Paris"),
    EntityExample(
        "code", "What code does Zorvak use?", "Zorvak uses code XQ-77 daily.", "Zorvak uses code", "XQ-77"
    ),
]
MISSING = EntityExample("missing", "Where?", "Somewhere else.", "", "Nowhere")


def teach(
    model: Any, tokenizer: Any, examples: list[EntityExample], steps: int = 60, lr: float = 1e-2
) -> Any:
    """A copy of ``model`` trained (answer-only loss) on ``examples`` in the raw format; eval mode."""
    model = copy.deepcopy(model)
    model.train()
    encoded = [e for e in (encode_example(tokenizer, ex, "raw") for ex in examples) if e is not None]
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    for _ in range(steps):
        for enc in encoded:
            ids = torch.tensor([list(enc.input_ids)])
            labels = ids.clone()
            labels[0, : enc.prompt_len] = -100
            loss = model(input_ids=ids, labels=labels).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
    model.eval()
    return model


def mix(a: Any, b: Any, weight: float) -> Any:
    """Weight interpolation ``(1 - weight)·a + weight·b`` (a cheap family of intermediate states)."""
    out = copy.deepcopy(a)
    sb = b.state_dict()
    with torch.no_grad():
        for name, p in out.state_dict().items():
            p.copy_((1 - weight) * p + weight * sb[name])
    return out
