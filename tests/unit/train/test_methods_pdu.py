"""PDU (docs/methods.md ``pdu.py``): the logit-margin flattening by hand (mask not shifted, as theirs), the
dual update and its warm-up, the settings refused, and a short removal on the installed tiny model."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from _methods_installed import forget_pairs, installed_model, micro_batch, remove
from _methods_tiny import mean_answer_nll

from remnant import registry
from remnant.errors import ConfigError
from remnant.train.losses import mean_nll
from remnant.train.methods.base import MethodBatch, StepContext
from remnant.train.methods.pdu import completed_epochs, logit_margin_flattening


def test_pdu_defaults_follow_the_shipped_yaml_and_eps_is_required() -> None:
    d = registry.defaults("method", "pdu")
    assert (d["primal_dual"], d["dual_step_size"], d["dual_update_upon"], d["dual_warmup_epochs"]) == (
        True,
        1.0,
        "step",
        5,
    )
    assert (d["gamma"], d["alpha"], d["retain_loss_type"], d["retain_loss_eps"]) == (1.0, 1.0, "NLL", None)
    with pytest.raises(ConfigError, match="retain_loss_eps is required"):
        registry.create("method", "pdu", {})  # their YAML leaves it ??? too
    with pytest.raises(ConfigError, match="epoch"):
        registry.create("method", "pdu", {"retain_loss_eps": 0.3, "dual_update_upon": "epoch"})
    with pytest.raises(ConfigError, match=">= 0"):
        registry.create("method", "pdu", {"retain_loss_eps": 0.3, "dual_step_size": -1.0})
    assert registry.create("method", "pdu", {"primal_dual": False}).retain_loss_eps is None  # eps 0 then


def test_logit_margin_flattening_golden_unshifted_mask() -> None:
    logits = torch.tensor([[[1.0, 2.0, 3.0], [0.0, 0.0, 6.0], [4.0, 4.0, 4.0]]])
    labels = torch.tensor([[-100, 5, 7]])
    # positions holding answer labels (1, 2), not the positions predicting them (0, 1): (6 - 2)^2 and 0 -> 8
    assert logit_margin_flattening(logits, labels).item() == pytest.approx(8.0)
    assert logit_margin_flattening(logits, torch.full_like(labels, -100)).item() == 0.0


def test_completed_epochs_from_the_forget_indices() -> None:
    state: dict[str, Any] = {}
    seen = [completed_epochs(state, idx) for idx in [(2, 0), (1, 3), (3, 1), (0, 2), (1, 0)]]
    assert seen == [0, 0, 1, 1, 2]  # a repeated index opens the next epoch


def _step(method: Any, model: Any, batch: MethodBatch, ctx: StepContext) -> dict[str, float]:
    with torch.no_grad():
        return dict(method.loss(model, batch, ctx).parts)


def test_dual_variable_updates_each_micro_batch_after_the_warmup(tiny_llama: Any) -> None:
    model = tiny_llama.model
    mb = micro_batch(tiny_llama.tokenizer, 2)
    assert mb.retain is not None
    with torch.no_grad():
        retain_nll = float(mean_nll(model, mb.retain))
    eps, eta = retain_nll - 0.5, 2.0  # the constraint is violated by 0.5 on this batch
    method = registry.create(
        "method",
        "pdu",
        {"retain_loss_eps": eps, "dual_step_size": eta, "dual_warmup_epochs": 1, "alpha": 3.0},
    )
    ctx = StepContext(reference=None, generator=torch.Generator())
    first = _step(method, model, mb, ctx)  # epoch 0: inside the warm-up, lambda stays at alpha
    assert first["dual"] == 3.0 and ctx.state["pdu_dual"] == 3.0
    with torch.no_grad():
        total = float(method.loss(model, mb, StepContext(reference=None, generator=torch.Generator())).loss)
    assert total == pytest.approx(first["forget"] + 3.0 * (first["retain"] - eps), rel=1e-5)
    second = _step(method, model, mb, ctx)  # the same indices again: epoch 1, updates on
    assert second["dual"] == 3.0
    assert ctx.state["pdu_dual"] == pytest.approx(3.0 + eta * 0.5, rel=1e-4)
    _step(method, model, mb, ctx)
    assert ctx.state["pdu_dual"] == pytest.approx(3.0 + 2 * eta * 0.5, rel=1e-4)
    # a satisfied constraint lowers lambda, never below zero
    loose = registry.create("method", "pdu", {"retain_loss_eps": retain_nll + 10.0, "dual_warmup_epochs": 0})
    ctx = StepContext(reference=None, generator=torch.Generator())
    _step(loose, model, mb, ctx)
    assert ctx.state["pdu_dual"] == 0.0
    fixed = registry.create(
        "method", "pdu", {"retain_loss_eps": eps, "primal_dual": False, "dual_warmup_epochs": 0}
    )
    ctx = StepContext(reference=None, generator=torch.Generator())
    _step(fixed, model, mb, ctx)
    assert ctx.state["pdu_dual"] == 1.0  # primal_dual off: lambda = alpha throughout


def test_pdu_raises_forget_nll_on_the_installed_model(tiny_llama: Any) -> None:
    before = mean_answer_nll(installed_model(tiny_llama), tiny_llama.tokenizer, forget_pairs())
    model, result = remove(tiny_llama, "pdu", {"retain_loss_eps": 0.3})
    assert result.status == "completed" and result.outcome.steps == 6
    after = mean_answer_nll(model, tiny_llama.tokenizer, forget_pairs())
    assert after > before + 1.0, (before, after)
