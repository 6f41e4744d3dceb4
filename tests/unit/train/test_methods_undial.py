"""UNDIAL's loss (docs/methods.md ``compute_undial_loss``): golden values by hand, and equality with the
reference formula where every position carries a real label."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from _methods_tiny import forget_items, mean_answer_nll, removal_data, retain_items, run_method, same_weights

from remnant import registry
from remnant.errors import ConfigError
from remnant.train.methods.undial_loss import undial_loss, undial_targets

LN2 = math.log(2.0)


def test_targets_lower_the_true_token_by_beta() -> None:
    # z_ref = 0 everywhere, beta = ln 2 on token 0: weights [1/2, 1, 1] -> q = [0.2, 0.4, 0.4]
    q = undial_targets(torch.zeros(1, 1, 3), torch.tensor([[0]]), beta=LN2)
    assert q[0, 0].tolist() == pytest.approx([0.2, 0.4, 0.4], abs=1e-6)
    # an ignored label (-100) gets no reduction: pure self-distillation target
    q_ignored = undial_targets(torch.zeros(1, 1, 3), torch.tensor([[-100]]), beta=LN2)
    assert q_ignored[0, 0].tolist() == pytest.approx([1 / 3] * 3, abs=1e-6)


def _batch(student_pos0: list[float]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    logits = torch.zeros(1, 3, 3)
    logits[0, 0] = torch.tensor(student_pos0)
    ref = torch.zeros(1, 3, 3)
    labels = torch.tensor([[-100, 0, -100]])  # position 0 predicts token 0; position 1 predicts nothing
    return logits, ref, labels


def test_undial_loss_golden_answer_positions() -> None:
    logits, ref, labels = _batch([0.0, 0.0, 0.0])
    # uniform student: CE(q, uniform) = ln 3
    assert undial_loss(logits, ref, labels, beta=LN2).item() == pytest.approx(math.log(3.0), abs=1e-6)
    logits, ref, labels = _batch([0.0, LN2, LN2])
    # student equals q = [0.2, 0.4, 0.4]: CE = H(q) = 0.2 ln 5 + 0.8 ln 2.5 = 1.0549202
    assert undial_loss(logits, ref, labels, beta=LN2).item() == pytest.approx(1.0549202, abs=1e-6)


def test_undial_loss_all_positions_adds_self_distillation() -> None:
    logits, ref, labels = _batch([0.0, LN2, LN2])
    got = undial_loss(logits, ref, labels, beta=LN2, positions="all")
    # position 0: H(q) = 1.0549202; position 1: uniform student vs uniform teacher = ln 3
    assert got.item() == pytest.approx((1.0549202 + math.log(3.0)) / 2, abs=1e-6)
    masked = undial_loss(
        logits, ref, labels, beta=LN2, positions="all", attention_mask=torch.tensor([[1, 1, 0]])
    )
    assert masked.item() == pytest.approx(1.0549202, abs=1e-6)


def _reference_formula(
    logits: torch.Tensor, ref: torch.Tensor, labels: torch.Tensor, beta: float
) -> torch.Tensor:
    """The reference's computation, written out from docs/methods.md (scatter of beta on the label)."""
    shift_labels = labels[..., 1:]
    shift_logits = logits[..., :-1, :]
    teacher = ref[..., :-1, :]
    mask = torch.zeros_like(teacher)
    b = torch.arange(mask.shape[0]).view(-1, 1, 1)
    s = torch.arange(mask.shape[1]).view(1, -1, 1)
    mask[b, s, shift_labels.unsqueeze(-1)] = 1.0
    soft = F.softmax(teacher - mask * beta, dim=-1)
    return F.cross_entropy(
        shift_logits.reshape(-1, shift_logits.shape[-1]), soft.reshape(-1, soft.shape[-1]), reduction="mean"
    )


def test_matches_reference_where_every_label_is_real() -> None:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 5, 11, generator=gen)
    ref = torch.randn(2, 5, 11, generator=gen)
    labels = torch.randint(0, 11, (2, 5), generator=gen)
    ours_answer = undial_loss(logits, ref, labels, beta=10.0)
    ours_all = undial_loss(logits, ref, labels, beta=10.0, positions="all")
    theirs = _reference_formula(logits, ref, labels, beta=10.0)
    assert ours_answer.item() == pytest.approx(theirs.item(), rel=1e-5)
    assert ours_all.item() == pytest.approx(theirs.item(), rel=1e-5)


def test_gradient_lowers_true_token_probability() -> None:
    logits = torch.zeros(1, 3, 3, requires_grad=True)
    undial_loss(logits, torch.zeros(1, 3, 3), torch.tensor([[-100, 0, -100]]), beta=LN2).backward()
    assert logits.grad is not None
    g = logits.grad[0, 0]
    # dCE/dz = softmax(z) - q = [1/3-0.2, 1/3-0.4, 1/3-0.4]: descent lowers the true token's logit
    assert g.tolist() == pytest.approx([1 / 3 - 0.2, 1 / 3 - 0.4, 1 / 3 - 0.4], abs=1e-6)
    assert logits.grad[0, 1].abs().sum().item() == 0.0


def test_rejects_unknown_positions() -> None:
    with pytest.raises(ValueError, match="positions"):
        undial_loss(torch.zeros(1, 2, 3), torch.zeros(1, 2, 3), torch.tensor([[-100, 0]]), 1.0, positions="x")  # type: ignore[arg-type]


# -- the method on the tiny model ------------------------------------------------------------------------------


def test_undial_defaults_follow_the_reference() -> None:
    d = registry.defaults("method", "undial")
    assert (d["beta"], d["gamma"], d["alpha"], d["lr"], d["positions"]) == (10.0, 1.0, 0.0, 1e-4, "answer")
    with pytest.raises(ConfigError, match="positions"):
        registry.create("method", "undial", {"positions": "prompt"})


def test_undial_lowers_forget_answer_likelihood_deterministically(tiny_llama) -> None:
    tok = tiny_llama.tokenizer
    forget = [(it.question, it.answer) for it in forget_items()]
    retain = [(it.question, it.answer) for it in retain_items()]
    before = mean_answer_nll(tiny_llama.model, tok, forget)
    retain_before = mean_answer_nll(tiny_llama.model, tok, retain)
    one = run_method(tiny_llama, "undial", {"lr": 2e-3}, removal_data())
    two = run_method(tiny_llama, "undial", {"lr": 2e-3}, removal_data())
    assert one.result.status == "completed"
    assert one.result.outcome.losses == two.result.outcome.losses
    assert same_weights(one.model, two.model)
    after = mean_answer_nll(one.model, tok, forget)
    assert after > before + 1.0, (before, after)
    # alpha = 0 by default: no retain term is computed, and the logged parts say so
    assert one.result.method["params"]["alpha"] == 0.0
    # the retain answers move far less than the forget answers (distillation keeps the rest of q)
    retain_after = mean_answer_nll(one.model, tok, retain)
    assert abs(retain_after - retain_before) < (after - before)
