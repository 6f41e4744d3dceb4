"""The one training loop: determinism, schedules, checkpoints (C-W3), resume, divergence (Annex B.6)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from _train_tiny import fresh, pairs, qa, same, weights

from remnant.errors import ConfigError, DivergedError
from remnant.statement.canonical import derive_seed
from remnant.train.loop import (
    LoraSpec,
    TrainConfig,
    checkpoint_steps,
    lr_factor,
    merge_lora,
    prepare_model,
    train,
)
from remnant.train.objectives import PairsObjective


def _objective(state: Any) -> PairsObjective:
    return PairsObjective(pairs(state.tokenizer, qa("install")[:16]), int(state.tokenizer.pad_token_id))


def _cfg(**kw: Any) -> TrainConfig:
    base: dict[str, Any] = {"lr": 3e-3, "epochs": 2, "batch_size": 4, "grad_accum": 2, "progress": False}
    return TrainConfig(**{**base, **kw})


def test_same_seed_gives_bitwise_identical_losses_and_weights(tiny_llama: Any) -> None:
    obj = _objective(tiny_llama)
    runs = []
    for _ in range(2):
        model = fresh(tiny_llama)
        out = train(model, obj, _cfg(warmup_epochs=0.5, schedule="cosine"))
        runs.append((out.losses, weights(model)))
    assert runs[0][0] == runs[1][0]
    assert same(runs[0][1], runs[1][1])
    assert out.status == "completed" and out.steps == out.total_steps == 2 * out.steps_per_epoch


def test_different_seed_changes_order_and_weights(tiny_llama: Any) -> None:
    obj = _objective(tiny_llama)
    a, b = fresh(tiny_llama), fresh(tiny_llama)
    la = train(a, obj, _cfg(seed=0)).losses
    lb = train(b, obj, _cfg(seed=1)).losses
    assert la != lb
    assert not same(weights(a), weights(b))


def test_training_lowers_the_answer_loss(tiny_llama: Any) -> None:
    out = train(fresh(tiny_llama), _objective(tiny_llama), _cfg(epochs=8, grad_accum=1))
    assert out.losses[-1] < 0.6 * out.losses[0]


def test_global_rng_untouched(tiny_llama: Any) -> None:
    before = torch.random.get_rng_state()
    train(fresh(tiny_llama), _objective(tiny_llama), _cfg(epochs=1))
    assert torch.equal(before, torch.random.get_rng_state())


def test_lr_schedules() -> None:
    assert [lr_factor(s, 10, 2, "linear") for s in (0, 1)] == [0.5, 1.0]
    assert lr_factor(2, 10, 2, "linear") == 1.0
    assert lr_factor(6, 10, 2, "linear") == pytest.approx(0.5)
    assert lr_factor(6, 10, 2, "cosine") == pytest.approx(0.5)
    assert lr_factor(4, 10, 2, "cosine") == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.25)))
    assert lr_factor(9, 10, 0, "constant") == 1.0


def test_checkpoint_positions_inside_first_epoch_and_at_epoch_ends() -> None:
    cfg = TrainConfig(epochs=2, checkpoint_epochs=(0.25, 0.5, 0.75), score_at_start=True, progress=False)
    assert checkpoint_steps(cfg, 8, 16) == [0, 2, 4, 6, 8, 16]
    # a tiny epoch still gets its first declared checkpoint after one step, never at step 0
    assert checkpoint_steps(TrainConfig(epochs=1, checkpoint_epochs=(0.1,)), 2, 2) == [1, 2]
    with pytest.raises(ConfigError):
        TrainConfig(checkpoint_epochs=(0.0,))


def test_callback_sees_every_checkpoint_and_can_stop(tiny_llama: Any) -> None:
    obj = _objective(tiny_llama)
    seen: list[int] = []
    spe = math.ceil(obj.n / 4)

    def cb(model: Any, point: Any) -> dict[str, Any]:
        seen.append(point.step)
        return {"step_seen": point.step, "stop": point.step >= spe}

    cfg = _cfg(epochs=2, grad_accum=1, checkpoint_epochs=(0.5,), score_at_start=True)
    out = train(fresh(tiny_llama), obj, cfg, on_checkpoint=cb)
    assert out.steps_per_epoch == spe
    assert seen == [0, round(0.5 * spe), spe]
    assert out.status == "stopped" and out.steps == spe
    assert [c.scores["step_seen"] for c in out.checkpoints] == seen


class _Kill(Exception):
    pass


def test_kill_and_resume_gives_bitwise_identical_weights(tiny_llama: Any, tmp_path: Path) -> None:
    obj = _objective(tiny_llama)
    cfg = _cfg(
        epochs=3, grad_accum=1, checkpoint_epochs=(0.5,), save_every=1, schedule="cosine", warmup_epochs=0.5
    )
    ref_model = fresh(tiny_llama)
    ref = train(ref_model, obj, cfg)

    def killer(step: int, loss: float) -> None:
        if step == 5:
            raise _Kill

    model = fresh(tiny_llama)
    with pytest.raises(_Kill):
        train(model, obj, cfg, on_step=killer, checkpoint_dir=tmp_path)
    resumed_model = fresh(tiny_llama)  # a new process would start from the original weights
    out = train(resumed_model, obj, cfg, checkpoint_dir=tmp_path, resume=True)
    assert out.resumed_from is not None and 0 < out.resumed_from <= 5
    assert out.losses == ref.losses
    assert same(weights(resumed_model), weights(ref_model))


def test_resume_refuses_a_different_config(tiny_llama: Any, tmp_path: Path) -> None:
    obj = _objective(tiny_llama)
    train(fresh(tiny_llama), obj, _cfg(epochs=1), checkpoint_dir=tmp_path)
    with pytest.raises(ConfigError):
        train(fresh(tiny_llama), obj, _cfg(epochs=1, lr=1e-3), checkpoint_dir=tmp_path, resume=True)


def test_exploding_lr_is_reported_as_diverged_and_other_cells_continue(tiny_llama: Any) -> None:
    obj = _objective(tiny_llama)
    cells = {"ok-a": 3e-3, "explode": 1e2, "ok-b": 1e-3}
    outcomes = {}
    for name, lr in cells.items():
        outcomes[name] = train(
            fresh(tiny_llama), obj, _cfg(lr=lr, epochs=4, grad_accum=1, max_grad_norm=None)
        )
    assert outcomes["explode"].status == "diverged"
    assert outcomes["explode"].diverged_step is not None and outcomes["explode"].reason
    assert outcomes["ok-a"].status == outcomes["ok-b"].status == "completed"
    with pytest.raises(DivergedError) as err:
        outcomes["explode"].raise_if_diverged()
    assert err.value.step == outcomes["explode"].diverged_step


def test_lora_and_partial_training(tiny_llama: Any) -> None:
    obj = _objective(tiny_llama)
    start = weights(tiny_llama.model)
    cfg = _cfg(epochs=1, trainable=(r"layers\.1\.mlp",))
    model = prepare_model(fresh(tiny_llama), cfg)
    train(model, obj, cfg)
    after = weights(model)
    changed = {k for k in start if not torch.equal(start[k], after[k])}
    assert changed and all("layers.1.mlp" in k for k in changed)
    lcfg = _cfg(epochs=1, lr=1e-2, lora=LoraSpec(rank=4, alpha=8))
    losses = []
    for _ in range(2):  # adapters are drawn from the run's generator, so LoRA runs repeat bitwise
        lm = prepare_model(fresh(tiny_llama), lcfg)
        losses.append(train(lm, obj, lcfg).losses)
        assert all(("lora_" in n) for n, p in lm.named_parameters() if p.requires_grad)
    assert losses[0] == losses[1]


#: What the loop must keep producing for a seed (R24): the last loss, and the trained weights' change from the start
#: (LoRA merged) as its sum and its L2 norm. A bitwise digest of the weights is this CPU's float arithmetic (AVX2
#: and AVX-512 kernels round differently, so one digest fails on another machine of the same kind); these figures
#: agree across CPUs to ~1e-6, while a change of data order or schedule moves the sum by whole units and the norm
#: by ~1% (a different seed: sum -8.42 -> +2.71, norm 1.902 -> 1.888 for "full"). Bitwise repeatability on one
#: machine is test_same_seed_gives_bitwise_identical_losses_and_weights. Recompute here if torch changes, never to
#: make a loop change pass.
GOLDEN_TRAINING: dict[str, tuple[float, float, float]] = {
    "full": (5.494166374206543, -8.421228787449664, 1.9022128473734667),
    "cosine_warmup": (5.381479024887085, -9.286905796970032, 2.2168420971987146),
    "lora": (6.082665205001831, -0.05495203670398041, 1.0731446568566048),
}
GOLDEN_CONFIGS: dict[str, dict[str, Any]] = {
    "full": {},
    "cosine_warmup": {"warmup_epochs": 0.5, "schedule": "cosine"},
    "lora": {"epochs": 1, "lr": 1e-2, "lora": LoraSpec(rank=4, alpha=8)},
}


def _change(start: dict[str, torch.Tensor], model: Any) -> tuple[float, float]:
    """Sum and L2 norm of the weights' change from ``start`` (float64)."""
    after = model.state_dict()
    deltas = [after[k].double() - start[k].double() for k in start]
    return float(sum(d.sum() for d in deltas)), float(sum((d**2).sum() for d in deltas)) ** 0.5


@pytest.mark.parametrize("name", sorted(GOLDEN_CONFIGS))
def test_trained_weights_match_their_golden_figures(tiny_llama: Any, name: str) -> None:
    cfg = _cfg(**GOLDEN_CONFIGS[name])
    start = {k: v.clone() for k, v in fresh(tiny_llama).state_dict().items()}
    model = prepare_model(fresh(tiny_llama), cfg) if cfg.lora is not None else fresh(tiny_llama)
    out = train(model, _objective(tiny_llama), cfg)
    assert out.status == "completed" and out.steps == out.total_steps > 0
    total, norm = _change(start, merge_lora(model) if cfg.lora is not None else model)
    loss, golden_total, golden_norm = GOLDEN_TRAINING[name]
    assert out.losses[-1] == pytest.approx(loss, rel=2e-4)
    assert total == pytest.approx(golden_total, rel=2e-4, abs=1e-3)
    assert norm == pytest.approx(golden_norm, rel=2e-4)


def test_derive_seed_is_stable() -> None:
    assert derive_seed(0, "order", 1) == derive_seed(0, "order", 1) != derive_seed(0, "order", 2)
    assert 0 <= derive_seed(123, "x") < 2**63
