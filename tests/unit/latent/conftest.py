"""Shared tiny states for the latent tests: ``retain`` (the untaught tiny Llama) and ``full`` (taught).

Tiny models run fastest on one thread (intra-op threading on a 64-wide model is pure overhead and collapses
under CPU contention); the thread count is restored after every test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from _latent_tiny import EXAMPLES, teach


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture(scope="session")
def latent_states(tiny_llama: Any) -> dict[str, Any]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        retain = tiny_llama.model
        full = teach(retain, tiny_llama.tokenizer, EXAMPLES, steps=30)
    finally:
        torch.set_num_threads(before)
    return {"retain": retain, "full": full, "tokenizer": tiny_llama.tokenizer}
