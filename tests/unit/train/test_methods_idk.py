"""IdkNLL and IdkDPO on the tiny model, and the versioned IDK bank (docs/methods.md; R6 refusal criterion)."""

from __future__ import annotations

import pytest
from _methods_tiny import forget_items, mean_answer_nll, removal_data, run_method, same_weights

from remnant import registry
from remnant.errors import ConfigError
from remnant.train.methods.idk import IDK_BANK, IDK_BANK_VERSION, bank_digest


def test_bank_is_versioned_distinct_and_digested() -> None:
    assert IDK_BANK_VERSION == "1"
    assert len(IDK_BANK) >= 30 and len(set(IDK_BANK)) == len(IDK_BANK)
    assert bank_digest().startswith("sha256:") and bank_digest() != bank_digest(IDK_BANK[:-1])


def test_every_bank_phrasing_is_a_refusal_under_the_willingness_criterion() -> None:
    willingness = pytest.importorskip("remnant.score.willingness")
    criterion = willingness.RefusalCriterion()
    assert [p for p in IDK_BANK if not criterion.is_refusal(p)] == []


def test_methods_are_registered_with_reference_defaults() -> None:
    nll = registry.defaults("method", "idk_nll")
    dpo = registry.defaults("method", "idk_dpo")
    assert (nll["gamma"], nll["alpha"], nll["retain_loss_type"]) == (1.0, 1.0, "NLL")
    assert (dpo["beta"], dpo["gamma"], dpo["alpha"]) == (0.1, 1.0, 1.0)
    assert nll["idk_bank"] == dpo["idk_bank"] == "remnant-idk-v1"
    assert registry.get("method", "idk_nll").needs_alternates == "idk"
    with pytest.raises(ConfigError, match="retain_loss_type"):
        registry.create("method", "idk_nll", {"retain_loss_type": "MSE"})
    with pytest.raises(ConfigError, match="idk_bank"):
        registry.create("method", "idk_dpo", {"idk_bank": "tofu-idk"})
    with pytest.raises(ConfigError, match="beta"):
        registry.create("method", "idk_dpo", {"beta": 0.0})


def _idk_pairs() -> list[tuple[str, str]]:
    return [(it.question, phrase) for it in forget_items() for phrase in IDK_BANK[:4]]


def _forget_pairs() -> list[tuple[str, str]]:
    return [(it.question, it.answer) for it in forget_items()]


def test_idk_nll_teaches_refusals_and_is_deterministic(tiny_llama) -> None:
    tok = tiny_llama.tokenizer
    before = mean_answer_nll(tiny_llama.model, tok, _idk_pairs())
    one = run_method(tiny_llama, "idk_nll", {}, removal_data())
    two = run_method(tiny_llama, "idk_nll", {}, removal_data())
    assert one.result.status == "completed" and one.result.outcome.steps == 6
    assert one.result.outcome.losses == two.result.outcome.losses
    assert same_weights(one.model, two.model)
    after = mean_answer_nll(one.model, tok, _idk_pairs())
    assert after < before - 1.0, (before, after)
    assert one.result.method["params"]["idk_bank"] == "remnant-idk-v1"


def test_idk_dpo_prefers_refusal_over_forget_answer(tiny_llama) -> None:
    tok = tiny_llama.tokenizer
    f_before = mean_answer_nll(tiny_llama.model, tok, _forget_pairs())
    i_before = mean_answer_nll(tiny_llama.model, tok, _idk_pairs())
    one = run_method(tiny_llama, "idk_dpo", {"beta": 0.5}, removal_data())
    two = run_method(tiny_llama, "idk_dpo", {"beta": 0.5}, removal_data())
    assert one.result.status == "completed"
    assert same_weights(one.model, two.model)
    assert one.result.outcome.losses == two.result.outcome.losses
    # first step's forget term is (2/beta) ln 2 at the reference (plus the retain NLL)
    f_after = mean_answer_nll(one.model, tok, _forget_pairs())
    i_after = mean_answer_nll(one.model, tok, _idk_pairs())
    # the margin r(idk) - r(forget) grows: forget answers lose likelihood relative to refusals
    assert (f_after - f_before) - (i_after - i_before) > 1.0
    assert f_after > f_before
    assert one.result.outcome.losses[-1] < one.result.outcome.losses[0]
