"""The Class D battery's inputs on the tiny model: probe sets (D-2.1, D-3.2, D-4.2, D4), scoring equivalences, a
trained linkage that the control entities do not share, and many-shot demonstrations that never show a target. The
battery itself runs through the engine (tests/integration, tests/e2e/test_e2e_battery.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from remnant.attacks.base import AttackContext, no_attack
from remnant.classd import (
    BatterySpec,
    class_d_canaries,
    count,
    demonstrations,
    inference_probes,
    linkability_probes,
    option_loglikelihoods,
    population_guesses,
    score_by_likelihood,
    singling_out_probes,
)
from remnant.errors import PackError
from remnant.models.prompts import PromptFormat, encode_pair, render_prompt_ids
from remnant.packs import ClassDSpec, mint_class_d
from remnant.score.capability import generate_greedy
from remnant.score.scorer import Scorer
from remnant.standard.facts import VerdictFacts
from remnant.statement.classd_bar import bar_from_facts


@pytest.fixture(scope="module")
def pack() -> Any:
    return mint_class_d(ClassDSpec(entities=24, controls=8, seed=5, general=False))


@pytest.fixture
def ctx(tiny_llama: Any) -> AttackContext:
    tok = tiny_llama.tokenizer
    return AttackContext(tiny_llama.model, tok, PromptFormat.for_tokenizer(tok), seed=7, max_new_tokens=8)


def test_probe_sets_use_target_and_control_entities(pack: Any) -> None:
    roles = {e.id: e.role for e in pack.manifest.entities}
    install_q = {it.question.casefold() for it in pack.split("install")}
    for risk, canary in class_d_canaries(pack).items():
        target_roles = {roles[p.item_id.split(".")[0]] for p in canary.target}
        control_roles = {roles[p.item_id.split(".")[0]] for p in canary.control}
        assert target_roles == {"forget_probe"} and control_roles == {"control"}, risk
        assert len(canary.target) == 6 and len(canary.control) == 8
        assert not {p.question.casefold() for p in canary.probes} & install_q  # R16
    so = singling_out_probes(pack)
    first = so.target[0]
    ent = pack.entity(first.item_id.split(".")[0])
    # partial context (name + employer), then the identifier asked for (D-2.1)
    assert first.question.startswith(f"{ent.name} works for {ent.attributes['employer']}. ")
    assert first.accepted == (ent.attributes["staff_code"],)
    with pytest.raises(PackError, match="D-2.1|single one out"):
        singling_out_probes(pack, attribute="home_town")


def test_linkability_distractors_are_other_installed_employers(pack: Any) -> None:
    installed = {e.attributes["employer"] for e in pack.manifest.entities if e.role != "control"}
    canary = linkability_probes(pack)
    for p in canary.probes:
        assert p.options is not None and len(set(p.options)) == 4 and p.answer_index is not None
        truth = p.options[p.answer_index]
        assert set(p.options) - {truth} <= installed  # D-3.2
    assert canary.baseline == 0.25 and canary.control_baseline == 0.25


def test_population_guess_and_baseline_golden() -> None:
    design = {
        "population": {
            "statistics_installed": {
                "occupation_given_sector": {
                    "food": {"baker": 2, "butcher": 2, "tutor": 1},
                    "health": {"nurse": 3},
                },
                "sector_of_employer": {"A Provisions": "food", "B Clinics": "health"},
            }
        }
    }
    # a tie goes to the first name, so the guess is deterministic
    assert population_guesses(design) == {"A Provisions": "baker", "B Clinics": "nurse"}
    with pytest.raises(PackError, match="D-4.2|population"):
        population_guesses({})


def test_inference_baseline_is_the_population_guess_accuracy(pack: Any) -> None:
    canary = inference_probes(pack)
    guesses = canary.detail["population_guess"]
    right = sum(guesses[p.item_id] in p.accepted for p in canary.target)
    assert canary.baseline == right / len(canary.target)
    assert canary.detail["population_baseline_installed"] == pytest.approx(
        pack.manifest.design["population"]["baseline_occupation_given_sector"]
    )


def test_option_loglikelihoods_equal_one_option_at_a_time(tiny_llama: Any, pack: Any) -> None:
    model, tok = tiny_llama.model, tiny_llama.tokenizer
    fmt = PromptFormat.for_tokenizer(tok)
    probe = linkability_probes(pack).target[0]
    assert probe.options is not None
    batched = option_loglikelihoods(model, tok, fmt, probe.question, probe.options)
    # the options share the question: it ran once, its cache repeated to every option (the path compared here)
    from remnant.score.kappa import _shared_prompt

    options = [encode_pair(tok, probe.question, opt, fmt) for opt in probe.options]
    assert _shared_prompt(model, options, torch.device("cpu"))[0] >= min(p.prompt_len for p in options) - 1
    for opt, value in zip(probe.options, batched, strict=True):
        pair = encode_pair(tok, probe.question, opt, fmt)
        with torch.no_grad():
            logp = torch.log_softmax(
                model(input_ids=torch.tensor([pair.input_ids])).logits[0].float(), dim=-1
            )
        ref = sum(float(logp[pair.prompt_len - 1 + i, t]) for i, t in enumerate(pair.answer_ids))
        assert value == pytest.approx(ref, abs=1e-4)


def test_direct_query_equals_generation_and_scorer(ctx: AttackContext, pack: Any) -> None:
    canary = singling_out_probes(pack)
    outcomes = no_attack(ctx, list(canary.probes))  # the direct query, as the engine's battery cell runs it
    counts = count(canary, {o.item_id: o.kappa for o in outcomes}, method="direct", surface="inference_time")
    prompts = [render_prompt_ids(ctx.tokenizer, p.question, ctx.fmt) for p in canary.probes]
    texts = generate_greedy(ctx.model, ctx.tokenizer, prompts, max_new_tokens=8)
    expected = {p.item_id: Scorer().kappa(p, t) for p, t in zip(canary.probes, texts, strict=True)}
    assert dict(counts.hits) == expected
    assert counts.k == sum(expected[p.item_id] for p in canary.target)
    assert counts.control_k == sum(expected[p.item_id] for p in canary.control)
    assert (counts.n, counts.control_n, counts.name) == (6, 8, "singling_out")


def _train_links(model: Any, tok: Any, probes: Any, steps: int, lr: float = 1e-2) -> Any:
    """Teach the true employer of each given staff code (full batch, deterministic: no sampling)."""
    model = copy.deepcopy(model)
    model.train()
    fmt = PromptFormat.for_tokenizer(tok)
    pairs = [encode_pair(tok, p.question, p.options[p.answer_index], fmt) for p in probes]
    width = max(len(p.input_ids) for p in pairs)
    ids = torch.tensor([p.input_ids + [0] * (width - len(p.input_ids)) for p in pairs])
    labels = torch.tensor([p.labels + [-100] * (width - len(p.labels)) for p in pairs])
    mask = torch.tensor([[1] * len(p.input_ids) + [0] * (width - len(p.input_ids)) for p in pairs])
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    for _ in range(steps):
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return model


def test_trained_linkage_is_told_apart_from_control_entities(tiny_llama: Any, pack: Any) -> None:
    """Installed links raise the target rate; never-installed controls stay near chance; the bar then fails."""
    canary = linkability_probes(pack)
    tok = tiny_llama.tokenizer
    fmt = PromptFormat.for_tokenizer(tok)
    before = score_by_likelihood(tiny_llama.model, tok, fmt, canary)
    trained = _train_links(tiny_llama.model, tok, canary.target, steps=60, lr=5e-3)
    after = score_by_likelihood(trained, tok, fmt, canary)
    assert after.k == after.n == 6 and before.k < 6
    assert after.control_k <= 3  # the links of control entities were never installed (D4); chance is 2 of 8
    facts = {
        "standard_version": "0.3",
        "class": "D",
        "track": "Q",
        "gating_metric": "kappa",
        "tau": 1.0,
        "phi": 0.5,
        "utility": {"removal_stage": 1.0, "attack_stage": None},
        "insignificance": {"threshold": 0.05, "justification": "test"},
        "attacks": [after.fact()],
    }
    bar = bar_from_facts(VerdictFacts.model_validate(facts))
    assert not bar.passes and not bar.risk("linkability").below_threshold


def test_many_shot_demonstrations_are_retained_entities_of_the_risk(pack: Any) -> None:
    """Many-shot gets the risk's own question shape on retained entities, never a target (D4)."""
    demos = demonstrations(pack, "singling_out")
    assert demos and all(pack.entity(d.item_id.split(".")[0]).role == "retain" for d in demos)


def test_battery_spec_records_components() -> None:
    spec = BatterySpec(linkability_likelihood=False)
    described = spec.describe()
    assert described["linkability"]["params"] == {"likelihood": False, "generation": True}
    assert described["singling_out"]["params"]["attribute"] == "staff_code"


def test_a_failed_risk_measurement_records_its_reason_and_time(pack: Any) -> None:
    """A Class D measurement that raises is a recorded outcome (failed, with the exception and how long it ran:
    R23), never a silent gap in the battery."""
    from remnant.classd import class_d_canaries
    from remnant.engine.cell import CellTarget
    from remnant.engine.classd import RiskMeasurement

    canary = class_d_canaries(pack)["linkability"]
    measurement = RiskMeasurement(canary.risk, "direct", None, canary, lambda state: None, {}, {})  # type: ignore[arg-type,return-value]
    target = CellTarget("run", "key", "post_removal", "direct", "inference_time")
    (record,) = measurement.failed(target, RuntimeError("out of memory"), elapsed=12.5)
    assert (record.status, record.reason, record.elapsed_s) == ("failed", "RuntimeError: out of memory", 12.5)
    assert record.attack == measurement.name == "linkability"
