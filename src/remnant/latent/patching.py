"""Block-output activation patching on entity spans: the naive algorithm and an exact fast path.

Naive (docs/latent.md): one unpatched forward of the target for ``s_full``; one forward of each source,
whose block outputs are captured with the same forward hooks used for patching (never ``hidden_states``, whose
last entry is after the final norm, §1.7); then one patched forward of the target per layer.

Fast path (§1.6 b, exact): patching never touches positions before ``eval_start`` and attention is causal, so
the target runs once on the prefix ``[0, eval_start)`` with a KV cache, and the window ``[eval_start, eval_end)``
is run once for every (source, layer) in one forward over that cache. Only the window is fed, because the logits
at ``eval_end - 1`` already predict the last entity token. A row patched at block l is the clean row below l, so it
joins the batch at l (:func:`fast_scores`): each block runs only the rows already patched below it.

``uds_compat=True`` reproduces the reference's source states: ``hidden_states[l + 1]``, whose last entry is the
post-final-norm state, so the last layer's patch applies the norm twice and source = target gives Δ ≠ 0 there.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from functools import partial
from typing import TYPE_CHECKING, cast

import torch

from remnant.errors import UnsupportedArchitecture
from remnant.latent.inputs import EncodedExample
from remnant.models.arch import resolve_parts
from remnant.models.forward_keywords import cache_kwarg, keep_last_logits, output_cache
from remnant.models.hooks import capture_blocks, patch_block

if TYPE_CHECKING:
    from transformers import Cache, PreTrainedModel
    from transformers.cache_utils import DynamicLayer

#: Per source, per layer: the source's block output on the window rows, shape [eval_end - eval_start, d].
SourceStates = Mapping[int, torch.Tensor]


def _ids(ex: EncodedExample, model: PreTrainedModel) -> torch.Tensor:
    # on the model's device: a model on a GPU cannot read ids from the CPU (R24: the run records that device)
    return torch.tensor([list(ex.input_ids)], dtype=torch.long, device=next(model.parameters()).device)


def mean_entity_logprob(logits: torch.Tensor, ex: EncodedExample, offset: int = 0) -> float:
    """Mean teacher-forced log-prob of the entity tokens; ``logits`` rows start at absolute position ``offset``."""
    rows = logits[ex.eval_start - offset : ex.eval_end - offset].float()
    target = torch.tensor(ex.targets, dtype=torch.long, device=rows.device)
    return float(torch.log_softmax(rows, dim=-1).gather(-1, target[:, None]).mean())


@torch.no_grad()
def source_states_many(
    source: PreTrainedModel,
    examples: Sequence[EncodedExample],
    layers: Sequence[int],
    *,
    uds_compat: bool = False,
    batch_size: int = 8,
) -> list[dict[int, torch.Tensor]]:
    """Block outputs of ``source`` at each example's window rows, from hooks (or compat hidden_states), for
    ``batch_size`` examples per forward. Each row's ids are right-padded, without a mask: in a causal model no
    position reads a later one, so the window rows are those of the example alone; nothing past ``eval_end`` is fed.
    """
    device = next(source.parameters()).device
    out: list[dict[int, torch.Tensor]] = []
    for start in range(0, len(examples), batch_size):
        group = examples[start : start + batch_size]
        ids = torch.zeros(len(group), max(ex.eval_end for ex in group), dtype=torch.long, device=device)
        for r, ex in enumerate(group):
            ids[r, : ex.eval_end] = torch.tensor(ex.input_ids[: ex.eval_end], dtype=torch.long)
        with capture_blocks(source, layers) as captured:
            source(input_ids=ids, **keep_last_logits(source))  # no logits are read
        if uds_compat:
            # The reference reads hidden_states[l + 1]: the block output, except the last entry, which is the final
            # norm of the last block's output (§1.7). Rebuilt from the hooks: output_hidden_states=True makes
            # transformers >= 5 install permanent capture hooks on every block of ``source``, which outlive the call.
            parts = resolve_parts(source)
            last = len(parts.blocks) - 1
            if last in captured:
                captured[last] = parts.final_norm(captured[last])
        out += [
            {layer: captured[layer][r, ex.eval_start : ex.eval_end].float() for layer in layers}
            for r, ex in enumerate(group)
        ]
    return out


def source_states(
    source: PreTrainedModel, ex: EncodedExample, layers: Sequence[int], *, uds_compat: bool = False
) -> dict[int, torch.Tensor]:
    """Block outputs of ``source`` on ``ex``'s window rows (:func:`source_states_many` of one example)."""
    return source_states_many(source, [ex], layers, uds_compat=uds_compat)[0]


@torch.no_grad()
def naive_scores(
    target: PreTrainedModel, ex: EncodedExample, sources: Sequence[SourceStates], layers: Sequence[int]
) -> tuple[float, list[list[float]]]:
    """``s_full`` and, per source and layer, the patched mean entity log-prob: one forward per patch."""
    ids = _ids(ex, target)
    s_full = mean_entity_logprob(target(input_ids=ids).logits[0], ex)
    positions = list(range(ex.eval_start, ex.eval_end))
    out: list[list[float]] = []
    for states in sources:
        row = []
        for layer in layers:
            full = torch.zeros(1, ids.shape[1], states[layer].shape[-1], device=ids.device)
            full[0, ex.eval_start : ex.eval_end] = states[layer]
            with patch_block(target, layer, full, positions=positions):
                row.append(mean_entity_logprob(target(input_ids=ids).logits[0], ex))
        out.append(row)
    return s_full, out


