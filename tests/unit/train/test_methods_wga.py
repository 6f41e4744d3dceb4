"""WGA (docs/methods.md ``compute_wga_loss``): defaults from their YAML, a hand-computed value with the weights
detached, and a short removal on the tiny model with the forget answers installed."""

from __future__ import annotations

import math
from typing import Any

import pytest
from _methods_installed import forget_pairs, hand_batch, installed_model, remove
from _methods_tiny import mean_answer_nll

from remnant import registry
from remnant.errors import ConfigError
from remnant.train.losses import reweighted_ascent

LN2, LN43 = math.log(2.0), math.log(4.0 / 3.0)


def test_wga_defaults_follow_the_shipped_yaml() -> None:
    d = registry.defaults("method", "wga")
    assert (d["beta"], d["gamma"], d["alpha"], d["retain_loss_type"]) == (1.0, 1.0, 1.0, "NLL")
    assert (d["lr"], d["epochs"], d["compat"]) == (1e-5, 5, "remnant")
    with pytest.raises(ConfigError, match="retain_loss_type"):
        registry.create("method", "wga", {"retain_loss_type": "KLD"})


def test_wga_golden_value_and_detached_weights() -> None:
    model, batch = hand_batch()
    loss, mean_w = reweighted_ascent(model, batch, lambda p: p)
    # -(1/2 * ln 2 + 3/4 * ln 4/3) / 2
    assert loss.item() == pytest.approx(-(0.5 * LN2 + 0.75 * LN43) / 2, abs=1e-6)
    assert mean_w.item() == pytest.approx((0.5 + 0.75) / 2, abs=1e-6)
    loss.backward()  # type: ignore[no-untyped-call]
    assert model.logits.grad is not None
    # d/dz of -(w * CE)/2 with w held fixed is -w/2 * (softmax - onehot): position 0: -(1/4) * [1/2 - 1, 1/2]
    assert model.logits.grad[0, 0].tolist() == pytest.approx([0.125, -0.125], abs=1e-6)
    assert model.logits.grad[0, 1].tolist() == pytest.approx([-0.375 * 0.25, 0.375 * 0.25], abs=1e-6)
    assert model.logits.grad[0, 2].abs().sum().item() == 0.0  # no label: no gradient


def test_wga_raises_forget_nll_on_the_installed_model_deterministically(tiny_llama: Any) -> None:
    before = mean_answer_nll(installed_model(tiny_llama), tiny_llama.tokenizer, forget_pairs())
    one_model, one = remove(tiny_llama, "wga", {"alpha": 0.0})
    _, two = remove(tiny_llama, "wga", {"alpha": 0.0})
    assert one.status == "completed" and one.outcome.steps == 6
    assert one.outcome.losses == two.outcome.losses
    after = mean_answer_nll(one_model, tiny_llama.tokenizer, forget_pairs())
    assert after > before + 1.0, (before, after)
    assert one.method["name"] == "wga" and one.method["params"]["compat"] == "remnant"
