"""Every metric of one ``evaluate`` run on the tiny model against a NAIVE implementation of OpenUnlearning's
definition (tests/unit/metrics/ou_naive.py: one sequence at a time, their label layout and slicing), to 1e-5."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from metrics_data import SPLITS
from ou_naive import (
    ou_exact_memorization,
    ou_extraction_strength,
    ou_generation_prompt,
    ou_gradnorm,
    ou_instance,
    ou_min_k,
    ou_min_k_plus_plus,
    ou_probability,
    ou_tokenwise,
    ou_truth_ratio,
    ou_zlib,
    pairwise_auc,
)
from scipy.stats import hmean  # type: ignore[import-untyped]

from remnant.metrics.encoding import OpenUnlearningPrompt
from remnant.metrics.evaluate import EvalResult, EvalSettings, evaluate
from remnant.metrics.rouge import rouge_fields
from remnant.metrics.text import clean_up_spaces
from remnant.metrics.utility import MODEL_UTILITY_PARTS

CHAT = {"apply_chat_template": True, "system_prompt": "You are a helpful assistant."}
ALL = [
    "forget_Q_A_Prob",
    "forget_truth_ratio",
    "retain_Truth_Ratio",
    "model_utility",
    "extraction_strength",
    "exact_memorization",
    "mia_loss",
    "mia_zlib",
    "mia_min_k",
    "mia_min_k_plus_plus",
    "mia_gradnorm",
    "mia_reference",
    "privleak",
    "forget_Q_A_PERT_ROUGE",
]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from fixtures_models import build_tiny_model  # type: ignore[import-not-found]
    from remnant.models.load import load_model

    return load_model(build_tiny_model("llama", tmp_path_factory.mktemp("ref") / "model", seed=1))


@pytest.fixture(scope="module")
def result(tiny_llama: Any, reference: Any) -> EvalResult:
    return evaluate(
        tiny_llama,
        SPLITS.__getitem__,
        ALL,
        prompt=OpenUnlearningPrompt.for_tokenizer(tiny_llama.tokenizer),
        settings=EvalSettings(batch_size=4, max_new_tokens=12),
        reference=reference,
    )


def _item(model: Any, tok: Any, question: str, answer: str) -> tuple[list[int], list[int], float]:
    ids, labels = ou_instance(tok, CHAT, question, answer)
    return ids, labels, ou_probability(model, ids, labels)[1]


def _by_index(result: EvalResult, name: str, field: str) -> list[Any]:
    vbi = result.logs[name].value_by_index
    assert vbi is not None
    return [vbi[str(i)][field] for i in range(len(vbi))]


def test_answer_probability_and_its_perturbed_lists(tiny_llama: Any, result: EvalResult) -> None:
    model, tok = tiny_llama.model, tiny_llama.tokenizer
    rows = SPLITS["forget10_perturbed"]
    probs = [ou_probability(model, *ou_instance(tok, CHAT, r.question, r.answer))[0] for r in rows]
    np.testing.assert_allclose(_by_index(result, "forget_Q_A_Prob", "prob"), probs, atol=1e-5)
    assert result.logs["forget_Q_A_Prob"].agg_value == pytest.approx(np.mean(probs), abs=1e-5)
    pert = [[_item(model, tok, r.question, a)[2] for a in r.perturbed_answer or ()] for r in rows]
    np.testing.assert_allclose(_by_index(result, "forget_Q_A_PERT_Prob", "avg_loss"), pert, atol=1e-5)
    assert result.logs["forget_Q_A_PERT_Prob"].agg_value == pytest.approx(
        np.mean(np.exp(-np.array(pert))), abs=1e-5
    )


@pytest.mark.parametrize(
    ("name", "split", "aggregator"),
    [
        ("forget_truth_ratio", "forget10_perturbed", "closer_to_1_better"),
        ("retain_Truth_Ratio", "retain_perturbed", "true_better"),
    ],
)
def test_truth_ratio(tiny_llama: Any, result: EvalResult, name: str, split: str, aggregator: str) -> None:
    model, tok = tiny_llama.model, tiny_llama.tokenizer
    rows = SPLITS[split]
    para = [_item(model, tok, r.question, r.paraphrased_answer or "")[2] for r in rows]
    pert = [[_item(model, tok, r.question, a)[2] for a in r.perturbed_answer or ()] for r in rows]
    tr, agg = ou_truth_ratio(para, pert, aggregator)
    np.testing.assert_allclose(_by_index(result, name, "score"), tr, rtol=1e-5)
    assert result.logs[name].agg_value == pytest.approx(agg, abs=1e-5)


def test_normalised_probability_and_model_utility(tiny_llama: Any, result: EvalResult) -> None:
    model, tok = tiny_llama.model, tiny_llama.tokenizer
    for prefix, split in (("ra", "real_authors_perturbed"), ("wf", "world_facts_perturbed")):
        rows = SPLITS[split]
        c = np.array([ou_probability(model, *ou_instance(tok, CHAT, r.question, r.answer))[0] for r in rows])
        w = np.array(
            [
                [
                    ou_probability(model, *ou_instance(tok, CHAT, r.question, a))[0]
                    for a in r.perturbed_answer or ()
                ]
                for r in rows
            ]
        )
        expected = c / (c + w.sum(axis=1) + 1e-10)
        got = _by_index(result, f"{prefix}_Q_A_Prob_normalised", "prob")
        np.testing.assert_allclose(got, expected, atol=1e-5)
    parts = [result.logs[n].agg_value for n in MODEL_UTILITY_PARTS]
    assert len(parts) == 9
    assert result.logs["model_utility"].agg_value == pytest.approx(float(hmean(parts)), abs=1e-12)


def test_extraction_strength_and_exact_memorization(tiny_llama: Any, result: EvalResult) -> None:
    model, tok = tiny_llama.model, tiny_llama.tokenizer
    es, em = [], []
    for r in SPLITS["forget10_perturbed"]:
        ids, labels = ou_instance(tok, CHAT, r.question, r.answer)
        _, vocab, kept = ou_tokenwise(model, ids, labels)
        es.append(ou_extraction_strength(vocab, kept))
        em.append(ou_exact_memorization(vocab, kept))
    np.testing.assert_allclose(_by_index(result, "extraction_strength", "score"), es, atol=1e-12)
    assert None not in em
    np.testing.assert_allclose(
        _by_index(result, "exact_memorization", "score"), [float(x or 0) for x in em], atol=1e-12
    )


def _attack_naive(name: str, model: Any, ref: Any, tok: Any, q: str, a: str) -> float:
    ids, labels = ou_instance(tok, CHAT, q, a)
    avg = ou_probability(model, ids, labels)[1]
    lp, vocab, _ = ou_tokenwise(model, ids, labels)
    if name == "mia_loss":
        return avg
    if name == "mia_zlib":
        return ou_zlib(avg, tok, labels)
    if name == "mia_min_k":
        return ou_min_k(lp)
    if name == "mia_min_k_plus_plus":
        return ou_min_k_plus_plus(vocab, lp)
    if name == "mia_reference":
        return avg - ou_probability(ref.model, ids, labels)[1]
    with torch.enable_grad():
        return ou_gradnorm(model, ids, labels)


@pytest.mark.parametrize(
    "name", ["mia_loss", "mia_zlib", "mia_min_k", "mia_min_k_plus_plus", "mia_reference", "mia_gradnorm"]
)
def test_membership_attacks(tiny_llama: Any, reference: Any, result: EvalResult, name: str) -> None:
    tok = tiny_llama.tokenizer
    entry = result.logs[name].to_json()
    sides = {}
    for side, split in (("forget", "forget10_perturbed"), ("holdout", "holdout10")):
        naive = [
            _attack_naive(name, tiny_llama.model, reference, tok, r.question, r.answer) for r in SPLITS[split]
        ]
        got = [entry[side]["value_by_index"][str(i)]["score"] for i in range(len(naive))]
        np.testing.assert_allclose(got, naive, rtol=1e-5, atol=1e-6)
        sides[side] = naive
    assert (
        entry["auc"] == entry["agg_value"] == pytest.approx(pairwise_auc(sides["forget"], sides["holdout"]))
    )
    assert entry["forget"]["agg_value"] == pytest.approx(np.mean(sides["forget"]), rel=1e-5)


def test_gradnorm_leaves_the_shared_model_as_it_was(tiny_llama: Any, result: EvalResult) -> None:
    params = list(tiny_llama.model.parameters())
    assert all(p.grad is None for p in params)
    assert all(p.requires_grad for p in params)  # restored (load_model leaves them trainable)
    assert not tiny_llama.model.training


def test_privleak_uses_min_k_auc_and_the_half_fallback(result: EvalResult) -> None:
    auc = result.logs["mia_min_k"].agg_value
    assert auc is not None
    assert result.logs["privleak"].agg_value == pytest.approx(((1 - auc) - 0.5) / (0.5 + 1e-10) * 100)
    assert any("privleak" in n and "0.5" in n for n in result.notes)


def _naive_generation(model: Any, tok: Any, prompt_ids: list[int], max_new: int) -> str:
    out = model.generate(
        torch.tensor([prompt_ids]),
        attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long),
        do_sample=False,
        max_new_tokens=max_new,
        pad_token_id=tok.eos_token_id,
    )
    text = clean_up_spaces(
        tok.decode(out[0, len(prompt_ids) :], skip_special_tokens=True, clean_up_tokenization_spaces=False)
    )
    eos_text = tok.decode([tok.eos_token_id])
    return (text.split(eos_text)[0] if eos_text in text else text).strip()


def test_rouge_on_greedy_generations(tiny_llama: Any, result: EvalResult) -> None:
    from rouge_score import rouge_scorer  # type: ignore[import-untyped]

    model, tok = tiny_llama.model, tiny_llama.tokenizer
    scorer = rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=True)
    entry = result.logs["forget_Q_A_PERT_ROUGE"]
    assert entry.value_by_index is not None
    means = []
    for i, r in enumerate(SPLITS["forget10_perturbed"]):
        gen = _naive_generation(model, tok, ou_generation_prompt(tok, CHAT, r.question), 12)
        got = entry.value_by_index[str(i)]
        assert got["generation"] == [gen] * 3
        recalls = []
        for j, answer in enumerate(r.perturbed_answer or ()):
            assert got["ground_truth"][j] == answer
            s = scorer.score(answer, gen)
            assert (
                got["rougeL_recall"][j] == s["rougeL"].recall
                and got["rouge1_recall"][j] == s["rouge1"].recall
            )
            recalls.append(s["rougeL"].recall)
        means.append(np.mean(recalls))
    assert entry.agg_value == pytest.approx(np.mean(means))


def test_rouge_fields_are_identical_on_identical_generations() -> None:
    from remnant.metrics.rouge import GenerationRecord, _scorer

    record = GenerationRecord("Q", "The person was born in a small town.", "the persons were born in towns")
    a, b = rouge_fields(_scorer(), record), rouge_fields(_scorer(), record)
    assert a == b
    # LCS the, person(s), born, in, town(s) after stemming, over 8 reference tokens
    assert a["rougeL_recall"] == pytest.approx(5 / 8)
