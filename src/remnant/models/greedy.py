"""Greedy decoding that drops finished rows from the batch: every greedy generation of remnant (the ROUGE metrics',
and the κ generations of R6 every attack and capability reading scores; docs/metrics.md, "One pass, shared").

``model.generate`` keeps every row until the batch's last one ends. This loop makes ``generate``'s greedy choices
from the same inputs (left padding, position ids from the mask, the head on the last position, float32 argmax)
and drops a row and its cache once it has produced an end token or a stop string: the same texts, the number of
rows in each product aside, which can flip an exact near-tie as another batch size does in ``generate``.

Once few rows are left a step costs reading the weights, so each step also feeds up to :data:`MAX_DRAFT` tokens
guessed by "prompt lookup" (:func:`draft`) and keeps those the model's own greedy choices agree with: exact greedy
decoding in fewer steps; rejected positions stay in the cache as masked holes. A prefix all prompts share runs
once (:func:`_prompt_pass`). :func:`greedy_new_ids` falls back to ``generate`` unless
:func:`pruned_decoding_applies` (nothing in the generation config changes greedy scores)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from remnant.models.device import model_device
from remnant.models.forward_keywords import cache_kwarg, keep_last_logits, output_cache
from remnant.models.prompts import padded

if TYPE_CHECKING:
    from transformers import PreTrainedModel

#: Generation-config fields that do not change greedy scores (ids, lengths, sampling knobs that greedy ignores,
#: bookkeeping). Any other field that differs from transformers' default sends the caller to ``generate``.
_NEUTRAL_FIELDS = frozenset(
    {
        "bos_token_id",
        "eos_token_id",
        "pad_token_id",
        "decoder_start_token_id",
        "max_length",
        "max_new_tokens",
        "do_sample",
        "temperature",
        "top_k",
        "top_p",
        "min_p",
        "typical_p",
        "use_cache",
        "output_attentions",
        "output_hidden_states",
        "output_scores",
        "output_logits",
        "return_dict_in_generate",
        "transformers_version",
        "_from_model_config",
        "cache_implementation",
    }
)


def pruned_decoding_applies(model: PreTrainedModel) -> bool:
    """True when :func:`greedy_pruned` gives ``generate``'s greedy tokens for this model (module docstring)."""
    from transformers import GenerationConfig

    if cache_kwarg(model) is None or getattr(model.config, "is_encoder_decoder", False):
        return False
    config = getattr(model, "generation_config", None)
    if config is None:
        return True
    default = GenerationConfig().to_dict()  # type: ignore[no-untyped-call]
    ours = config.to_dict()
    return all(key in _NEUTRAL_FIELDS or default.get(key) == value for key, value in ours.items())


def eos_ids(model: PreTrainedModel, fallback: int | None) -> frozenset[int]:
    """The ids that end a row: the generation config's, as ``generate`` reads them, else ``fallback`` (None: no
    id ends a row, as in ``generate`` without one)."""
    config = getattr(model, "generation_config", None)
    eos = getattr(config, "eos_token_id", None) if config is not None else None
    if eos is None:
        return frozenset() if fallback is None else frozenset({fallback})
    return frozenset(int(e) for e in eos) if isinstance(eos, list | tuple) else frozenset({int(eos)})


#: Drafted positions are added only while a step holds at most this many token rows (live rows × positions fed).
#: Below it a step's cost is mostly reading the weights, not the products, so the extra positions are nearly free;
#: RESULTS.md's evaluation notes give the generation phase's time with drafting (benchmarks/bench_eval.py).
DRAFT_ROWS = 16
#: At most this many drafted tokens per row and step, and the longest n-gram looked up.
MAX_DRAFT = 10
MAX_NGRAM = 3


def draft(context: Sequence[int], k: int) -> list[int]:
    """Up to ``k`` tokens guessed by "prompt lookup": what followed the latest earlier occurrence of the context's
    last n tokens (n = 3, 2, 1), copied on through the guess itself, so a loop of any period is drafted whole."""
    for n in range(min(MAX_NGRAM, len(context) - 1), 0, -1):
        tail = list(context[-n:])
        for i in range(len(context) - n - 1, -1, -1):
            if list(context[i : i + n]) == tail:
                grown = list(context)
                for j in range(k):  # i + n + j < len(grown): the source runs ahead of the end
                    grown.append(grown[i + n + j])
                return grown[len(context) :]
    return []


