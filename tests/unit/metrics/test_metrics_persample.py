"""Per-sample gradient norms from one batched backward (remnant.metrics.persample) against one backward per
sample, on each tiny family: Llama (untied head), Llama with a tied head (embedding + output head cross terms),
Qwen2 (linear biases), GPT-2 (tied head, Conv1D and LayerNorm through the torch.func path, position embedding)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import torch

from remnant.metrics import gradnorm
from remnant.metrics.forward import ScoredSequence
from remnant.metrics.gradnorm import _batch_losses, _batched_norms, _one_norms, gradnorm_pass
from remnant.metrics.persample import Unsupported, per_sample_sq_norms


def _load(path: Path, **overrides: Any) -> Any:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, **overrides)
    return model.eval()


def _sequences(vocab: int, n: int, seed: int) -> list[ScoredSequence]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        length = rng.randrange(6, 30)
        ids = tuple(rng.randrange(0, vocab) for _ in range(length))  # the padding_idx too
        out.append(ScoredSequence(ids, length - rng.randrange(2, length - 2)))
    return out


@pytest.fixture(params=["llama", "llama_tied", "qwen2", "gpt2"])
def family_model(request: pytest.FixtureRequest) -> Any:
    name = str(request.param)
    if name == "llama_tied":
        model = _load(request.getfixturevalue("tiny_llama_dir"))
        model.lm_head.weight = model.model.embed_tokens.weight
        assert len(list(model.parameters())) == len(list(model.named_parameters(remove_duplicate=False))) - 1
        return model
    return _load(request.getfixturevalue(f"tiny_{name}_dir"))


def test_batched_norms_equal_one_backward_per_sequence(family_model: Any) -> None:
    params = list(family_model.parameters())
    seqs = _sequences(family_model.config.vocab_size, 7, seed=1)
    batched = _batched_norms(family_model, seqs, pad_id=0)
    for seq, row in zip(seqs, batched, strict=True):
        naive = _one_norms(family_model, params, seq, 2.0)
        assert len(row) == len(naive) == len(params)
        for fast, slow in zip(row, naive, strict=True):
            assert fast == pytest.approx(slow, rel=2e-5, abs=1e-9)


def test_scores_by_batch_equal_scores_one_at_a_time(family_model: Any) -> None:
    seqs = _sequences(family_model.config.vocab_size, 9, seed=2)
    seqs.append(ScoredSequence(seqs[0].input_ids[:3], 2))  # one token left to score: 0, as one at a time
    one = gradnorm_pass(family_model, seqs, batch_size=1)[0]
    batched = gradnorm_pass(family_model, seqs, batch_size=4)[0]
    assert batched[-1] == one[-1] == 0.0
    assert batched == pytest.approx(one, rel=2e-5)
    assert len(set(one)) > 5  # the scores differ between sequences: the comparison can fail


def test_long_sequences_take_the_direct_path_with_the_same_norms(tiny_llama_dir: Path) -> None:
    model = _load(tiny_llama_dir)
    params = list(model.parameters())
    # 200 positions: T^2 (d_in + d_out) exceeds T d_in d_out for the 64-wide layers, so each sample's matrix is built
    seq = _sequences(model.config.vocab_size, 1, seed=3)[0]
    rng = random.Random(4)
    long = ScoredSequence(tuple(rng.randrange(4, model.config.vocab_size) for _ in range(200)), 150)
    for s in (seq, long):
        (row,) = _batched_norms(model, [s], pad_id=0)
        assert row == pytest.approx(_one_norms(model, params, s, 2.0), rel=2e-5)


def test_a_parameter_used_outside_a_module_call_sends_the_run_one_at_a_time(tiny_llama_dir: Path) -> None:
    model = _load(tiny_llama_dir)
    holder = torch.nn.Module()
    holder.shift = torch.nn.Parameter(torch.linspace(-1.0, 1.0, model.config.hidden_size))
    model.model.norm.holder = holder  # owned by a module that is never called ...
    model.model.norm.register_forward_hook(lambda _m, _a, out: out + holder.shift)  # ... but used
    seqs = _sequences(model.config.vocab_size, 5, seed=5)
    with pytest.raises(Unsupported, match="used 1 times in the graph, 0 of them"):
        _batched_norms(model, seqs, pad_id=0)  # the hooks cannot see it, the graph can
    assert gradnorm_pass(model, seqs, batch_size=4)[0] == gradnorm_pass(model, seqs, batch_size=1)[0]


def test_a_held_parameter_also_used_outside_its_module_sends_the_run_one_at_a_time(
    tiny_llama_dir: Path,
) -> None:
    """The embedding's weight is seen in its own call (so a set of seen parameters would pass) and read once more
    outside it: the graph starts at the embedding's output (no edge for that call), so its one edge is the use the
    hooks did not see."""
    model = _load(tiny_llama_dir)
    embed = model.model.embed_tokens
    model.model.norm.register_forward_hook(lambda _m, _a, out: out + embed.weight[3])
    seqs = _sequences(model.config.vocab_size, 4, seed=9)
    with pytest.raises(Unsupported, match="used 1 times in the graph, 0 of them"):
        _batched_norms(model, seqs, pad_id=0)
    fast = gradnorm_pass(model, seqs, batch_size=4)[0]
    assert fast == gradnorm_pass(model, seqs, batch_size=1)[0]


def test_unsupported_modules_fall_back(tiny_llama_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _load(tiny_llama_dir)
    model.model.embed_tokens.max_norm = 1.0  # renormalised rows: the gradient is not the plain scatter
    seqs = _sequences(model.config.vocab_size, 4, seed=6)
    ids = torch.tensor([seqs[0].input_ids])
    with pytest.raises(Unsupported, match="renormalises"):
        per_sample_sq_norms(model, ids, torch.ones_like(ids), _batch_losses(seqs[:1]))
    calls: list[int] = []
    real = gradnorm._one_norms
    monkeypatch.setattr(gradnorm, "_one_norms", lambda *a: calls.append(1) or real(*a))
    gradnorm_pass(model, seqs, batch_size=4)
    assert len(calls) == len(seqs)  # every sequence had its own backward


def test_other_norms_than_two_run_one_at_a_time(
    tiny_llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _load(tiny_llama_dir)
    seqs = _sequences(model.config.vocab_size, 3, seed=7)
    monkeypatch.setattr(gradnorm, "_batched_scores", lambda *a: pytest.fail("batched path used for p = 1"))
    scores = gradnorm_pass(model, seqs, p=1.0, batch_size=4)[0]
    params = list(model.parameters())
    expected = [sum(_one_norms(model, params, s, 1.0)) / len(params) for s in seqs]
    assert scores == pytest.approx(expected, rel=1e-12)


def test_batches_respect_the_token_budget(tiny_llama_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _load(tiny_llama_dir)
    seqs = _sequences(model.config.vocab_size, 8, seed=8)
    widths: list[int] = []
    real = gradnorm._batched_norms
    monkeypatch.setattr(gradnorm, "TOKENS_PER_BACKWARD", 60)
    monkeypatch.setattr(
        gradnorm,
        "_batched_norms",
        lambda m, b, p, r=None: widths.append(len(b) * max(len(s.input_ids) for s in b)) or real(m, b, p, r),
    )
    gradnorm_pass(model, seqs, batch_size=8)
    assert sum(1 for _ in widths) > 1
    assert all(w <= 60 or w == max(len(s.input_ids) for s in seqs) for w in widths)


def test_the_gradient_pass_forward_gives_the_scoring_readings(tiny_llama: Any) -> None:
    """With mia_gradnorm in the run, its forward's logits give the attacks' readings (μ_t, σ²_t included) and
    the scoring pass skips those sequences: the values are the scoring pass's, and fewer tokens run."""
    from metrics_data import SPLITS

    from remnant.metrics.encoding import OpenUnlearningPrompt
    from remnant.metrics.evaluate import EvalSettings, evaluate

    attacks = ["mia_loss", "mia_zlib", "mia_min_k", "mia_min_k_plus_plus"]
    tokens: list[int] = []
    hook = tiny_llama.model.get_input_embeddings().register_forward_hook(
        lambda _m, args, _o: tokens.append(int(args[0].numel()))
    )

    def run(names: list[str]) -> tuple[dict[str, Any], int]:
        tokens.clear()
        result = evaluate(
            tiny_llama,
            SPLITS.__getitem__,
            names,
            prompt=OpenUnlearningPrompt.for_tokenizer(tiny_llama.tokenizer),
            settings=EvalSettings(batch_size=4),
        )
        return {n: result.logs[n] for n in attacks if n in result.logs}, sum(tokens)

    try:
        alone, alone_tokens = run(attacks)
        with_gradnorm, both_tokens = run([*attacks, "mia_gradnorm"])
        _, gradnorm_tokens = run(["mia_gradnorm"])
    finally:
        hook.remove()
    assert both_tokens < alone_tokens + gradnorm_tokens  # the attacks' sequences were not run a second time
    compared = 0
    for name in attacks:
        for side in ("forget", "holdout"):
            a = alone[name].extra[side]["value_by_index"]
            b = with_gradnorm[name].extra[side]["value_by_index"]
            assert a.keys() == b.keys()
            for key in a:
                assert b[key]["score"] == pytest.approx(a[key]["score"], rel=1e-5, abs=1e-7), (name, key)
                compared += 1
    assert compared >= 4 * 2 * 5
