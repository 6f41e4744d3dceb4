"""Greedy decoding that drops finished rows from the batch (the ROUGE metrics' generations).

``model.generate`` keeps every row of a batch until the last one ends: a batch where one answer runs to the
200-token limit pays for all its rows at every step, though most ended after a few dozen tokens. This loop makes
the same greedy choices with the same inputs as ``generate`` (left padding, position ids from the attention mask,
the output head on the last position only, float32 argmax) and removes a row from the batch and its key/value
cache once it has produced an end-of-sequence token or a stop string. Each row's text is the same as
``generate``'s; the only difference is the number of rows in each matrix product, which can change float32
rounding, and so the argmax of an exact near-tie, as a different batch size does in ``generate`` itself.

:func:`pruned_decoding_applies` says when the loop may stand in for ``generate``: the model's generation config
asks for nothing that changes greedy scores (a repetition penalty, banned words, a minimum length …), and its
forward takes position ids and a cache with row selection. Otherwise the caller uses ``generate``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from remnant.models.forward_keywords import cache_kwarg, keep_last_logits, output_cache

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


def _eos_ids(model: PreTrainedModel, fallback: int) -> frozenset[int]:
    """The ids that end a row: the generation config's, as ``generate`` reads them, else the tokenizer's."""
    config = getattr(model, "generation_config", None)
    eos = getattr(config, "eos_token_id", None) if config is not None else None
    if eos is None:
        return frozenset({fallback})
    return frozenset(int(e) for e in eos) if isinstance(eos, list | tuple) else frozenset({int(eos)})


def greedy_pruned(
    model: PreTrainedModel,
    ids: torch.Tensor,
    mask: torch.Tensor,
    *,
    max_new_tokens: int,
    eos_token_id: int,
    stop: Callable[[list[int]], bool] | None = None,
) -> list[list[int]] | None:
    """Each row's new tokens (its end-of-sequence token included when it produced one) for left-padded ``ids``.

    ``stop`` is asked after each new token of a row with that row's new tokens so far; a True ends the row, as a
    stopping criterion does in ``generate``. None when the model's cache cannot drop rows (the caller then uses
    ``generate``).
    """
    cache_name = cache_kwarg(model)
    if cache_name is None:
        raise ValueError("this model's forward takes no position ids or cache: use generate")
    eos = _eos_ids(model, eos_token_id)
    device = next(model.parameters()).device
    keep = keep_last_logits(model)
    ids, mask = ids.to(device), mask.to(device)
    positions = (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 0)
    rows = list(range(ids.shape[0]))  # the original row of each live batch row
    new: list[list[int]] = [[] for _ in rows]
    with torch.inference_mode():
        out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, **keep)
        cache: Any = output_cache(out)
        if not hasattr(cache, "batch_select_indices"):  # a cache whose rows cannot be dropped
            return None
        last = positions[:, -1:]
        for _ in range(max_new_tokens):
            tokens = out.logits[:, -1].to(dtype=torch.float32).argmax(dim=-1)
            live = []
            for b, token in enumerate(tokens.tolist()):
                r = rows[b]
                new[r].append(int(token))
                if not (token in eos or (stop is not None and stop(new[r]))):
                    live.append(b)
            if not live or len(new[rows[live[0]]]) >= max_new_tokens:
                break
            if len(live) < len(rows):
                index = torch.tensor(live, dtype=torch.long, device=device)
                cache.batch_select_indices(index)
                tokens, mask, last = tokens[index], mask[index], last[index]
                rows = [rows[b] for b in live]
            mask = torch.cat([mask, mask.new_ones((len(rows), 1))], dim=1)
            last = last + 1
            out = model(
                input_ids=tokens[:, None],
                attention_mask=mask,
                position_ids=last,
                use_cache=True,
                **{cache_name: cache},
                **keep,
            )
    return new


__all__ = ["greedy_pruned", "pruned_decoding_applies"]
