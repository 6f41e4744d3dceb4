"""RMU pieces (docs/methods.md ``rmu.py``; Annex B.6): control vector and masked activation MSE, golden
values by hand; the method itself on the tiny model is tested further down."""

from __future__ import annotations

import pytest
import torch
from _methods_tiny import forget_items, removal_data, run_method, same_weights

from remnant import registry
from remnant.errors import ConfigError, DivergedError
from remnant.train.methods.rmu_loss import answer_mask, control_vector, masked_activation_mse


def test_control_vector_norm_sign_and_determinism() -> None:
    c1 = control_vector(64, 6.5, torch.Generator().manual_seed(3))
    c2 = control_vector(64, 6.5, torch.Generator().manual_seed(3))
    c3 = control_vector(64, 6.5, torch.Generator().manual_seed(4))
    assert c1.shape == (64,)
    assert torch.equal(c1, c2)
    assert not torch.equal(c1, c3)
    assert c1.norm().item() == pytest.approx(6.5, rel=1e-6)
    assert bool((c1 >= 0).all())  # u ~ U[0,1): the reference draws torch.rand, not a Gaussian


def _acts() -> tuple[torch.Tensor, torch.Tensor]:
    acts = torch.tensor(
        [
            [[1.0, 0.0], [3.0, 0.0], [0.0, 2.0]],
            [[1.0, 1.0], [1.0, 0.0], [5.0, 5.0]],
        ]
    )
    labels = torch.tensor([[-100, 7, 8], [9, -100, -100]])
    return acts, labels


def test_masked_activation_mse_golden() -> None:
    acts, labels = _acts()
    target = torch.tensor([1.0, 0.0])
    # seq 0: answer positions 1, 2: mean_d diff^2 = (4+0)/2 = 2 and (1+4)/2 = 2.5 -> 4.5 / 2 = 2.25
    # seq 1: answer position 0: (0+1)/2 = 0.5 -> 0.5 / 1 = 0.5;   batch mean = 1.375
    got = masked_activation_mse(acts, target, answer_mask(labels))
    assert got.item() == pytest.approx(1.375)
    # The reference's [B]/[B,1] broadcast would give mean_ij S_j/n_i = 1.875; at batch size 1 both agree.
    for row in range(2):
        one = masked_activation_mse(acts[row : row + 1], target, answer_mask(labels[row : row + 1]))
        assert one.item() == pytest.approx([2.25, 0.5][row])


def test_masked_activation_mse_against_reference_activation_and_empty_answer() -> None:
    acts, labels = _acts()
    assert masked_activation_mse(acts, acts.clone(), answer_mask(labels)).item() == 0.0
    empty = torch.full_like(labels, -100)
    # no answer tokens: 0, not NaN (an empty answer must not look like divergence)
    assert masked_activation_mse(acts, torch.zeros(2), answer_mask(empty)).item() == 0.0


def test_masked_activation_mse_gradient_points_to_target() -> None:
    acts = torch.zeros(1, 2, 3, requires_grad=True)
    target = torch.tensor([3.0, 0.0, -3.0])
    mask = torch.tensor([[True, False]])
    masked_activation_mse(acts, target, mask).backward()
    assert acts.grad is not None
    # d/da of mean_d (a-c)^2 at a=0 is -2c/3 on the answer position, 0 elsewhere
    assert acts.grad[0, 0].tolist() == pytest.approx([-2.0, 0.0, 2.0])
    assert acts.grad[0, 1].tolist() == [0.0, 0.0, 0.0]


# -- the method on the tiny model ------------------------------------------------------------------------------


def _forget_activation_distance(
    model: object, tokenizer: object, control: torch.Tensor, layer: int, indices: list[int] | None = None
) -> float:
    from remnant.models.prompts import PromptFormat, collate, encode_pair
    from remnant.train.methods.rmu import block_output

    fmt = PromptFormat.for_tokenizer(tokenizer)
    items = forget_items()
    chosen = [items[i] for i in indices] if indices is not None else items
    pairs = [encode_pair(tokenizer, it.question, it.answer, fmt) for it in chosen]
    batch = collate(pairs, pad_id=int(tokenizer.pad_token_id), side="right")  # type: ignore[attr-defined]
    with torch.no_grad():
        h = block_output(model, layer, batch)
    return float(masked_activation_mse(h, control, answer_mask(batch["labels"])))


