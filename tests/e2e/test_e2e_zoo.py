"""Zoo round trip on SmolLM2-135M-Instruct: fetch, cache, logits equal the GGUF's."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from remnant.models import load_model, zoo

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("smollm2")]
NAME = "smollm2-135m-instruct"


def test_fetch_into_fresh_home_then_cache(tmp_path: Path) -> None:
    start = time.perf_counter()
    folder = zoo.fetch(NAME, home=tmp_path)
    first = load_model(folder)
    first_s = time.perf_counter() - start
    start = time.perf_counter()
    again = load_model(zoo.fetch(NAME, home=tmp_path))
    cached_s = time.perf_counter() - start
    print(f"first fetch+load {first_s:.1f}s, cached load {cached_s:.1f}s")
    assert first_s < 60 and cached_s < 5
    assert again.identity.digest == first.identity.digest
    assert zoo.list_cached(home=tmp_path) == [folder]


def test_cached_logits_equal_gguf_logits(smollm2_dir: Path, tmp_path: Path) -> None:
    from_gguf = load_model(zoo.extract_gguf(zoo.ZOO[NAME], tmp_path))
    cached = load_model(smollm2_dir)
    ids = torch.tensor([cached.tokenizer("The capital of France is Paris, and")["input_ids"]])
    with torch.no_grad():
        diff = (from_gguf.model(ids).logits - cached.model(ids).logits).abs().max().item()
    print(f"max abs logit difference GGUF vs cached safetensors: {diff:.3e}")
    assert diff < 1e-4