def _accepted(greedy: list[int], drafted: list[int]) -> list[int]:
    """The greedy tokens a step produced: the first, then one more for each leading draft the model agreed with."""
    m = 0
    while m < len(drafted) and drafted[m] == greedy[m]:
        m += 1
    return greedy[: m + 1]


def _ended(
    new: list[int],
    tokens: list[int],
    eos: frozenset[int],
    stop: Callable[[list[int]], bool] | None,
    limit: int,
) -> bool:
    """Append ``tokens`` to ``new`` one at a time as generate would, True once the row has ended."""
    for token in tokens:
        new.append(token)
        if token in eos or (stop is not None and stop(new)) or len(new) >= limit:
            return True
    return False


#: A prefix every prompt of a batch starts with (a chat template's system turn, an attack's shared preamble) runs
#: once and its keys and values are repeated to every row, when it is at least this many tokens long.
MIN_SHARED = 4


def shared_length(prompts: Sequence[Sequence[int]]) -> int:
    """How many tokens every prompt starts with, short of the shortest prompt's last (each row keeps one to feed)."""
    first, shortest = prompts[0], min(len(p) for p in prompts)
    n = 0
    while n < shortest - 1 and all(p[n] == first[n] for p in prompts):
        n += 1
    return n


def prefix_cache(model: PreTrainedModel, prefix: Sequence[int], rows: int, device: torch.device) -> Any:
    """The key/value cache of ``prefix`` run once and repeated to ``rows`` batch rows, or None when the model's
    cache cannot be repeated per row (its callers then run every row whole)."""
    ids = torch.tensor([list(prefix)], dtype=torch.long, device=device)
    cache: Any = output_cache(model(input_ids=ids, use_cache=True, **keep_last_logits(model)))
    if not hasattr(cache, "batch_repeat_interleave"):
        return None
    cache.batch_repeat_interleave(rows)
    return cache


def _prompt_pass(
    model: PreTrainedModel,
    prompts: Sequence[Sequence[int]],
    cache_name: str,
    device: torch.device,
    min_shared: int,
) -> tuple[Any, torch.Tensor, torch.Tensor]:
    """The prompts' forward output (cache, last logits), the attention mask the cache holds, and each row's position
    ids. A shared prefix of ``min_shared`` tokens or more runs once, its cache repeated to every row, and the rest of
    each prompt follows it left-padded (a masked hole between the two; positions go on from the prefix)."""
    keep = keep_last_logits(model)
    shared = shared_length(prompts) if len(prompts) > 1 else 0
    shared = shared if shared >= min_shared else 0
    cache = prefix_cache(model, prompts[0][:shared], len(prompts), device) if shared else None
    if cache is None:  # no shared prefix, or a cache that cannot be repeated per row: the prompts run whole
        shared = 0
    ids, mask = padded([p[shared:] for p in prompts], 0)  # the filler is masked
    ids, mask = ids.to(device), mask.to(device)
    positions = shared + (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)
    mask = torch.cat([mask.new_ones(mask.shape[0], shared), mask], dim=1)
    past = {cache_name: cache} if cache is not None else {}
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, **past, **keep)
    return out, mask, positions


def _fed(pending: list[int], drafts: list[list[int]], device: torch.device) -> torch.Tensor:
    """(rows, 1 + longest draft) input ids: each row's pending token, its draft, then filler (masked later)."""
    width = 1 + max(len(d) for d in drafts)
    fed = [[p, *d, *([p] * (width - 1 - len(d)))] for p, d in zip(pending, drafts, strict=True)]
    return torch.tensor(fed, dtype=torch.long, device=device)


