"""DPO-family methods (IdkDPO, AltPO): the scaled preference loss with golden values computed by hand from
docs/methods.md (``compute_dpo_loss``), and the methods on the tiny model."""

from __future__ import annotations

import math
import random

import pytest
import torch
from _methods_tiny import forget_items, mean_answer_nll, removal_data, run_method, same_weights, tiny_pack

from remnant import registry
from remnant.errors import ConfigError, PackError
from remnant.train.methods.altpo import pack_alternates
from remnant.train.methods.preference import preference_loss


def test_preference_loss_at_initialisation_is_2_ln2_over_beta() -> None:
    zero = torch.zeros(3)
    assert preference_loss(zero, zero, beta=0.1).item() == pytest.approx(
        20 * math.log(2.0), abs=1e-5
    )  # 13.8629
    assert preference_loss(zero, zero, beta=1.0).item() == pytest.approx(2 * math.log(2.0), abs=1e-6)


def test_preference_loss_golden_mixed_batch() -> None:
    # row 0: beta*(10-0)=1 -> 20*ln(1+e^-1) = 6.265234; row 1: beta*(0-10)=-1 -> 20*ln(1+e) = 26.265234
    win = torch.tensor([10.0, 0.0])
    lose = torch.tensor([0.0, 10.0])
    expected = (20 * math.log1p(math.exp(-1.0)) + 20 * math.log1p(math.exp(1.0))) / 2
    assert preference_loss(win, lose, beta=0.1).item() == pytest.approx(expected, abs=1e-4)
    assert expected == pytest.approx(16.265234, abs=1e-5)


def test_preference_loss_gradient_pushes_win_up_and_lose_down() -> None:
    win = torch.zeros(1, requires_grad=True)
    lose = torch.zeros(1, requires_grad=True)
    preference_loss(win, lose, beta=0.5).backward()
    assert win.grad is not None and lose.grad is not None
    # d/dwin = -(2/beta)*beta*sigmoid(-0)... = -2 * 0.5 = -1 at zero; lose gets +1
    assert win.grad.item() == pytest.approx(-1.0)
    assert lose.grad.item() == pytest.approx(1.0)


def test_preference_loss_refuses_nonpositive_beta() -> None:
    with pytest.raises(ValueError, match="beta"):
        preference_loss(torch.zeros(1), torch.zeros(1), beta=0.0)


# -- AltPO: alternates from the pack, and the method on the tiny model ----------------------------------------


def test_pack_alternates_swap_in_other_forget_entities_values_of_the_same_attribute() -> None:
    pack = tiny_pack()
    items = forget_items(30)
    alts = pack_alternates(pack, items, random.Random(0), n=5)
    assert len(alts) == len(items)
    forget_entities = {it.entity_id for it in items}
    for it, options in zip(items, alts, strict=True):
        assert it.entity_id is not None and it.attribute is not None
        truth = pack.entity(it.entity_id).attributes[it.attribute]
        pool = {pack.entity(e).attributes[it.attribute] for e in forget_entities} - {truth}
        assert 1 <= len(options) <= 5 and len(set(options)) == len(options)
        for alt in options:
            assert truth not in alt
            swapped = [v for v in pool if it.answer.replace(truth, v) == alt]
            assert len(swapped) == 1, (it.answer, alt)
    assert pack_alternates(pack, items, random.Random(0), n=5) == alts


def test_pack_alternates_forced_choice_uses_wrong_options_and_refuses_general_items() -> None:
    pack = tiny_pack()
    link = next(it for it in pack.split("probe") if it.kind == "link")
    (alts,) = pack_alternates(pack, [link], random.Random(0), n=5)
    assert link.options is not None and link.answer_index is not None
    assert sorted(alts) == sorted(o for i, o in enumerate(link.options) if i != link.answer_index)
    general = link.model_copy(
        update={"entity_id": None, "attribute": None, "options": None, "answer_index": None}
    )
    with pytest.raises(PackError, match="no attribute"):
        pack_alternates(pack, [general], random.Random(0))
    with pytest.raises(ConfigError, match="n_alternates"):
        pack_alternates(pack, [link], random.Random(0), n=0)


def _data_with_alternates() -> tuple[object, list[tuple[str, str]], list[tuple[str, str]]]:
    items = forget_items()
    alts = pack_alternates(tiny_pack(), items, random.Random(0), n=5)
    data = removal_data(alternates=alts)
    forget = [(it.question, it.answer) for it in items]
    alternate = [(it.question, a) for it, opts in zip(items, alts, strict=True) for a in opts]
    return data, forget, alternate


def test_altpo_defaults_and_missing_alternates() -> None:
    d = registry.defaults("method", "altpo")
    assert (d["beta"], d["gamma"], d["alpha"], d["n_alternates"]) == (0.1, 1.0, 1.0, 5)
    assert registry.get("method", "altpo").needs_reference is True


def test_altpo_without_supplied_alternates_is_a_clear_config_error(tiny_llama) -> None:
    with pytest.raises(ConfigError, match="pack_alternates"):
        run_method(tiny_llama, "altpo", {}, removal_data())


def test_altpo_draws_its_alternates_from_the_pack_removal_data_comes_from(tiny_llama) -> None:
    """Every path builds removal data with ``remnant.train.data.removal_data`` (assessment, sweep, studies): AltPO
    draws its alternates from that data's pack, reproducibly for a seed, and they are pack_alternates' swaps."""
    from remnant.models.prompts import PromptFormat
    from remnant.train.data import removal_data as pack_removal_data
    from remnant.train.loop import make_generator

    pack = tiny_pack()
    data = pack_removal_data(pack)
    assert [it.question for it in data.forget_items] == [qa.question for qa in data.forget]
    method = registry.create("method", "altpo", {"n_alternates": 3})
    fmt = PromptFormat.for_tokenizer(tiny_llama.tokenizer)
    drawn = method.alternates(
        tiny_llama.model, tiny_llama.tokenizer, fmt, data, make_generator(0, "alternates")
    )
    again = method.alternates(
        tiny_llama.model, tiny_llama.tokenizer, fmt, data, make_generator(0, "alternates")
    )
    assert drawn == again and len(drawn) == len(data.forget)
    for item, options in zip(data.forget_items, drawn, strict=True):
        truth = pack.entity(str(item.entity_id)).attributes[str(item.attribute)]
        assert 1 <= len(options) <= 3 and all(truth not in o and o != item.answer for o in options)
    one = run_method(tiny_llama, "altpo", {"beta": 0.5}, data)
    assert one.result.status == "completed"
    assert (
        one.result.outcome.losses
        == run_method(tiny_llama, "altpo", {"beta": 0.5}, data).result.outcome.losses
    )


def test_altpo_moves_likelihood_from_forget_to_alternate_answers(tiny_llama) -> None:
    tok = tiny_llama.tokenizer
    data, forget, alternate = _data_with_alternates()
    f_before = mean_answer_nll(tiny_llama.model, tok, forget)
    a_before = mean_answer_nll(tiny_llama.model, tok, alternate)
    one = run_method(tiny_llama, "altpo", {"beta": 0.5}, data)  # type: ignore[arg-type]
    two = run_method(tiny_llama, "altpo", {"beta": 0.5}, data)  # type: ignore[arg-type]
    assert one.result.status == "completed"
    assert one.result.outcome.losses == two.result.outcome.losses
    assert same_weights(one.model, two.model)
    f_after = mean_answer_nll(one.model, tok, forget)
    a_after = mean_answer_nll(one.model, tok, alternate)
    assert f_after > f_before
    assert (f_after - f_before) - (a_after - a_before) > 1.0
