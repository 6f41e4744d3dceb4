"""Greedy generations for the ROUGE metrics, read the way their ``eval_text_similarity`` reads them
(docs/metrics.md): ``do_sample=False``, ``pad_token_id`` = EOS, left padding with an explicit attention mask
(never derived from ``pad == eos``); prompts sorted by length before batching (greedy decoding is per row, so the
order changes no text beyond padding numerics). The new tokens are decoded (:mod:`remnant.metrics.text`), cut at
the decoded EOS and at every stop string, in that order, and stripped; a stop string also ends its row early."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from remnant.metrics.text import decode
from remnant.models.greedy import greedy_new_ids
from remnant.models.prompts import pad_id

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase, StoppingCriteriaList


def cut_generation(text: str, stops: Sequence[str]) -> str:
    """Their post-processing: for each stop string in order, keep what precedes its first occurrence; strip."""
    for word in stops:
        if word and word in text:
            text = text.split(word)[0]
    return text.strip()


def _stopping(stop: Callable[[list[int]], bool], start: int) -> StoppingCriteriaList:
    """``generate``'s form of the stop test ``stop`` (one test for both paths), over the tokens after ``start``."""
    from transformers import StoppingCriteria, StoppingCriteriaList

    class _StopStrings(StoppingCriteria):
        """A row is done once its decoded new text holds a stop string (the text is cut there anyway)."""

        def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: object) -> torch.Tensor:
            done = [stop(row.tolist()) for row in input_ids[:, start:]]
            return torch.tensor(done, dtype=torch.bool, device=input_ids.device)

    return StoppingCriteriaList([_StopStrings()])


def _stop_check(
    tokenizer: PreTrainedTokenizerBase, stopwords: Sequence[str]
) -> Callable[[list[int]], bool] | None:
    """True once a row's new tokens, decoded with special tokens kept, hold a stop string (None: no stop strings)."""
    if not stopwords:
        return None

    def stop(new: list[int]) -> bool:
        text = tokenizer.decode(new, skip_special_tokens=False)
        return any(w in text for w in stopwords)

    return stop


def _generate_batch(
    model: Any,  # the stubs' PreTrainedModel has no generate (GenerationMixin's, mixed in at load)
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[tuple[int, ...]],
    max_new_tokens: int,
    stopwords: Sequence[str],
) -> list[str]:
    eos = int(tokenizer.eos_token_id)
    options: dict[str, object] = {
        "top_p": None,
        "top_k": None,
        "temperature": None,
        "use_cache": True,
        "pad_token_id": eos,
    }
    stop = _stop_check(tokenizer, stopwords)
    if stop is not None:
        options["stopping_criteria"] = _stopping(stop, max(len(p) for p in prompts))
    rows = greedy_new_ids(
        model,
        prompts,
        pad_id=pad_id(tokenizer),
        max_new_tokens=max_new_tokens,
        eos_token_id=eos,
        stop=stop,
        generate_options=options,
    )
    stops = [decode(tokenizer, [eos], skip_special_tokens=False, clean_up=False), *stopwords]
    return [
        cut_generation(decode(tokenizer, row, skip_special_tokens=True, clean_up=True), stops) for row in rows
    ]


def greedy_generations(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[tuple[int, ...]],
    *,
    batch_size: int,
    max_new_tokens: int = 200,
    stopwords: Sequence[str] = (),
    progress: bool = False,
) -> list[str]:
    """The cut, stripped greedy continuation of each prompt, in input order."""
    from tqdm.auto import tqdm  # type: ignore[import-untyped]

    if batch_size < 1 or max_new_tokens < 1:
        raise ValueError("batch_size and max_new_tokens must be at least 1")
    order = sorted(range(len(prompts)), key=lambda i: -len(prompts[i]))
    texts: dict[int, str] = {}
    for start in tqdm(range(0, len(order), batch_size), desc="generating", disable=not progress, leave=False):
        chunk = order[start : start + batch_size]
        batch = _generate_batch(model, tokenizer, [prompts[i] for i in chunk], max_new_tokens, stopwords)
        texts.update(zip(chunk, batch, strict=True))
    return [texts[i] for i in range(len(prompts))]


__all__ = ["cut_generation", "greedy_generations"]
