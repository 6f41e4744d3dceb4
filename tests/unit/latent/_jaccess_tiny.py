"""Tiny states for the J-Access tests: the tiny Llama taught the EXAMPLES' answers for 60 steps, and its untaught
copy (the retain-only anchor).

The J-Access checks need a model that says the taught entities. The shared ``latent_states`` teaches 30 steps,
which leaves that at the mercy of the exact prompt text the UDS inputs build (an empty-prefix prompt ending in
"Answer: " instead of "Answer:" was enough for it to stop saying "Vessiburg"); 60 steps say both entities either
way.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from _latent_tiny import EXAMPLES, teach


@pytest.fixture(scope="module")
def taught(tiny_llama: Any) -> dict[str, Any]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        full = teach(tiny_llama.model, tiny_llama.tokenizer, EXAMPLES, steps=60)
    finally:
        torch.set_num_threads(before)
    return {"retain": tiny_llama.model, "full": full, "tokenizer": tiny_llama.tokenizer}
