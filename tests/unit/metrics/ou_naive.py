"""NAIVE reference implementations of OpenUnlearning's metric definitions, for the tests to compare against.

One sequence at a time, no batching, no padding, written straight from the semantics of their code
(locuslab/open-unlearning src/data/utils.py ``preprocess_chat_instance``, src/evals/metrics/utils.py
``evaluate_probability`` / ``tokenwise_(vocab_)logprobs``, memorization.py, mia/*.py, privacy.py): labels with
-100 on the prompt, shifted cross-entropy summed over labels and divided by the count of labels, the
``[:-1]``-dropped label positions of the token-wise functions, the ES loop as they wrote it. Everything in float32
from the model's full logits, so any divergence of the fast path (batching, dtype, logits_to_keep, dedup) shows.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import torch

IGNORE = -100


def _ids(out: Any) -> list[int]:
    """apply_chat_template(tokenize=True) returns a list in transformers 4.45, a BatchEncoding in 5."""
    return list(out["input_ids"]) if not isinstance(out, list) else list(out)


def ou_instance(
    tokenizer: Any, template: dict[str, Any], question: str, answer: str
) -> tuple[list[int], list[int]]:
    """(input_ids, labels) of one pair, as their preprocess_chat_instance builds them (no few-shot)."""
    if template["apply_chat_template"]:
        chat = []
        if template.get("system_prompt"):
            chat.append({"role": "system", "content": template["system_prompt"]})
        chat += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
        chat_ids = _ids(tokenizer.apply_chat_template(chat, tokenize=True, add_generation_prompt=False))
        prompt_ids = _ids(tokenizer.apply_chat_template(chat[:-1], tokenize=True, add_generation_prompt=True))
    else:
        wrapped = (
            template["user_start_tag"] + question + template["user_end_tag"] + template["asst_start_tag"]
        )
        chat_ids = tokenizer(wrapped + answer, add_special_tokens=True, max_length=512, truncation=True)[
            "input_ids"
        ]
        prompt_ids = tokenizer(wrapped, add_special_tokens=True, max_length=512, truncation=True)["input_ids"]
        chat_ids, prompt_ids = list(chat_ids), list(prompt_ids)
    if chat_ids[-1] != tokenizer.eos_token_id:
        chat_ids += [tokenizer.eos_token_id]
    labels = [IGNORE] * len(prompt_ids) + chat_ids[len(prompt_ids) :]
    return chat_ids, labels


def ou_generation_prompt(tokenizer: Any, template: dict[str, Any], question: str) -> list[int]:
    """The input_ids of their predict_with_generate path: the prompt only (chat setting)."""
    chat = []
    if template.get("system_prompt"):
        chat.append({"role": "system", "content": template["system_prompt"]})
    chat.append({"role": "user", "content": question})
    return _ids(tokenizer.apply_chat_template(chat, tokenize=True, add_generation_prompt=True))


def _logits(model: Any, input_ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        logits: torch.Tensor = model(input_ids=torch.tensor([input_ids])).logits[0].float()
    return logits


def ou_probability(model: Any, input_ids: list[int], labels: list[int]) -> tuple[float, float]:
    """(prob, avg_loss) of evaluate_probability for one sequence."""
    logits = _logits(model, input_ids)
    lab = torch.tensor(labels)
    losses = torch.nn.functional.cross_entropy(
        logits[:-1], lab[1:], ignore_index=IGNORE, reduction="none"
    ).sum()
    avg = losses / (lab != IGNORE).sum()
    return float(torch.exp(-avg)), float(avg)


def ou_tokenwise(model: Any, input_ids: list[int], labels: list[int]) -> tuple[Any, Any, Any]:
    """(target log-probs, vocab log-probs, kept labels) of tokenwise_(vocab_)logprobs for one sequence."""
    log_probs = torch.log_softmax(_logits(model, input_ids), dim=-1)[:-1]
    nxt = torch.tensor(input_ids)[1:]
    target = log_probs.gather(1, nxt[:, None])[:, 0]
    lab = torch.tensor(labels)
    actual = (lab != IGNORE).nonzero(as_tuple=True)[0][:-1]
    if actual.numel() == 0:
        return torch.tensor([]), torch.zeros(0, log_probs.shape[-1]), torch.tensor([], dtype=torch.long)
    start, end = int(actual[0]), int(actual[-1])
    return target[start - 1 : end], log_probs[start - 1 : end], lab[actual]


def ou_extraction_strength(vocab_lp: Any, labels: Any) -> float:
    valid_len = len(labels)
    preds = torch.argmax(vocab_lp, dim=-1)
    k = 0
    for k in range(valid_len):  # noqa: B007  (their loop variable is the result)
        if torch.equal(preds[k:], labels[k:]):
            break
    if valid_len == 0:
        return 0.0
    return 1 - (k / valid_len)


def ou_exact_memorization(vocab_lp: Any, labels: Any) -> float | None:
    if len(labels) == 0:
        return None
    return float((torch.argmax(vocab_lp, dim=-1) == labels).sum() / len(labels))


def ou_min_k(lp: Any, k: float = 0.4) -> float:
    values = lp.float().cpu().numpy()
    if values.size == 0:
        return 0.0
    num_k = max(1, int(len(values) * k))
    return float(-np.mean(np.sort(values)[:num_k]))


def ou_min_k_plus_plus(vocab_lp: Any, lp: Any, k: float = 0.4) -> float:
    if len(lp) == 0:
        return 0.0
    vocab_lp = vocab_lp.double()  # their formula, in float64 so its cancellation does not blur the reference
    mu = (torch.exp(vocab_lp) * vocab_lp).sum(-1)
    sigma = (torch.exp(vocab_lp) * torch.square(vocab_lp)).sum(-1) - torch.square(mu)
    sigma = torch.clamp(sigma, min=1e-6)
    scores = (lp.float().numpy() - mu.float().numpy()) / torch.sqrt(sigma).numpy()
    num_k = max(1, int(len(scores) * k))
    return float(-np.mean(sorted(scores)[:num_k]))


def ou_zlib(avg_loss: float, tokenizer: Any, labels: list[int]) -> float:
    text = tokenizer.decode([t for t in labels if t != IGNORE], skip_special_tokens=True)
    return avg_loss / len(zlib.compress(text.encode("utf-8")))


def ou_gradnorm(model: Any, input_ids: list[int], labels: list[int], p: float = 2) -> float:
    """Their GradNormAttack for one sample (model left in eval mode: the tiny models have no dropout anyway)."""
    log_probs = torch.log_softmax(model(input_ids=torch.tensor([input_ids])).logits[0].float(), dim=-1)[:-1]
    target = log_probs.gather(1, torch.tensor(input_ids)[1:, None])[:, 0]
    lab = torch.tensor(labels)
    actual = (lab != IGNORE).nonzero(as_tuple=True)[0][:-1]
    lps = target[int(actual[0]) - 1 : int(actual[-1])]
    model.zero_grad()
    (-torch.mean(lps)).backward()  # type: ignore[no-untyped-call]
    norms = [prm.grad.detach().norm(p=p) for prm in model.parameters() if prm.grad is not None]
    value = float(torch.stack(norms).mean())
    model.zero_grad(set_to_none=True)
    return value


def ou_truth_ratio(
    correct_losses: list[float], wrong_losses: list[list[float]], aggregator: str
) -> tuple[Any, float]:
    """(per-item ratios, aggregate) of their truth_ratio from per-item avg losses."""
    c = np.exp(-np.array(correct_losses))
    w = np.exp(-np.mean(np.array(wrong_losses), axis=1))
    tr = c / (c + w + 1e-10) if aggregator == "prob_mean" else w / (c + 1e-10)
    if aggregator == "closer_to_1_better":
        agg = np.mean(np.minimum(tr, 1 / (tr + 1e-10)))
    elif aggregator == "true_better":
        agg = np.mean(np.maximum(0, 1 - tr))
    else:
        agg = np.mean(tr)
    return tr, float(agg)


def pairwise_auc(forget: list[float], holdout: list[float]) -> float:
    """P(holdout score > forget score) + ½ P(tie), by counting every pair."""
    wins = sum((h > f) + 0.5 * (h == f) for f in forget for h in holdout)
    return wins / (len(forget) * len(holdout))