def _control(seed: int, dim: int, steering: float) -> torch.Tensor:
    """The control vector RMU draws in setup: apply_removal hands it make_generator(seed, "setup")."""
    from remnant.train.loop import make_generator

    return control_vector(dim, steering, make_generator(seed, "setup"))


def test_rmu_defaults_follow_the_shipped_yaml() -> None:
    d = registry.defaults("method", "rmu")
    assert (d["layer"], d["steering_coeff"], d["gamma"], d["alpha"]) == (7, 2.0, 1.0, 1.0)
    assert d["retain_loss_type"] == "EMBED_DIFF" and d["trainable"] is None
    with pytest.raises(ConfigError, match="retain_loss_type"):
        registry.create("method", "rmu", {"retain_loss_type": "L2"})


def test_rmu_steers_forget_activations_toward_the_control_vector(tiny_llama) -> None:
    params = {"layer": 1, "steering_coeff": 6.5}
    control = _control(0, 64, 6.5)
    before = _forget_activation_distance(tiny_llama.model, tiny_llama.tokenizer, control, 1)
    one = run_method(tiny_llama, "rmu", params, removal_data())
    two = run_method(tiny_llama, "rmu", params, removal_data())
    assert one.result.status == "completed"
    assert one.result.outcome.losses == two.result.outcome.losses
    assert same_weights(one.model, two.model)
    after = _forget_activation_distance(one.model, tiny_llama.tokenizer, control, 1)
    assert after < 0.8 * before, (before, after)
    # The loop's first loss is gamma * forget MSE on the first micro-batch (the loop's epoch-0 order) plus
    # alpha * 0 (model == reference at step 0): it pins the control vector to make_generator(seed, "setup").
    from remnant.train.loop import make_generator

    first = torch.randperm(8, generator=make_generator(0, "order", 0)).tolist()[:4]
    expected = _forget_activation_distance(tiny_llama.model, tiny_llama.tokenizer, control, 1, first)
    assert one.result.outcome.losses[0] == pytest.approx(expected, rel=1e-5)


def test_rmu_other_seed_draws_another_control_vector(tiny_llama) -> None:
    a = run_method(tiny_llama, "rmu", {"layer": 1}, removal_data(), seed=0)
    b = run_method(tiny_llama, "rmu", {"layer": 1}, removal_data(), seed=1)
    assert a.result.outcome.losses[0] != b.result.outcome.losses[0]


def test_rmu_layer_beyond_the_model_is_a_config_error(tiny_llama) -> None:
    with pytest.raises(ConfigError, match="layer=7"):
        run_method(tiny_llama, "rmu", {}, removal_data())


def test_rmu_explosion_is_reported_as_diverged_not_raised(tiny_llama) -> None:
    # Annex B.6: RMU diverged at pilot settings. An absurd learning rate must end the run as *diverged*
    # with the step and reason, through the loop's mechanism, and apply_removal must still return.
    run = run_method(
        tiny_llama,
        "rmu",
        {"layer": 1, "steering_coeff": 50.0, "lr": 10.0, "max_grad_norm": None},
        removal_data(),
    )
    out = run.result.outcome
    assert run.result.status == "diverged"
    assert out.diverged_step is not None and 1 <= out.diverged_step <= out.total_steps
    assert out.reason and ("non-finite" in out.reason or "initial" in out.reason)
    with pytest.raises(DivergedError):
        out.raise_if_diverged()


def test_rmu_trains_only_the_selected_parameters(tiny_llama) -> None:
    pattern = r"model\.layers\.1\.mlp\.down_proj\.weight"
    run = run_method(tiny_llama, "rmu", {"layer": 1, "trainable": [pattern]}, removal_data())
    start = tiny_llama.model.state_dict()
    changed = sorted(k for k, v in run.model.state_dict().items() if not torch.equal(v, start[k]))
    assert changed == ["model.layers.1.mlp.down_proj.weight"]


def test_rmu_runs_under_lora_and_hooks_the_wrapped_block(tiny_llama) -> None:
    control = _control(0, 64, 6.5)
    before = _forget_activation_distance(tiny_llama.model, tiny_llama.tokenizer, control, 1)
    run = run_method(
        tiny_llama, "rmu", {"layer": 1, "steering_coeff": 6.5, "lora_rank": 4, "lr": 1e-2}, removal_data()
    )
    assert run.result.status == "completed"
    assert not hasattr(run.model, "peft_config")  # adapters merged back into a plain model
    after = _forget_activation_distance(run.model, tiny_llama.tokenizer, control, 1)
    assert after < before, (before, after)
