"""Rates (k, n, Wilson; net of chance: R19, V1) and utility on two distinct scales (R9–R12)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from remnant import registry
from remnant.errors import ConfigError
from remnant.score.kappa import choice_by_loglik
from remnant.score.probe import Probe
from remnant.score.rates import Rate
from remnant.stats import wilson_interval


def test_rate_values() -> None:
    r = Rate.of(7, 20)
    assert (r.lo, r.hi) == pytest.approx(wilson_interval(7, 20))
    assert r.point == 0.35 and r.to_dict()["n"] == 20
    mc = Rate.of(7, 20, chance=0.25)
    assert mc.net == pytest.approx(0.10)
    assert mc.net_interval == pytest.approx((max(0.0, r.lo - 0.25), r.hi - 0.25))
    assert Rate.of(2, 20, chance=0.25).net == 0.0  # floored at zero
    with pytest.raises(ValueError):
        Rate.of(3, 2)


def test_utility_registry_and_r9() -> None:
    assert {"retain_kappa", "general_qa_kappa", "perplexity"} <= set(registry.names("utility"))
    with pytest.raises(ConfigError, match="R9"):
        registry.create("utility", "perplexity")
    assert registry.create("utility", "perplexity", {"deployment_is_lm": True}).spec.params[
        "deployment_is_lm"
    ]


def test_measured_identically_on_states(tiny_llama: Any) -> None:
    from remnant.models.prompts import PromptFormat

    tok = tiny_llama.tokenizer
    fmt = PromptFormat.for_tokenizer(tok)
    probes = [Probe(f"g{i}", f"What number follows {i}?", str(i + 1), (str(i + 1),)) for i in range(4)]
    metric = registry.create("utility", "general_qa_kappa", {"kept_ids": ("g0", "g2"), "max_new_tokens": 4})
    readings = [
        metric.measure(tiny_llama.model, tok, fmt, probes, state=s)
        for s in ("control", "pre_removal", "post_removal")
    ]
    assert {r.n for r in readings} == {2}
    assert len({r.value for r in readings}) == 1
    ppl = registry.create("utility", "perplexity", {"deployment_is_lm": True})
    texts = ["the quick brown fox jumps", "a b", "one two three four five six seven"]
    r = ppl.measure(tiny_llama.model, tok, fmt, texts, state="control")
    # inverse perplexity: exp(-mean NLL) over every token after each text's first, by a full forward per text
    nll, count = 0.0, 0
    for text in texts:
        ids = torch.tensor([tok(text)["input_ids"]])
        with torch.no_grad():
            logp = torch.log_softmax(tiny_llama.model(input_ids=ids).logits[0, :-1].float(), dim=-1)
        nll -= float(logp.gather(1, ids[0, 1:, None]).sum())
        count += ids.shape[1] - 1
    assert (r.n, r.value) == (count, pytest.approx(math.exp(-nll / count), rel=1e-5))
    assert 0.0 < r.value < 1.0


def test_choice_by_loglik_brute_force(tiny_llama: Any) -> None:
    import torch

    from remnant.models.prompts import PromptFormat, render_prompt_ids

    model, tok = tiny_llama.model, tiny_llama.tokenizer
    fmt = PromptFormat.for_tokenizer(tok)
    probe = Probe("m", "Which animal?", "dog", ("dog",), options=("fox", "dog", "cat"), answer_index=1)
    prompt = render_prompt_ids(tok, probe.question, fmt)
    scores = []
    for opt in probe.options or ():
        ans = tok(opt, add_special_tokens=False)["input_ids"]
        total = 0.0
        for j, t in enumerate(ans):
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([prompt + ans[:j]])).logits[0, -1]
            total += float(torch.log_softmax(logits.float(), -1)[t])
        scores.append(total)
    assert choice_by_loglik(model, tok, fmt, probe) == max(range(3), key=scores.__getitem__)
