"""SatImp (docs/methods.md ``compute_satimp_loss``): defaults from their YAML (not their code's), the weight
p^beta1 * (1 - p)^beta2 by hand, and a short removal on the tiny model with the forget answers installed."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from _methods_installed import forget_pairs, hand_batch, installed_model, remove
from _methods_tiny import mean_answer_nll

from remnant import registry
from remnant.train.losses import reweighted_ascent

LN2, LN43 = math.log(2.0), math.log(4.0 / 3.0)


def test_satimp_defaults_follow_the_shipped_yaml() -> None:
    d = registry.defaults("method", "satimp")
    # configs/trainer/SatImp.yaml: gamma 0.1, alpha 1 (their code defaults and README say gamma 1, alpha 0.1)
    assert (d["beta1"], d["beta2"], d["gamma"], d["alpha"]) == (5.0, 1.0, 0.1, 1.0)
    assert (d["lr"], d["epochs"], d["retain_loss_type"], d["compat"]) == (1e-5, 5, "NLL", "remnant")


def test_satimp_golden_value() -> None:
    model, batch = hand_batch()
    method = registry.create("method", "satimp", {"beta1": 1.0, "beta2": 2.0})
    loss, _ = reweighted_ascent(model, batch, method._weight)
    # w = p (1-p)^2: 1/2 * 1/4 = 1/8 and 3/4 * 1/16 = 3/64
    assert loss.item() == pytest.approx(-(LN2 / 8 + 3 * LN43 / 64) / 2, abs=1e-6)
    # a token the model is sure of (p -> 1) or has forgotten (p -> 0) gets no weight
    assert method._weight(torch.tensor([0.0, 1.0])).tolist() == [0.0, 0.0]
    assert math.isclose(float(method._weight(torch.tensor(0.5))), 0.125)


def test_satimp_raises_forget_nll_on_the_installed_model(tiny_llama: Any) -> None:
    before = mean_answer_nll(installed_model(tiny_llama), tiny_llama.tokenizer, forget_pairs())
    model, result = remove(tiny_llama, "satimp", {"alpha": 0.0})
    assert result.status == "completed" and result.outcome.steps == 6
    after = mean_answer_nll(model, tiny_llama.tokenizer, forget_pairs())
    assert after > before + 1.0, (before, after)
