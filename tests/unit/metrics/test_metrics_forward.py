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


class _NoCache(torch.nn.Module):
    """The model behind a forward that takes no cache or positions (the plain batches, full logits)."""

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **kw: Any) -> Any:
        return self.inner(input_ids=input_ids, attention_mask=attention_mask, **kw)


@pytest.mark.parametrize("family", ["llama", "qwen2", "gpt2"])
@pytest.mark.parametrize("batch_size", [3, 8])
def test_shared_prompts_equal_plain_batches_and_run_each_prompt_once(
    family: str, batch_size: int, request: pytest.FixtureRequest
) -> None:
    """A question's answers share its prompt's forward (cache copied per answer, continuations at their true
    positions); the readings equal the plain full forward's. Batch 3 splits a question's 4 answers."""
    from remnant.metrics.forward import _prefix
    from remnant.models.load import load_model

    state = load_model(request.getfixturevalue(f"tiny_{family}_dir"))
    seqs = _sequences(state.tokenizer)
    seqs.append(ScoredSequence(seqs[0].input_ids, 1))  # an empty prefix is never shared
    tokens: list[int] = []
    hook = state.model.get_input_embeddings().register_forward_hook(
        lambda _m, args, _o: tokens.append(int(args[0].numel()))
    )
    try:
        shared = teacher_forced_pass(state.model, seqs, batch_size=batch_size, pad_id=3)
        shared_tokens = sum(tokens)
        tokens.clear()
        plain = teacher_forced_pass(_NoCache(state.model), seqs, batch_size=batch_size)
        plain_tokens = sum(tokens)
        tokens.clear()
        # sequences that need μ_t, σ²_t (min-k++) are never shared: their readings are the plain forward's
        with_stats = teacher_forced_pass(state.model, seqs, batch_size=batch_size, vocab_stats=True)
    finally:
        hook.remove()
    assert len({_prefix(s) for s in seqs[:20]}) == 5  # 5 questions × 4 answers under one prompt each
    # each prompt runs once per group (twice per question when batch 3 splits its answers): far fewer tokens
    assert shared_tokens < (0.8 if batch_size >= 4 else 0.9) * plain_tokens, (shared_tokens, plain_tokens)
    assert sum(tokens) == plain_tokens
    for a, b, c in zip(shared, plain, with_stats, strict=True):
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)
        np.testing.assert_array_equal(a.argmax, b.argmax)
        np.testing.assert_array_equal(a.labels, b.labels)
        assert a.mu is None and c.mu is not None
        np.testing.assert_array_equal(c.logprobs, b.logprobs)


@pytest.mark.parametrize("family", ["llama", "qwen2", "gpt2"])
def test_answers_common_start_runs_once_with_the_prompt(family: str, request: pytest.FixtureRequest) -> None:
    """Perturbed answers that differ only at the end ("... grew up in the town of X"): the prompt and their common
    start run once, each member runs only what follows; the readings equal the plain full forward's. One answer is
    the common start itself plus one token, so the shared part stops short of every member's last token."""
    import os

    from remnant.models.load import load_model

    state = load_model(request.getfixturevalue(f"tiny_{family}_dir"))
    setting = OpenUnlearningPrompt.for_tokenizer(state.tokenizer)
    question = "Where did Zorvak Telumi grow up?"
    answers = [f"Zorvak Telumi grew up in the town of {town}." for town in ("Kuopio", "Vantaa", "Oulu Bay")]
    seqs = [ScoredSequence(*_encoded(state.tokenizer, setting, question, a)) for a in answers]
    common = len(os.path.commonprefix([s.input_ids for s in seqs]))
    seqs.append(ScoredSequence(seqs[0].input_ids[: common + 1], seqs[0].label_start))
    shared_len = min(common, min(len(s.input_ids) for s in seqs) - 1)
    assert shared_len > seqs[0].label_start + 5  # the answers' common start is long
    tokens: list[int] = []
    hook = state.model.get_input_embeddings().register_forward_hook(
        lambda _m, args, _o: tokens.append(int(args[0].numel()))
    )
    try:
        shared = teacher_forced_pass(state.model, seqs, batch_size=8)
        shared_tokens = list(tokens)
        plain = teacher_forced_pass(_NoCache(state.model), seqs, batch_size=8)
    finally:
        hook.remove()
    assert shared_tokens == [shared_len, len(seqs) * max(len(s.input_ids) - shared_len for s in seqs)]
    for a, b in zip(shared, plain, strict=True):
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)
        np.testing.assert_array_equal(a.argmax, b.argmax)
        np.testing.assert_array_equal(a.labels, b.labels)


def _encoded(tok: Any, setting: Any, question: str, answer: str) -> tuple[tuple[int, ...], int]:
    enc = encode_qa(tok, setting, question, answer)
    return enc.full_ids, enc.label_start


class _LegacyCache(torch.nn.Module):
    """A forward that takes a cache and positions but returns a legacy tuple cache (no batch selection)."""

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self.inner = inner

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: Any = None,
        past_key_values: Any = None,
        **kw: Any,
    ) -> Any:
        from types import SimpleNamespace

        assert past_key_values is None  # the fallback never hands the tuple back
        out = self.inner(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, **kw)
        return SimpleNamespace(logits=out.logits, past_key_values=())


def test_a_cache_without_batch_selection_falls_back_to_plain_batches(tiny_llama: Any) -> None:
    seqs = _sequences(tiny_llama.tokenizer)[:8]
    legacy = teacher_forced_pass(_LegacyCache(tiny_llama.model), seqs, batch_size=8)
    plain = teacher_forced_pass(_NoCache(tiny_llama.model), seqs, batch_size=8)
    for a, b in zip(legacy, plain, strict=True):
        np.testing.assert_array_equal(a.logprobs, b.logprobs)


def test_vocab_stats_flags_are_per_sequence(tiny_llama: Any) -> None:
    seqs = _sequences(tiny_llama.tokenizer)[:6]
    flags = [i % 2 == 0 for i in range(6)]
    got = teacher_forced_pass(tiny_llama.model, seqs, batch_size=4, vocab_stats=flags)
    assert [g.mu is not None for g in got] == flags
    with pytest.raises(ValueError, match="flags"):
        teacher_forced_pass(tiny_llama.model, seqs, batch_size=4, vocab_stats=flags[:5])


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
