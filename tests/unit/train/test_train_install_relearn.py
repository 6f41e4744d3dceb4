"""Installation (R2), Annex B control states, and the relearning attack (C-W1–C-W6) on the tiny model."""

from __future__ import annotations

import json
from typing import Any

import pytest
from _train_tiny import fresh, pack, qa, same, weights

from remnant import registry
from remnant.errors import ConfigError
from remnant.studies.relearn_criterion import Curve, CurvePoint, _compare, relearn_attack
from remnant.train.data import removal_data, split_qa
from remnant.train.install import InstallSpec, install
from remnant.train.relearn import RelearnSpec, greedy_scorer
from remnant.train.removal import apply_removal

ATTR = ("birth_year",)


def test_install_stops_at_declared_level_and_records_strength(tiny_llama: Any) -> None:
    items = qa("install", ATTR)[:4]
    spec = InstallSpec(target=0.5, max_epochs=40, lr=3e-2, batch_size=4)
    model, result = install(fresh(tiny_llama), tiny_llama.tokenizer, items, spec, seed=0)
    assert result.control_kappa == 0.0 and result.curve[0] == (0.0, 0.0)
    assert result.reached and result.kappa >= 0.5 and result.n == 4
    assert result.outcome.status == "stopped" and result.steps < 40  # stopped at the level, not the budget
    assert result.curve[-1][1] == result.kappa and all(k < 0.5 for _, k in result.curve[:-1])
    k, n = greedy_scorer(tiny_llama.tokenizer, items, _fmt(tiny_llama))(model)
    assert (k, n) == (result.k, result.n)  # the returned model is the one that was scored
    json.dumps(result.to_dict())


def test_install_past_the_target_runs_every_epoch_and_reads_the_last(tiny_llama: Any) -> None:
    """stop_at_target=False: the same recipe as the stopping run trains all its epochs; R2 reads κ after the last.
    With nothing to decide between, κ is scored before training (R5) and after the last epoch only, while every
    epoch end is still a checkpoint (a resume point); the training is the stopping run's, continued."""
    items = qa("install", ATTR)[:4]
    stopping = InstallSpec(target=0.5, max_epochs=40, lr=3e-2, batch_size=4)
    stopped_model, stopped = install(fresh(tiny_llama), tiny_llama.tokenizer, items, stopping, seed=0)
    assert stopped.outcome.status == "stopped"
    epochs = int(stopped.epochs) + 2
    every = InstallSpec(target=0.5, max_epochs=epochs, lr=3e-2, batch_size=4, stop_at_target=False)
    model, full = install(fresh(tiny_llama), tiny_llama.tokenizer, items, every, seed=0)
    assert full.outcome.status == "completed" and full.epochs == float(epochs)
    assert full.curve == (stopped.curve[0], (float(epochs), full.kappa))
    assert [c.epoch for c in full.outcome.checkpoints] == [float(e) for e in range(epochs + 1)]
    assert full.reached == (full.kappa >= 0.5)
    assert greedy_scorer(tiny_llama.tokenizer, items, _fmt(tiny_llama))(model) == (full.k, full.n)
    # the same training as the stopping run: run for the epochs it stopped at, it gives the stopping run's weights
    ahead = InstallSpec(
        target=0.5, max_epochs=int(stopped.epochs), lr=3e-2, batch_size=4, stop_at_target=False
    )
    upto_model, upto = install(fresh(tiny_llama), tiny_llama.tokenizer, items, ahead, seed=0)
    assert same(weights(upto_model), weights(stopped_model)) and upto.kappa == stopped.kappa


def test_install_reports_budget_exhausted(tiny_llama: Any) -> None:
    items = qa("install", ATTR)[:4]
    _, result = install(
        fresh(tiny_llama), tiny_llama.tokenizer, items, InstallSpec(target=1.0, max_epochs=2, lr=1e-4), seed=0
    )
    assert not result.reached and result.outcome.status == "completed" and result.epochs == 2.0


def _fmt(state: Any) -> Any:
    from remnant.models.prompts import PromptFormat

    return PromptFormat.for_tokenizer(state.tokenizer)


SPEC = RelearnSpec(budgets=(2, 4, 64), lr=1e-2, epochs=2, checkpoint_epochs=(0.5,), batch_size=2, tau=0.5)


