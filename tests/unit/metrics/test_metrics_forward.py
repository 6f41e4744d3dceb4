"""The shared teacher-forced pass against a naive one-sequence-at-a-time pass over their definitions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from metrics_data import SPLITS
from ou_naive import IGNORE, ou_tokenwise

from remnant.metrics.encoding import OpenUnlearningPrompt, encode_qa
from remnant.metrics.forward import ScoredSequence, teacher_forced_pass


def _sequences(tok: Any) -> list[ScoredSequence]:
    setting = OpenUnlearningPrompt.for_tokenizer(tok)
    out = []
    for row in SPLITS["forget10_perturbed"] + SPLITS["holdout10"]:
        for answer in (row.answer, *(row.perturbed_answer or ())):
            enc = encode_qa(tok, setting, row.question, answer)
            out.append(ScoredSequence(enc.full_ids, enc.label_start))
    return out


def _naive(model: Any, seq: ScoredSequence) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All labelled tokens' log-probs (the naive [:-1] drop undone by appending the last position)."""
    labels = [IGNORE] * seq.label_start + list(seq.input_ids[seq.label_start :])
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([seq.input_ids])).logits[0].float()
    logp = torch.log_softmax(logits, dim=-1)[seq.label_start - 1 : len(seq.input_ids) - 1]
    target = logp.gather(1, torch.tensor(seq.input_ids[seq.label_start :])[:, None])[:, 0]
    # cross-check with their tokenwise slicing (which drops the last label)
    lp, vocab, _ = ou_tokenwise(model, list(seq.input_ids), labels)
    assert torch.allclose(lp, target[:-1], atol=1e-6)
    assert torch.allclose(vocab, logp[:-1], atol=1e-6)
    return target.numpy(), logp.argmax(-1).numpy(), logp.numpy()


def test_pass_equals_naive_per_sequence(tiny_llama: Any) -> None:
    seqs = _sequences(tiny_llama.tokenizer)
    scores = teacher_forced_pass(tiny_llama.model, seqs, batch_size=4, vocab_stats=True, pad_id=3)
    assert len(scores) == len(seqs)
    for seq, got in zip(seqs, scores, strict=True):
        target, argmax, logp = _naive(tiny_llama.model, seq)
        np.testing.assert_allclose(got.logprobs, target, atol=1e-5)
        np.testing.assert_array_equal(got.argmax, argmax)
        np.testing.assert_array_equal(got.labels, np.array(seq.input_ids[seq.label_start :]))
        lp64 = logp.astype(np.float64)
        p = np.exp(lp64)
        mu = (p * lp64).sum(-1)
        assert got.mu is not None and got.var is not None
        np.testing.assert_allclose(got.mu, mu, rtol=1e-6)
        # σ² ≈ 0.02 under μ² ≈ 37 on this near-flat random model: float32 log-prob noise (batched vs one at a
        # time) moves σ² in its fourth digit; on a trained model σ² is O(1) and the agreement is far tighter
        np.testing.assert_allclose(got.var, (p * lp64**2).sum(-1) - mu**2, rtol=1e-3)


def test_batched_equals_unbatched_and_order_is_kept(tiny_llama: Any) -> None:
    seqs = _sequences(tiny_llama.tokenizer)
    one = teacher_forced_pass(tiny_llama.model, seqs, batch_size=1)
    many = teacher_forced_pass(tiny_llama.model, seqs, batch_size=7)
    assert len({len(s.input_ids) for s in seqs}) > 3  # lengths differ, so padding is exercised
    for a, b in zip(one, many, strict=True):
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)
        np.testing.assert_array_equal(a.argmax, b.argmax)
        assert a.mu is None and b.mu is None  # vocabulary statistics only when asked


class _NoKeep(torch.nn.Module):
    """The model behind a forward that does not accept logits_to_keep (the full-logits path)."""

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, use_cache: bool = False) -> Any:
        return self.inner(input_ids=input_ids, attention_mask=attention_mask, use_cache=use_cache)


def test_full_logits_path_equals_logits_to_keep_path(tiny_llama: Any) -> None:
    seqs = _sequences(tiny_llama.tokenizer)[:6]
    kept = teacher_forced_pass(tiny_llama.model, seqs, batch_size=3)
    full = teacher_forced_pass(_NoKeep(tiny_llama.model), seqs, batch_size=3)
    for a, b in zip(kept, full, strict=True):
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-6)


def test_pad_id_equal_to_eos_changes_nothing(tiny_llama: Any) -> None:
    """The mask comes from lengths: padding with EOS (which also ends every answer) is harmless."""
    seqs = _sequences(tiny_llama.tokenizer)[:6]
    eos = tiny_llama.tokenizer.eos_token_id
    a = teacher_forced_pass(tiny_llama.model, seqs, batch_size=6, pad_id=eos)
    b = teacher_forced_pass(tiny_llama.model, seqs, batch_size=6, pad_id=3)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x.logprobs, y.logprobs, atol=1e-6)


def test_bf16_runs_and_stays_close_to_fp32(tiny_llama_dir: Path) -> None:
    from remnant.models.load import load_model

    bf16 = load_model(tiny_llama_dir, dtype="bf16")
    fp32 = load_model(tiny_llama_dir)
    seqs = _sequences(fp32.tokenizer)[:8]
    lo = teacher_forced_pass(bf16.model, seqs, batch_size=4, vocab_stats=True)
    hi = teacher_forced_pass(fp32.model, seqs, batch_size=4, vocab_stats=True)
    for a, b in zip(lo, hi, strict=True):
        assert a.logprobs.dtype == np.float64 and np.all(np.isfinite(a.logprobs))
        assert a.avg_loss == pytest.approx(b.avg_loss, rel=0.02)
        assert a.mu is not None and np.all(np.isfinite(a.mu))


def test_label_start_must_leave_a_prediction() -> None:
    with pytest.raises(ValueError, match="label_start"):
        ScoredSequence((1, 2, 3), 0)


@pytest.mark.parametrize("family", ["qwen2", "gpt2"])
def test_pass_equals_naive_on_other_families(family: str, request: pytest.FixtureRequest) -> None:
    from remnant.models.load import load_model

    state = load_model(request.getfixturevalue(f"tiny_{family}_dir"))
    seqs = _sequences(state.tokenizer)[:9]
    scores = teacher_forced_pass(state.model, seqs, batch_size=4)
    for seq, got in zip(seqs, scores, strict=True):
        target, argmax, _ = _naive(state.model, seq)
        np.testing.assert_allclose(got.logprobs, target, atol=1e-5)
        np.testing.assert_array_equal(got.argmax, argmax)
