"""CE-U (docs/methods.md ``ceu.py``): the target with the true token removed, by hand; the first answer
token skipped; and a short removal on the tiny model with the forget answers installed."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from _methods_installed import forget_pairs, installed_model, remove
from _methods_tiny import mean_answer_nll

from remnant import registry
from remnant.errors import ConfigError
from remnant.train.methods.ceu import ceu_loss


def test_ceu_defaults_follow_the_shipped_yaml() -> None:
    d = registry.defaults("method", "ceu")
    assert (d["ignore_first_n_answer_tokens"], d["compat"], d["lr"], d["epochs"]) == (1, "remnant", 1e-5, 10)
    assert "alpha" not in d and "retain_loss_type" not in d  # no retain term, as theirs
    for bad in (-1, 1.5, True):
        with pytest.raises(ConfigError, match="ignore_first_n_answer_tokens"):
            registry.create("method", "ceu", {"ignore_first_n_answer_tokens": bad})


def test_ceu_golden_value_and_true_token_gradient() -> None:
    logits = torch.zeros(1, 3, 3, requires_grad=True)
    labels = torch.tensor([[-100, 0, 0]])
    # with n = 0 both answer tokens count; z = 0: target [0, 1/2, 1/2], CE against uniform = ln 3 at each
    assert ceu_loss(logits, labels, 0).item() == pytest.approx(math.log(3.0), abs=1e-6)
    loss = ceu_loss(logits, labels, 1)  # the first answer token (label position 1) is not a target
    loss.backward()  # type: ignore[no-untyped-call]
    assert logits.grad is not None
    assert logits.grad[0, 0].abs().sum().item() == 0.0  # the position predicting the skipped token
    # position 1 predicts label 0: dCE/dz = softmax(z) - target = [1/3, 1/3 - 1/2, 1/3 - 1/2]; the true token's
    # logit is pushed down, the others up
    assert logits.grad[0, 1].tolist() == pytest.approx([1 / 3, -1 / 6, -1 / 6], abs=1e-6)
    assert logits.grad[0, 2].abs().sum().item() == 0.0


def test_ceu_target_keeps_the_rest_of_the_distribution() -> None:
    # position 0 predicts token 0. Target = softmax([-inf, 0, ln 3]) = [0, 1/4, 3/4]; a student already at that
    # shape (token 0 at -30) pays only the target's entropy 1/4 ln 4 + 3/4 ln 4/3
    z = torch.tensor([[[-30.0, 0.0, math.log(3.0)], [0.0, 0.0, 0.0]]])
    labels = torch.tensor([[-100, 0]])
    want = 0.25 * math.log(4.0) + 0.75 * math.log(4.0 / 3.0)
    assert ceu_loss(z, labels, 0).item() == pytest.approx(want, abs=1e-6)
    assert ceu_loss(z, labels, 5).item() == 0.0  # every answer token skipped: nothing to average


def test_ceu_raises_forget_nll_on_the_installed_model(tiny_llama: Any) -> None:
    before = mean_answer_nll(installed_model(tiny_llama), tiny_llama.tokenizer, forget_pairs())
    model, result = remove(tiny_llama, "ceu", {})
    assert result.status == "completed" and result.outcome.steps == 6
    after = mean_answer_nll(model, tiny_llama.tokenizer, forget_pairs())
    assert after > before + 1.0, (before, after)
