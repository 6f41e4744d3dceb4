"""NAIVE reference implementations of OpenUnlearning's MUSE data path, one item at a time, for the tests.

Written from the semantics of their code at d3d7cf9 (locuslab/open-unlearning): src/data/utils.py
``preprocess_chat_instance`` with in-context examples and ``predict_with_generate`` (input ids = the prompt, labels =
the whole conversation), ``preprocess_pretraining_instance`` (labels from the prefix's length, at least 1, no EOS),
src/evals/metrics/utils.py ``eval_text_similarity`` (ground truth = decoded labels with the decoded input removed,
generations cut at the decoded EOS and then at each stop string). Generation here runs one prompt without padding
and without stopping criteria, and cuts afterwards: their stopping criteria only end a generation early, after the
cut point.
"""

from __future__ import annotations

from typing import Any

import torch
from ou_naive import IGNORE, _ids

from remnant.metrics.text import clean_up_spaces


def ou_icl_instance(
    tokenizer: Any, template: dict[str, Any], questions: list[str], answers: list[str], max_length: int = 512
) -> tuple[list[int], list[int]]:
    """(prompt ids, full conversation ids) of one few-shot item; all pairs but the last are in-context examples."""
    if template["apply_chat_template"]:
        chat = []
        if template.get("system_prompt"):
            chat.append({"role": "system", "content": template["system_prompt"]})
        for q, a in zip(questions, answers, strict=True):
            chat += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        chat_ids = _ids(tokenizer.apply_chat_template(chat, tokenize=True, add_generation_prompt=False))
        prompt_ids = _ids(tokenizer.apply_chat_template(chat[:-1], tokenize=True, add_generation_prompt=True))
    else:
        wrapped = ""
        for q, a in zip(questions[:-1], answers[:-1], strict=True):
            wrapped += "Question: " + q + "\n" + "Answer: " + a + "\n\n"
        wrapped += "Question: " + questions[-1] + "\n" + "Answer: "
        kw = {"add_special_tokens": True, "max_length": max_length, "truncation": True}
        chat_ids = list(tokenizer(wrapped + answers[-1], **kw)["input_ids"])
        prompt_ids = list(tokenizer(wrapped, **kw)["input_ids"])
    if chat_ids[-1] != tokenizer.eos_token_id:
        chat_ids += [tokenizer.eos_token_id]
    return prompt_ids, chat_ids


def ou_completion(
    tokenizer: Any, prefix: str, text: str, *, max_length: int = 2048, insert_space: bool = False
) -> tuple[list[int], list[int], list[int]]:
    """(full ids, labels, generation input ids) of preprocess_pretraining_instance."""
    full = list(
        tokenizer(prefix + (" " if insert_space else "") + text, add_special_tokens=True)["input_ids"]
    )
    prefix_ids = list(tokenizer(prefix, add_special_tokens=True)["input_ids"])
    full = full[: len(prefix_ids) + max_length]
    matched = max(len(prefix_ids), 1)
    labels = [IGNORE] * matched + full[matched:]
    return full, labels, prefix_ids


def _decode(tokenizer: Any, ids: list[int]) -> str:
    """batch_decode(skip_special_tokens=True, clean_up_tokenization_spaces=True) as transformers 4.45 did it."""
    return clean_up_spaces(
        tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
    )


def ou_ground_truth(tokenizer: Any, input_ids: list[int], labels: list[int]) -> tuple[str, str]:
    """(input text, ground truth) of eval_text_similarity for one item."""
    input_text = _decode(tokenizer, input_ids)
    full_text = _decode(tokenizer, [t for t in labels if t != IGNORE])
    return input_text, full_text.replace(input_text, "").strip()


def ou_generation(
    model: Any, tokenizer: Any, input_ids: list[int], max_new: int, stopwords: list[str]
) -> str:
    """Greedy generation of one prompt, decoded, cut at the decoded EOS and each stop string in order, stripped."""
    with torch.no_grad():
        out = model.generate(
            torch.tensor([input_ids]),
            attention_mask=torch.ones(1, len(input_ids), dtype=torch.long),
            do_sample=False,
            max_new_tokens=max_new,
            pad_token_id=tokenizer.eos_token_id,
        )
    text = _decode(tokenizer, out[0, len(input_ids) :].tolist())
    for word in [tokenizer.decode([tokenizer.eos_token_id]), *stopwords]:
        if word and word in text:
            text = text.split(word)[0]
    return str(text.strip())