def greedy_pruned(
    model: PreTrainedModel,
    ids: torch.Tensor,
    mask: torch.Tensor,
    *,
    max_new_tokens: int,
    eos_token_id: int | None,
    stop: Callable[[list[int]], bool] | None = None,
    max_draft: int = MAX_DRAFT,
    min_shared: int = MIN_SHARED,
) -> list[list[int]] | None:
    """Each row's new tokens (its end-of-sequence token included when it produced one) for left-padded ``ids``; None
    when the model's cache cannot drop rows (the caller then uses ``generate``). ``stop`` is asked after each new
    token with the row's new tokens so far, as a stopping criterion. ``max_draft`` 0 turns drafting off, a
    ``min_shared`` longer than every prompt the shared-prefix pass."""
    cache_name = cache_kwarg(model)
    if cache_name is None:
        raise ValueError("this model's forward takes no position ids or cache: use generate")
    eos = eos_ids(model, eos_token_id)
    device = model_device(model)
    prompts = [row[m.bool()].tolist() for row, m in zip(ids.cpu(), mask.cpu(), strict=True)]
    rows = list(range(ids.shape[0]))  # the original row of each live batch row
    new: list[list[int]] = [[] for _ in rows]
    drafts: list[list[int]] = [[] for _ in rows]
    with torch.inference_mode():
        out, mask, positions = _prompt_pass(model, prompts, cache_name, device, min_shared)
        cache: Any = output_cache(out)
        if not hasattr(cache, "batch_select_indices"):  # a cache whose rows cannot be dropped
            return None
        last, logits, width = positions[:, -1:], out.logits, 0  # width: positions fed (0: the prompt's pass)
        while True:
            greedy = logits.to(dtype=torch.float32).argmax(dim=-1).tolist()
            made = [_accepted(g, d) for g, d in zip(greedy, drafts, strict=True)]
            # after a fed step, the pending token and the accepted drafts are cached; the rest of what was fed is a hole
            if width:
                for b, tokens in enumerate(made):
                    mask[b, mask.shape[1] - width + len(tokens) :] = 0
                last = last + torch.tensor([[len(t)] for t in made], dtype=torch.long, device=device)
            live = [
                b
                for b, tokens in enumerate(made)
                if not _ended(new[rows[b]], tokens, eos, stop, max_new_tokens)
            ]
            if not live:
                break
            if len(live) < len(rows):
                index = torch.tensor(live, dtype=torch.long, device=device)
                cache.batch_select_indices(index)
                mask, last = mask[index], last[index]
                rows = [rows[b] for b in live]
            k = min(max_draft, DRAFT_ROWS // len(rows) - 1)
            drafts = [draft(prompts[r] + new[r], k) if k > 0 else [] for r in rows]
            fed = _fed([new[r][-1] for r in rows], drafts, device)
            mask = torch.cat([mask, mask.new_ones(fed.shape)], dim=1)
            keep = keep_last_logits(model) if fed.shape[1] == 1 else {}
            out = model(
                input_ids=fed,
                attention_mask=mask,
                position_ids=last + 1 + torch.arange(fed.shape[1], device=device),
                use_cache=True,
                **{cache_name: cache},
                **keep,
            )
            logits, width = out.logits, fed.shape[1]
    return new


def greedy_new_ids(
    model: Any,  # the stubs' PreTrainedModel has no generate (GenerationMixin's, mixed in at load)
    prompts: Sequence[Sequence[int]],
    *,
    pad_id: int,
    max_new_tokens: int,
    eos_token_id: int | None,
    stop: Callable[[list[int]], bool] | None = None,
    generate_options: Mapping[str, Any] | None = None,
) -> list[list[int]]:
    """Each prompt's greedy new-token ids, in order, for one batch left-padded with ``pad_id``: every batched greedy
    generation of remnant (κ's, R6, and the ROUGE metrics') comes through here. :func:`greedy_pruned` with
    ``eos_token_id`` and ``stop`` where it applies; otherwise ``model.generate(do_sample=False)`` with the caller's
    ``generate_options``, which must end rows as those do. Rows are not cut after an end token."""
    ids, mask = padded(prompts, pad_id)  # left, as generate takes a batch
    rows = None
    if pruned_decoding_applies(model):
        rows = greedy_pruned(
            model, ids, mask, max_new_tokens=max_new_tokens, eos_token_id=eos_token_id, stop=stop
        )
    if rows is not None:
        return rows
    device = model_device(model)
    with torch.inference_mode():
        out = model.generate(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            **(generate_options or {}),
        )
    new: list[list[int]] = out[:, ids.shape[1] :].tolist()
    return new


__all__ = [
    "draft",
    "eos_ids",
    "greedy_new_ids",
    "greedy_pruned",
    "pruned_decoding_applies",
    "shared_length",
]