class PrefixMemo:
    """The target's prefix keys and values per example, kept for the next source patched into the same target
    (stage 2 over a pool repeats stage 1's prefixes). Bounded: past ``max_bytes`` a prefix is recomputed, not kept.
    Each ``get`` returns a copy, because a forward appends the window to the cache it is given."""

    def __init__(self, max_bytes: int = 256 * 2**20) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._kept: dict[tuple[int, ...], Cache] = {}
        self._target: weakref.ref[PreTrainedModel] | None = None

    def get(self, target: PreTrainedModel, ex: EncodedExample) -> Cache | None:
        if self._target is None or self._target() is not target:  # kept for another model: never read
            return None
        kept = self._kept.get(ex.input_ids[: ex.eval_start])
        return None if kept is None else copy.deepcopy(kept)

    def put(self, target: PreTrainedModel, ex: EncodedExample, cache: Cache) -> None:
        if self._target is None or self._target() is not target:
            self._kept, self.bytes, self._target = {}, 0, weakref.ref(target)
        size = sum(
            t.numel() * t.element_size()
            for layer in _kv_layers(cache) or ()
            for t in (layer.keys, layer.values)
            if t is not None
        )
        if self.bytes + size <= self.max_bytes:
            self._kept[ex.input_ids[: ex.eval_start]] = copy.deepcopy(cache)
            self.bytes += size


def _join(rows: torch.Tensor, hidden: torch.Tensor, *, replace: bool) -> torch.Tensor:
    """A block's output with ``rows`` appended to the batch (``replace``: the batch becomes ``rows``)."""
    new = rows.to(hidden.dtype)
    return new if replace else torch.cat([hidden, new], dim=0)


def _kv_layers(cache: Cache | None) -> list[DynamicLayer] | None:
    """The cache's per-block key/value layers, or None when it has another kind (a linear-attention layer's state
    cannot be repeated per row here)."""
    from transformers.cache_utils import DynamicLayer

    layers = [] if cache is None else list(cache.layers)
    return cast(list[DynamicLayer], layers) if all(isinstance(x, DynamicLayer) for x in layers) else None


def _grow_cache(layers: Sequence[DynamicLayer], rows_at: Sequence[int]) -> None:
    """Repeat each block's prefix keys and values to the number of rows that block will see."""
    for layer, n in zip(layers, rows_at, strict=True):
        layer.batch_repeat_interleave(n)


@torch.no_grad()
def fast_scores(
    target: PreTrainedModel,
    ex: EncodedExample,
    sources: Sequence[SourceStates],
    layers: Sequence[int],
    prefixes: PrefixMemo | None = None,
    *,
    clean: bool = True,
) -> tuple[float | None, list[list[float]]]:
    """Same values as :func:`naive_scores` from one prefix forward and one window forward whose batch grows.

    The window starts as one clean row. A row patched at block l equals the clean row below l, so it joins the
    batch at l: block l's hook appends one row per source holding that source's block-l state on the window (the
    patch covers the whole window). Block i therefore runs 1 + (sources × patched layers below i) rows instead of
    every row through every block, about half the work over all layers. The prefix keys and values of each block
    are repeated to that block's row count; masks and position embeddings are built for one row and broadcast.
    ``prefixes`` keeps the target's prefix keys and values between calls on the same target (a pool's sources).
    ``clean=False`` (stage 2, which has ``s_full`` from stage 1) drops the clean row once the first patched rows
    exist, and returns None for ``s_full``.
    """
    cache_name = cache_kwarg(target)
    if cache_name is None or not layers:  # a forward that takes no cache at given positions; nothing patched
        return naive_scores(target, ex, sources, layers)
    ids = _ids(ex, target)
    ps, pe = ex.eval_start, ex.eval_end
    blocks = resolve_parts(target).blocks
    order = sorted(set(layers))
    keep = 1 if clean else 0  # the clean row, past the first patched block
    rows_at = [
        len(sources) * sum(1 for layer in order if layer < i) + (keep if i > order[0] else 1)
        for i in range(len(blocks))
    ]
    cache = None
    if ps > 0:
        cache = prefixes.get(target, ex) if prefixes is not None else None
        if cache is None:
            cache = output_cache(target(input_ids=ids[:, :ps], use_cache=True, **keep_last_logits(target)))
            if cache is not None and prefixes is not None and _kv_layers(cache) is not None:
                prefixes.put(target, ex, cache)
        kv = _kv_layers(cache)
        if kv is None or len(kv) != len(blocks):  # no cache, or not one key/value layer per block
            return naive_scores(target, ex, sources, layers)
        _grow_cache(kv, rows_at)
    with ExitStack() as stack:
        for layer in order:
            rows = torch.stack([states[layer] for states in sources])
            replace = not clean and layer == order[0]
            stack.enter_context(patch_block(target, layer, partial(_join, rows, replace=replace)))
        kwargs = {cache_name: cache} if cache is not None else {}
        logits = target(input_ids=ids[:, ps:pe], use_cache=cache is not None, **kwargs).logits
    if logits.shape[0] != keep + len(sources) * len(order):
        raise UnsupportedArchitecture(
            f"{type(target).__name__}: the patched window came out with {logits.shape[0]} rows, not "
            f"{keep + len(sources) * len(order)}"
        )
    row = {
        (s, layer): keep + len(sources) * j + s for j, layer in enumerate(order) for s in range(len(sources))
    }
    out = [
        [mean_entity_logprob(logits[row[s, layer]], ex, offset=ps) for layer in layers]
        for s in range(len(sources))
    ]
    return (mean_entity_logprob(logits[0], ex, offset=ps) if clean else None), out


__all__ = [
    "PrefixMemo",
    "SourceStates",
    "fast_scores",
    "mean_entity_logprob",
    "naive_scores",
    "source_states",
]
