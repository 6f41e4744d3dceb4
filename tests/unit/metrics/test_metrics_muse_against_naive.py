"""Every MUSE metric of one ``evaluate`` run on the tiny model against a NAIVE one-item-at-a-time implementation of
OpenUnlearning's definitions (ou_naive.py, ou_naive_muse.py), to 1e-5; ROUGE identical on identical generations.

Their MUSE configs (configs/eval/muse_metrics/*.yaml, configs/data/datasets/MUSE_*.yaml at d3d7cf9): knowmem asked
after every in-context example, 32 new tokens, stop strings, ROUGE-L F1; verbmem as a completion (``insert_space``)
with 128 new tokens; ES and EM on verbmem; the attacks on privleak forget vs holdout with an empty prefix.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from muse_data import MUSE
from ou_naive import (
    ou_exact_memorization,
    ou_extraction_strength,
    ou_gradnorm,
    ou_min_k,
    ou_min_k_plus_plus,
    ou_probability,
    ou_tokenwise,
    ou_zlib,
    pairwise_auc,
)
from ou_naive_muse import ou_completion, ou_generation, ou_ground_truth, ou_icl_instance

from remnant.metrics.catalogue import DEFAULT_MUSE, MUSE_METRICS, MUSE_STOPWORDS
from remnant.metrics.encoding import OpenUnlearningPrompt
from remnant.metrics.evaluate import EvalResult, EvalSettings, evaluate, required_splits

RAW = {"apply_chat_template": False}  # their MUSE model config (Llama-2-7b-hf): raw Question/Answer tags
CHAT = {"apply_chat_template": True, "system_prompt": "You are a helpful assistant."}
ATTACKS = ["mia_loss", "mia_zlib", "mia_min_k", "mia_min_k_plus_plus", "mia_gradnorm", "mia_reference"]
SETTINGS = EvalSettings(suite="muse", batch_size=3)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from fixtures_models import build_tiny_model  # type: ignore[import-not-found]
    from remnant.models.load import load_model

    return load_model(build_tiny_model("llama", tmp_path_factory.mktemp("ref") / "model", seed=1))


@pytest.fixture(scope="module")
def rows(tiny_llama: Any) -> dict[str, list[dict[str, Any]]]:
    """MUSE's rows, plus one verbmem passage whose true continuation is the model's own greedy one (memorised)."""
    tok = tiny_llama.tokenizer
    prompt = "Vessiburg harbour council minutes, day 9:"
    prefix_ids = list(tok(prompt, add_special_tokens=True)["input_ids"])
    own = ou_generation(tiny_llama.model, tok, prefix_ids, 128, [])
    assert own
    return {**MUSE, "verbmem/forget": [*MUSE["verbmem/forget"], {"prompt": prompt, "gt": own}]}


@pytest.fixture(scope="module")
def result(tiny_llama: Any, reference: Any, rows: dict[str, list[dict[str, Any]]]) -> EvalResult:
    return evaluate(
        tiny_llama,
        rows.__getitem__,
        list(MUSE_METRICS),
        prompt=OpenUnlearningPrompt(apply_chat_template=False, system_prompt=None),
        settings=SETTINGS,
        reference=reference,
    )


def _by_index(result: EvalResult, name: str, field: str) -> list[Any]:
    vbi = result.logs[name].value_by_index
    assert vbi is not None
    return [vbi[str(i)][field] for i in range(len(vbi))]


def test_the_default_suite_and_the_splits_it_reads() -> None:
    assert DEFAULT_MUSE == (
        "forget_knowmem_ROUGE",
        "retain_knowmem_ROUGE",
        "forget_verbmem_ROUGE",
        "privleak",
        "extraction_strength",
    )
    assert required_splits(list(DEFAULT_MUSE), SETTINGS) == [
        "knowmem/forget_qa",
        "knowmem/forget_qa_icl",
        "knowmem/retain_qa",
        "knowmem/retain_qa_icl",
        "privleak/forget",
        "privleak/holdout",
        "verbmem/forget",
    ]


def _naive_rouge(scorer: Any, gt: str, gen: str) -> dict[str, float]:
    s = scorer.score(gt, gen)
    return {
        "rouge1_recall": s["rouge1"].recall,
        "rougeL_f1": s["rougeL"].fmeasure,
        "rougeL_recall": s["rougeL"].recall,
    }


def _check_rouge(result: EvalResult, name: str, naive: list[tuple[str, str, str]]) -> None:
    """Our entry holds exactly the naive input, ground truth, generation and ROUGE fields; agg = mean F1."""
    from rouge_score import rouge_scorer  # type: ignore[import-untyped]

    scorer = rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=True)
    entry = result.logs[name]
    assert entry.value_by_index is not None and len(entry.value_by_index) == len(naive)
    f1: list[float] = []
    for i, (text, truth, gen) in enumerate(naive):
        scores = _naive_rouge(scorer, truth, gen)
        expected = {**scores, "input": text, "ground_truth": truth, "generation": gen}
        assert dict(entry.value_by_index[str(i)]) == expected
        f1.append(scores["rougeL_f1"])
    assert entry.agg_value == pytest.approx(float(np.mean(f1)), abs=1e-12)


@pytest.mark.parametrize(
    ("name", "split"), [("forget_knowmem_ROUGE", "forget_qa"), ("retain_knowmem_ROUGE", "retain_qa")]
)
def test_knowmem_rouge_with_in_context_examples(
    tiny_llama: Any, result: EvalResult, name: str, split: str
) -> None:
    model, tok = tiny_llama.model, tiny_llama.tokenizer
    shots = MUSE[f"knowmem/{split}_icl"]
    naive = []
    for row in MUSE[f"knowmem/{split}"]:
        prompt_ids, chat_ids = ou_icl_instance(
            tok,
            RAW,
            [s["question"] for s in shots] + [row["question"]],
            [s["answer"] for s in shots] + [row["answer"]],
        )
        text, truth = ou_ground_truth(tok, prompt_ids, chat_ids)
        naive.append((text, truth, ou_generation(model, tok, prompt_ids, 32, list(MUSE_STOPWORDS))))
    _check_rouge(result, name, naive)
    first = result.logs[name].value_by_index["0"]  # type: ignore[index]
    q0, a0 = shots[0]["question"], shots[0]["answer"]
    assert first["input"].startswith(f"Question: {q0}\nAnswer: {a0}\n\nQuestion: ")
    assert first["ground_truth"] == MUSE[f"knowmem/{split}"][0]["answer"]


def test_knowmem_rouge_under_a_chat_template(tiny_llama: Any) -> None:
    model, tok = tiny_llama.model, tiny_llama.tokenizer
    got = evaluate(
        tiny_llama,
        MUSE.__getitem__,
        ["forget_knowmem_ROUGE"],
        prompt=OpenUnlearningPrompt.for_tokenizer(tok),
        settings=SETTINGS,
    )
    shots = MUSE["knowmem/forget_qa_icl"]
    naive = []
    for row in MUSE["knowmem/forget_qa"]:
        prompt_ids, chat_ids = ou_icl_instance(
            tok,
            CHAT,
            [s["question"] for s in shots] + [row["question"]],
            [s["answer"] for s in shots] + [row["answer"]],
        )
        text, truth = ou_ground_truth(tok, prompt_ids, chat_ids)
        naive.append((text, truth, ou_generation(model, tok, prompt_ids, 32, list(MUSE_STOPWORDS))))
    _check_rouge(got, "forget_knowmem_ROUGE", naive)
    assert naive[0][0].count("\nassistant\n") == 3  # two in-context answers, then the generation prompt


def test_verbmem_rouge_completes_the_passage(
    tiny_llama: Any, result: EvalResult, rows: dict[str, list[dict[str, Any]]]
) -> None:
    model, tok = tiny_llama.model, tiny_llama.tokenizer
    naive = []
    for row in rows["verbmem/forget"]:
        _, labels, prefix_ids = ou_completion(tok, row["prompt"], row["gt"], insert_space=True)
        text, truth = ou_ground_truth(tok, prefix_ids, labels)
        naive.append((text, truth, ou_generation(model, tok, prefix_ids, 128, [])))
    _check_rouge(result, "forget_verbmem_ROUGE", naive)
    f1 = _by_index(result, "forget_verbmem_ROUGE", "rougeL_f1")
    assert f1[-1] > 0.9 > max(f1[:-1])  # the memorised passage scores near 1, the others do not


def test_extraction_strength_and_exact_memorization_on_verbmem(
    tiny_llama: Any, result: EvalResult, rows: dict[str, list[dict[str, Any]]]
) -> None:
    model, tok = tiny_llama.model, tiny_llama.tokenizer
    es, em = [], []
    for row in rows["verbmem/forget"]:
        ids, labels, _ = ou_completion(tok, row["prompt"], row["gt"], insert_space=True)
        _, vocab, kept = ou_tokenwise(model, ids, labels)
        # no EOS is appended to a completion, so dropping the last label drops the passage's last real token
        n_text = len(tok(row["prompt"] + " " + row["gt"])["input_ids"]) - len(tok(row["prompt"])["input_ids"])
        assert len(kept) == n_text - 1 and ids[-1] != tok.eos_token_id
        es.append(ou_extraction_strength(vocab, kept))
        em.append(ou_exact_memorization(vocab, kept))
    np.testing.assert_allclose(_by_index(result, "extraction_strength", "score"), es, atol=1e-12)
    assert None not in em
    np.testing.assert_allclose(
        _by_index(result, "exact_memorization", "score"), [float(x or 0) for x in em], atol=1e-12
    )
    assert result.logs["extraction_strength"].agg_value == pytest.approx(np.mean(es), abs=1e-12)


def _attack_naive(name: str, model: Any, ref: Any, tok: Any, text: str) -> float:
    ids, labels, _ = ou_completion(
        tok, "", text
    )  # MUSE_MIA: prefix_key "prompt" is absent from privleak rows
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


@pytest.mark.parametrize("name", ATTACKS)
def test_attacks_on_privleak_forget_and_holdout(
    tiny_llama: Any, reference: Any, result: EvalResult, name: str
) -> None:
    tok = tiny_llama.tokenizer
    entry = result.logs[name].to_json()
    sides = {}
    for side in ("forget", "holdout"):
        naive = [
            _attack_naive(name, tiny_llama.model, reference, tok, r["text"]) for r in MUSE[f"privleak/{side}"]
        ]
        got = [entry[side]["value_by_index"][str(i)]["score"] for i in range(len(naive))]
        np.testing.assert_allclose(got, naive, rtol=1e-5, atol=1e-6)
        sides[side] = naive
    assert (
        entry["auc"] == entry["agg_value"] == pytest.approx(pairwise_auc(sides["forget"], sides["holdout"]))
    )
    assert entry["forget"]["agg_value"] == pytest.approx(np.mean(sides["forget"]), rel=1e-5)


def test_the_empty_prefix_leaves_the_first_token_unlabelled(tiny_llama: Any) -> None:
    tok = tiny_llama.tokenizer
    text = MUSE["privleak/forget"][0]["text"]
    ids, labels, _ = ou_completion(tok, "", text)
    assert labels[0] == -100 and labels[1:] == ids[1:]  # the tiny tokenizer adds no BOS: position 0 is text


def test_privleak_reads_min_k_on_privleak(result: EvalResult) -> None:
    auc = result.logs["mia_min_k"].agg_value
    assert auc is not None
    assert result.logs["privleak"].agg_value == pytest.approx(((1 - auc) - 0.5) / (0.5 + 1e-10) * 100)
    assert result.sources["mia_min_k"]["holdout"] == {
        "split": "privleak/holdout",
        "encoding": "completion",
        "prefix_key": "prompt",
        "text_key": "text",
        "insert_space": False,
        "max_length": 2048,
    }


def test_generation_lengths_come_from_the_configs_unless_overridden(
    tiny_llama: Any, result: EvalResult
) -> None:
    short = evaluate(
        tiny_llama,
        MUSE.__getitem__,
        ["forget_verbmem_ROUGE"],
        prompt=OpenUnlearningPrompt(apply_chat_template=False, system_prompt=None),
        settings=EvalSettings(suite="muse", batch_size=3, max_new_tokens=2),
    )
    full = _by_index(result, "forget_verbmem_ROUGE", "generation")
    cut = _by_index(short, "forget_verbmem_ROUGE", "generation")
    assert all(f.startswith(c) for f, c in zip(full, cut, strict=False))  # greedy: 2 tokens prefix 128
    assert sum(map(len, cut)) < sum(map(len, full[: len(cut)]))
    assert short.specs["forget_verbmem_ROUGE"].params["max_new_tokens"] == 2  # the length used, R23
    assert result.specs["forget_knowmem_ROUGE"].params == {
        "rouge_type": "rougeL_f1",
        "max_new_tokens": 32,
        "stopwords": MUSE_STOPWORDS,
    }