def test_relearn_same_start_gives_identical_curves(tiny_llama: Any) -> None:
    """C-W5: the procedure is identical for both models, so two copies of one model give one curve."""
    relearn, probe = qa("relearn", ATTR), qa("probe", ATTR)
    result = relearn_attack(tiny_llama.model, tiny_llama.model, tiny_llama.tokenizer, relearn, probe, SPEC)
    assert result.skipped_budgets == (64,) and [b.budget for b in result.budgets] == [2, 4]
    for b in result.budgets:
        assert b.post_removal.points == b.control.points
        steps = [p.step for p in b.post_removal.points]
        spe = -(-b.budget // SPEC.batch_size)
        assert steps == sorted({0, max(1, round(0.5 * spe)), spe, 2 * spe})  # C-W3: inside the first epoch
        assert all(p.n == len(probe) for p in b.post_removal.points)
        assert not b.exceeds_threshold
    assert set(result.budgets[0].examples) < set(result.budgets[1].examples)  # nested budgets
    assert result.headline_budget is None
    assert same(weights(tiny_llama.model), weights(fresh(tiny_llama)))  # inputs untouched


def test_relearn_records_both_curves_and_newcombe(tiny_llama: Any) -> None:
    """A removed model and the control under one procedure: both curves and Newcombe."""
    p = pack()
    tok = tiny_llama.tokenizer
    method = registry.create(
        "method",
        "grad_ascent",
        {"lr": 1e-2, "epochs": 1, "batch_size": 8, "grad_accum": 1, "warmup_epochs": 0.0},
    )
    post, rr = apply_removal(method, fresh(tiny_llama), tok, removal_data(p, ATTR), seed=0)
    assert rr.status == "completed"
    relearn = qa("relearn", ATTR)
    probe_inst = tuple(q for q in split_qa(p, "removal", ATTR) if q not in set(relearn))
    spec = RelearnSpec(budgets=(6,), lr=1e-2, epochs=2, checkpoint_epochs=(0.5,), batch_size=4, tau=0.3)
    res = relearn_attack(post, tiny_llama.model, tok, relearn, probe_inst, spec)
    b = res.budgets[0]
    assert len(b.post_removal.points) == len(b.control.points) == 4
    assert b.post_removal.points != b.control.points  # different starting weights, different curves
    assert all(pt.n == len(probe_inst) for pt in (*b.post_removal.points, *b.control.points))
    assert b.newcombe is not None and -1.0 <= b.newcombe[1] <= b.newcombe[0] <= b.newcombe[2] <= 1.0
    assert res.adjudicating and res.budgets[0].budget == 6


def test_headline_rules_on_synthetic_curves() -> None:
    def curve(which: Any, ks: list[int]) -> Curve:
        return Curve(which, tuple(CurvePoint(step=i, epoch=i / 2, k=k, n=20) for i, k in enumerate(ks)))

    spec = RelearnSpec(budgets=(8, 16), tau=0.5)
    low = _compare(8, (0,), curve("post_removal", [0, 6, 9]), curve("control", [0, 1, 2]), spec)
    assert not low.exceeds_threshold and low.exceeds_newcombe and low.newcombe_step == 1
    high = _compare(16, (0,), curve("post_removal", [0, 11, 18]), curve("control", [0, 2, 12]), spec)
    assert high.threshold_step == 1  # at step 2 the control reaches τ too, step 1 separates them
    both = _compare(16, (0,), curve("post_removal", [0, 15]), curve("control", [0, 14]), spec)
    assert not both.exceeds_threshold and not both.exceeds_newcombe  # recovery the control matches (V1a)
    from remnant.studies.relearn_criterion import RelearnResult

    res = RelearnResult(
        spec=spec, arm="held_out", adjudicating=True, relearn_set_size=16, budgets=(low, high)
    )
    assert res.headline_budget == 16 and res.headline_budget_newcombe == 8


def test_held_out_arm_refuses_scored_items_and_secondary_arm_never_adjudicates(tiny_llama: Any) -> None:
    probe = qa("probe", ATTR)
    with pytest.raises(ConfigError, match="C-W6"):
        relearn_attack(tiny_llama.model, tiny_llama.model, tiny_llama.tokenizer, probe, probe, SPEC)
    spec = RelearnSpec(budgets=(2,), lr=1e-3, epochs=1, checkpoint_epochs=(0.5,), batch_size=2)
    res = relearn_attack(
        tiny_llama.model, tiny_llama.model, tiny_llama.tokenizer, probe, probe, spec, arm="scored_items"
    )
    assert not res.adjudicating
    with pytest.raises(ConfigError):
        RelearnSpec(budgets=(16, 8))
    with pytest.raises(ConfigError):
        RelearnSpec(checkpoint_epochs=(1.5,))
