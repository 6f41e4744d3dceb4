"""The keywords a model's ``forward`` takes for a key/value cache and for keeping only the last logits, and the cache
a forward returned, under either of transformers' namings (``past_key_values`` → ``cache`` in 5.2x,
``num_logits_to_keep`` → ``logits_to_keep`` before): every incremental or prefix-sharing forward asks here."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import torch

from remnant.errors import ModelError

if TYPE_CHECKING:
    from transformers import Cache, PreTrainedModel


def logits_keep_kwarg(model: PreTrainedModel) -> str | None:
    """The forward keyword that limits the output head to the last positions, or None when there is none."""
    params = inspect.signature(model.forward).parameters
    return next((name for name in ("logits_to_keep", "num_logits_to_keep") if name in params), None)


def unwrapped(model: Any) -> Any:
    """The model a peft wrapper forwards to (its base model), or ``model`` itself when it wraps nothing."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def keeps_logits_by_mask(model: object) -> bool:
    """Whether ``model``'s forward takes ``logits_to_keep`` and reads a boolean ``[B, T]`` tensor there as the
    positions whose logits to compute, flattened row-major (transformers' ``slice_logits_to_keep``: every causal LM
    of the pinned 5.24). A peft wrapper passes the keyword on to the model it wraps, which is the one asked."""
    base = unwrapped(model)
    try:
        takes = logits_keep_kwarg(base) == "logits_to_keep"
    except (TypeError, ValueError):  # a forward inspect cannot read
        return False
    return takes and hasattr(inspect.getmodule(type(base)), "slice_logits_to_keep")


def answer_logits(
    model: PreTrainedModel, batch: dict[str, torch.Tensor], *, full: bool = False, **forward: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """The fp32 logits ``[N, V]`` at the N positions whose next token is an answer token, row-major, and where they are
    (``[B, T-1]``, True at t when ``labels[:, t + 1]`` is an answer token): what the training losses and κ's
    teacher-forced reading (R6) read. Where :func:`keeps_logits_by_mask`, only those rows go through the output head
    (same logits, at the answer tokens' cost); ``full=True`` computes every position, the equivalence tests' reference.
    ``forward`` goes on to the model (a prefix's cache and the positions after it)."""
    at = batch["labels"][:, 1:] != -100
    keep = torch.zeros(batch["labels"].shape, dtype=torch.bool, device=at.device)
    keep[:, :-1] = at
    ids, mask = batch["input_ids"], batch["attention_mask"]
    if not full and keeps_logits_by_mask(model):
        logits: torch.Tensor = model(
            input_ids=ids, attention_mask=mask, logits_to_keep=keep.to(ids.device), **forward
        ).logits
        if logits.shape[0] != int(at.sum()):
            raise ModelError(
                f"expected {int(at.sum())} answer-position logits, the model returned {logits.shape[0]}"
            )
        return logits.float(), at
    every: torch.Tensor = model(input_ids=ids, attention_mask=mask, **forward).logits
    return every[keep.to(every.device)].float(), at


def keep_last_logits(model: PreTrainedModel, n: int = 1) -> dict[str, int]:
    """Forward keywords that compute the output head on the last ``n`` positions only ({} when the model cannot)."""
    name = logits_keep_kwarg(model)
    return {name: n} if name is not None else {}


def cache_kwarg(model: PreTrainedModel) -> str | None:
    """The forward keyword for a key/value cache (``cache`` from transformers 5.2x, ``past_key_values`` before),
    or None when the forward cannot take a cache at given positions (a prefix-sharing path is then off)."""
    params = inspect.signature(model.forward).parameters
    if "position_ids" not in params:
        return None
    return next((name for name in ("cache", "past_key_values") if name in params), None)


def output_cache(output: object) -> Cache | None:
    """The key/value cache a forward returned under either naming (None when it returned none)."""
    cache: Cache | None = getattr(output, "cache", None)
    return cache if cache is not None else getattr(output, "past_key_values", None)


__all__ = [
    "answer_logits",
    "cache_kwarg",
    "keep_last_logits",
    "keeps_logits_by_mask",
    "logits_keep_kwarg",
    "output_cache",
    "unwrapped",
]
