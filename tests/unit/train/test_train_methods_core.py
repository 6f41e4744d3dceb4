"""GradAscent, GradDiff, NPO, SimNPO, task-vector negation and retraining on the tiny model (docs/methods.md)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from _train_tiny import fresh, pairs, same, weights

from remnant import registry
from remnant.errors import ConfigError
from remnant.models.prompts import collate
from remnant.train.data import removal_data
from remnant.train.loop import TrainConfig, train
from remnant.train.losses import answer_lengths, mean_nll, sequence_nll
from remnant.train.methods.base import COMMON_DEFAULTS, MethodBatch, RemovalData, StepContext
from remnant.train.objectives import PairsObjective
from remnant.train.removal import apply_removal, frozen_copy

FAST: dict[str, Any] = {"lr": 3e-3, "epochs": 2, "batch_size": 4, "grad_accum": 1, "warmup_epochs": 0.0}
ATTR = ("birth_year",)


def _data() -> RemovalData:
    from _train_tiny import pack

    d = removal_data(pack(), ATTR)
    return RemovalData(forget=d.forget[:8], retain=d.retain[:8])


def _forget_nll(model: Any, tokenizer: Any, data: RemovalData) -> float:
    batch = collate(pairs(tokenizer, data.forget), pad_id=int(tokenizer.pad_token_id), side="right")
    with torch.no_grad():
        return float(mean_nll(model, batch))


def _batch(tokenizer: Any, data: RemovalData) -> MethodBatch:
    pid = int(tokenizer.pad_token_id)
    return MethodBatch(
        forget=collate(pairs(tokenizer, data.forget[:4]), pad_id=pid, side="right"),
        retain=collate(pairs(tokenizer, data.retain[:4]), pad_id=pid, side="right"),
        alternate=None,
        forget_index=(0, 1, 2, 3),
    )


@pytest.mark.parametrize("name", ["grad_ascent", "grad_diff", "npo", "simnpo"])
def test_loss_methods_raise_forget_nll_and_repeat_bitwise(tiny_llama: Any, name: str) -> None:
    data = _data()
    before = _forget_nll(tiny_llama.model, tiny_llama.tokenizer, data)
    runs = []
    # retain term off: on a random model retain and forget share templates, so it would lower both NLLs
    params = FAST if name == "grad_ascent" else {**FAST, "alpha": 0.0}
    if name == "simnpo":  # the random model's mean NLL (~6) saturates log σ(β·a) unless δ recentres it
        params = {**params, "delta": 6.0, "gamma": 1.0}
    for _ in range(2):
        method = registry.create("method", name, params)
        model, result = apply_removal(method, fresh(tiny_llama), tiny_llama.tokenizer, data, seed=3)
        runs.append((result, weights(model)))
    assert runs[0][0].outcome.losses == runs[1][0].outcome.losses
    assert same(runs[0][1], runs[1][1])
    result = runs[0][0]
    assert result.status == "completed" and result.outcome.steps == 4
    assert _forget_nll(model, tiny_llama.tokenizer, data) > before
    record = json.loads(json.dumps(result.to_dict()))
    assert record["method"]["name"] == name and record["method"]["params"]["lr"] == FAST["lr"]
    assert record["seed"] == 3


def test_npo_loss_at_initialisation_is_2_over_beta_ln2(tiny_llama: Any) -> None:
    method = registry.create("method", "npo", {"alpha": 0.0})
    ctx = StepContext(reference=frozen_copy(tiny_llama.model), generator=torch.Generator())
    terms = method.loss(tiny_llama.model, _batch(tiny_llama.tokenizer, _data()), ctx)
    assert float(terms.loss.detach()) == pytest.approx(2 / 0.1 * math.log(2), rel=1e-6)  # 13.8629
    assert terms.parts["log_ratio"] == pytest.approx(0.0, abs=1e-6)


def test_simnpo_and_graddiff_match_their_formulas(tiny_llama: Any) -> None:
    model, tok = tiny_llama.model, tiny_llama.tokenizer
    batch = _batch(tok, _data())
    ctx = StepContext(reference=None, generator=torch.Generator())
    with torch.no_grad():
        a = sequence_nll(model, batch.forget) / answer_lengths(batch.forget) - 0.5
        assert batch.retain is not None
        nll_r = mean_nll(model, batch.retain)
        nll_f = mean_nll(model, batch.forget)
        sim = registry.create("method", "simnpo", {"delta": 0.5}).loss(model, batch, ctx)
        want = 0.125 * (-(2 / 4.5) * F.logsigmoid(4.5 * a).mean()) + nll_r
        assert float(sim.loss) == pytest.approx(float(want), rel=1e-6)
        gd = registry.create("method", "grad_diff", {"gamma": 2.0, "alpha": 0.5}).loss(model, batch, ctx)
        assert float(gd.loss) == pytest.approx(float(-2.0 * nll_f + 0.5 * nll_r), rel=1e-6)
        ga = registry.create("method", "grad_ascent", {}).loss(model, batch, ctx)
        assert float(ga.loss) == pytest.approx(-float(nll_f), rel=1e-6)


def test_task_vector_install_source_is_exact_arithmetic(tiny_llama: Any) -> None:
    control = tiny_llama.model
    installed = fresh(tiny_llama)
    train(
        installed,
        PairsObjective(pairs(tiny_llama.tokenizer, _data().forget), 0),
        TrainConfig(lr=1e-2, progress=False),
    )
    w_pre, w_c = weights(installed), weights(control)
    for scale, expect in ((1.0, lambda p, c: c), (0.5, lambda p, c: p - 0.5 * (p - c))):
        method = registry.create("method", "task_vector", {"scale": scale})
        out, result = apply_removal(
            method, fresh_copy(installed), tiny_llama.tokenizer, _data(), seed=0, control=control
        )
        got = weights(out)
        assert result.status == "completed" and result.outcome.steps == 0
        for k in w_pre:
            assert torch.allclose(got[k], expect(w_pre[k], w_c[k]), atol=1e-6), k
    assert same(weights(tiny_llama.model), w_c)  # the control is never modified


def fresh_copy(model: Any) -> Any:
    import copy

    return copy.deepcopy(model)


def test_task_vector_finetune_source_moves_against_finetuning(tiny_llama: Any) -> None:
    data = _data()
    before = _forget_nll(tiny_llama.model, tiny_llama.tokenizer, data)
    method = registry.create(
        "method", "task_vector", {**FAST, "vector_source": "finetune", "finetune_epochs": 2}
    )
    out, result = apply_removal(method, fresh(tiny_llama), tiny_llama.tokenizer, data, seed=0)
    assert result.outcome.steps == 4
    assert _forget_nll(out, tiny_llama.tokenizer, data) > before


def test_retrain_equals_training_the_control_on_retain(tiny_llama: Any) -> None:
    data = _data()
    installed = fresh(tiny_llama)
    with torch.no_grad():
        for p in installed.parameters():
            p.add_(0.01)  # any model other than the control
    method = registry.create("method", "retrain", FAST)
    out, result = apply_removal(
        method, installed, tiny_llama.tokenizer, data, seed=5, control=tiny_llama.model
    )
    direct = fresh(tiny_llama)
    cfg = method.train_config(seed=5, progress=False, desc="retrain")
    ref = train(
        direct,
        PairsObjective(pairs(tiny_llama.tokenizer, data.retain), int(tiny_llama.tokenizer.pad_token_id)),
        cfg,
    )
    assert result.outcome.losses == ref.losses
    assert same(weights(out), weights(direct))
    with pytest.raises(ValueError):
        apply_removal(
            registry.create("method", "retrain", FAST), fresh(tiny_llama), tiny_llama.tokenizer, data, seed=0
        )


def test_exploding_removal_is_a_diverged_result_not_a_crash(tiny_llama: Any) -> None:
    data = _data()
    statuses = {}
    for name, lr in (("npo", 3e-3), ("grad_diff", 1e2), ("simnpo", 3e-3)):  # cells of one multi-cell run
        method = registry.create("method", name, {**FAST, "lr": lr, "max_grad_norm": None})
        _, result = apply_removal(method, fresh(tiny_llama), tiny_llama.tokenizer, data, seed=0)
        statuses[name] = (result.status, result.outcome.diverged_step, result.outcome.reason)
    assert statuses["grad_diff"][0] == "diverged" and statuses["grad_diff"][1] is not None
    assert statuses["npo"][0] == statuses["simnpo"][0] == "completed"


def test_every_method_lists_every_common_default() -> None:
    for name in registry.names("method"):
        d = registry.defaults("method", name)
        assert set(COMMON_DEFAULTS) <= set(d), name
        spec = registry.bind("method", name, {})
        assert set(spec.params) == set(d)
    with pytest.raises(ConfigError):
        registry.bind("method", "npo", {"betta": 0.2})


def test_lora_removal_merges_adapters(tiny_llama: Any) -> None:
    method = registry.create("method", "npo", {**FAST, "lora_rank": 4})
    out, result = apply_removal(method, fresh(tiny_llama), tiny_llama.tokenizer, _data(), seed=0)
    assert result.status == "completed"
    assert not any("lora" in n for n, _ in out.named_parameters())
    assert not same(weights(out), weights(tiny_llama.model))
    assert replace(_data(), alternates=()) == _data()


def test_removal_stops_at_a_declared_forget_level_through_on_checkpoint(tiny_llama: Any) -> None:
    """A removal declared to stop at a forget level (as installation stops at its level, R2): the reply
    ``{"stop": True}`` ends the run at that checkpoint, and the weights equal an uninterrupted run's at that step."""
    data = _data()
    # a constant schedule, so a 1.5-epoch run takes the same steps as the first 3 of a 4-epoch one
    params = {**FAST, "epochs": 4, "alpha": 0.0, "schedule": "constant"}
    seen: list[tuple[int, float]] = []

    def stop_after_step_3(model: Any, point: Any) -> dict[str, bool]:
        seen.append((point.step, _forget_nll(model, tiny_llama.tokenizer, data)))
        return {"stop": point.step >= 3}

    method = registry.create("method", "npo", params)
    stopped, result = apply_removal(
        method,
        fresh(tiny_llama),
        tiny_llama.tokenizer,
        data,
        seed=3,
        overrides={"checkpoint_epochs": (0.5, 1.0, 1.5, 2.0)},
        on_checkpoint=stop_after_step_3,
    )
    assert result.status == "stopped" and result.outcome.steps == 3
    assert [s for s, _ in seen] == [1, 2, 3]
    assert seen[0][1] < seen[-1][1]  # the forget NLL rises between checkpoints
    short = registry.create("method", "npo", {**params, "epochs": 1.5})
    reference, _ = apply_removal(short, fresh(tiny_llama), tiny_llama.tokenizer, data, seed=3)
    assert same(weights(stopped), weights(reference))
