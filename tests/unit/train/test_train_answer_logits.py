"""The training losses' output head on the answer positions only (``models.forward_keywords.answer_logits``): the same per-token
NLL and the same gradients as the full ``[B, T, V]`` logits, on every tiny family, LoRA-wrapped included, and the
head fed only the answer rows."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from _train_tiny import pairs, qa

from remnant.models import forward_keywords
from remnant.models.prompts import collate
from remnant.train import losses


def _full_token_nll(model: Any, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """The definition: every position's logits, cross-entropy on the shifted labels, masked to the answer."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.float()[
        :, :-1
    ]
    labels = batch["labels"][:, 1:]
    mask = (labels != -100).float()
    flat = F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels.clamp(min=0).reshape(-1), reduction="none"
    )
    return flat.view(labels.shape) * mask, mask


def _batch(state: Any) -> dict[str, torch.Tensor]:
    tok = state.tokenizer
    # prompts and answers of different lengths: right padding, answers at different positions per row
    return collate(pairs(tok, qa("install")[:6]), pad_id=tok.pad_token_id, side="right")


def _grads(model: Any, loss: torch.Tensor) -> dict[str, torch.Tensor]:
    model.zero_grad()
    loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _load(family: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from fixtures_models import build_tiny_model
    from remnant.models import load_model

    return load_model(build_tiny_model(family, tmp_path_factory.mktemp(family) / "m", seed=0), dtype="fp32")


@pytest.mark.parametrize("family", ["llama", "qwen2", "gpt2"])
def test_answer_rows_give_the_full_logits_nll_and_gradients(
    family: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    state = _load(family, tmp_path_factory)
    model, batch = state.model, _batch(state)
    assert forward_keywords.keeps_logits_by_mask(model)
    rows: list[int] = []
    head = model.get_output_embeddings().register_forward_hook(
        lambda _m, inputs, _o: rows.append(inputs[0].numel() // inputs[0].shape[-1])
    )
    try:
        nll, mask = losses.token_nll(model, batch)
    finally:
        head.remove()
    assert rows == [int(mask.sum())] and rows[0] < batch["input_ids"].numel() // 2  # the answer rows alone
    ref, ref_mask = _full_token_nll(model, batch)
    assert torch.equal(mask, ref_mask)
    assert torch.allclose(nll, ref, atol=1e-5, rtol=1e-5)
    assert bool((nll[mask == 0] == 0).all()) and bool((nll[mask == 1] > 0).all())
    ours = _grads(model, losses.mean_nll(model, batch))
    theirs = _grads(model, ref.sum() / ref_mask.sum())
    assert ours.keys() == theirs.keys() and ours
    for name in ours:
        assert torch.allclose(ours[name], theirs[name], atol=1e-6, rtol=1e-4), name


def test_a_lora_model_keeps_the_answer_rows_and_a_model_without_the_keyword_gets_the_full_head(
    tiny_llama: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from peft import LoraConfig, get_peft_model

    batch = _batch(tiny_llama)
    lora = get_peft_model(copy.deepcopy(tiny_llama.model), LoraConfig(r=2, target_modules=["q_proj"]))
    assert forward_keywords.keeps_logits_by_mask(lora)
    ref, _ = _full_token_nll(lora, batch)
    assert torch.allclose(losses.token_nll(lora, batch)[0], ref, atol=1e-5, rtol=1e-5)
    monkeypatch.setattr(forward_keywords, "keeps_logits_by_mask", lambda _m: False)
    plain, _ = losses.token_nll(tiny_llama.model, batch)
    ref, _ = _full_token_nll(tiny_llama.model, batch)
    assert torch.allclose(plain, ref, atol=1e-6, rtol=1e-6)
