"""The forward keywords for a key/value cache and for keeping only the last logits, read from the model's own
``forward`` (transformers renamed both across versions), and the cache a forward returned."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from remnant.models import load_model
from remnant.models.forward_keywords import cache_kwarg, keep_last_logits, logits_keep_kwarg, output_cache


@pytest.mark.parametrize("family", ["llama", "qwen2", "gpt2"])
def test_a_cached_continuation_equals_the_whole_forward(family: str, request: pytest.FixtureRequest) -> None:
    """Prefix with the named cache keyword, then the rest over the returned cache: the last position's logits
    equal one forward of the whole sequence; ``keep_last_logits`` computes the head on the last n positions."""
    folder: Path = request.getfixturevalue(f"tiny_{family}_dir")
    model: Any = load_model(folder, dtype="fp32").model
    ids = torch.tensor([[5, 17, 23, 42, 7, 11]])
    name = cache_kwarg(model)
    assert name in ("cache", "past_key_values") and logits_keep_kwarg(model) is not None
    with torch.no_grad():
        whole = model(input_ids=ids).logits
        prefix = model(input_ids=ids[:, :4], use_cache=True, **keep_last_logits(model))
        assert prefix.logits.shape[1] == 1  # the head ran on the last position only
        cache = output_cache(prefix)
        assert cache is not None and cache.get_seq_length() == 4
        rest = model(
            input_ids=ids[:, 4:], use_cache=True, **{name: cache}, **keep_last_logits(model, 2)
        ).logits
    assert rest.shape[1] == 2
    assert torch.allclose(rest[0, -1], whole[0, -1], atol=1e-5)
    assert output_cache(object()) is None
