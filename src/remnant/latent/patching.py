"""Block-output activation patching on entity spans: the naive algorithm and an exact fast path.

Naive (docs/latent.md): one unpatched forward of the target for ``s_full``; one forward of each source,
whose block outputs are captured with the same forward hooks used for patching (never ``hidden_states``, whose
last entry is after the final norm, §1.7); then one patched forward of the target per layer.

Fast path (§1.6 b, exact): patching never touches positions before ``eval_start`` and attention is causal, so
the target runs once on the prefix ``[0, eval_start)`` with a KV cache, and the window ``[eval_start, eval_end)``
is run once for every (source, layer) in one forward over that cache (:func:`fast_scores_many`). Only the window
is fed, because the logits at ``eval_end - 1`` already predict the last entity token.

``uds_compat=True`` reproduces the reference's source states: ``hidden_states[l + 1]``, whose last entry is the
post-final-norm state, so the last layer's patch applies the norm twice and source = target gives Δ ≠ 0 there.
"""

from __future__ import annotations

import inspect
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
from remnant.models.hooks import capture_blocks, patch_block, prompt_batch

if TYPE_CHECKING:
    from transformers import Cache, PreTrainedModel

#: Per source, per layer: the source's block output on the window rows, shape [eval_end - eval_start, d].
SourceStates = Mapping[int, torch.Tensor]
#: Per block, the keys and values of one example's prefix, each [1, kv heads, eval_start, head dim]; () when the
#: example has no prefix.
PrefixKV = tuple[tuple[torch.Tensor, torch.Tensor], ...]


def entity_logprob(logits: torch.Tensor, ex: EncodedExample, offset: int = 0) -> torch.Tensor:
    """Mean teacher-forced log-prob of the entity tokens as a 0-d tensor (with its graph, where ``logits`` has
    one: the Goodhart arm's UDS surrogate trains through it); ``logits`` rows start at absolute position
    ``offset``."""
    rows = logits[ex.eval_start - offset : ex.eval_end - offset].float()
    target = torch.tensor(ex.targets, dtype=torch.long, device=rows.device)
    return torch.log_softmax(rows, dim=-1).gather(-1, target[:, None]).mean()


def mean_entity_logprob(logits: torch.Tensor, ex: EncodedExample, offset: int = 0) -> float:
    """Mean teacher-forced log-prob of the entity tokens; ``logits`` rows start at absolute position ``offset``."""
    return float(entity_logprob(logits, ex, offset))


#: The most tokens one row of a source forward packs (examples one after another, each reading only itself): packing
#: saves the padding of examples of unequal lengths, while every position's attention then spans the whole row.
PACK_TOKENS = 512


def consecutive_runs(sizes: Sequence[int], limit: int) -> list[list[int]]:
    """Indices of ``sizes`` in order, cut into consecutive runs whose sizes sum to at most ``limit`` (a size over
    ``limit`` is a run of its own)."""
    runs: list[list[int]] = []
    total = 0
    for i, size in enumerate(sizes):
        if runs and total + size <= limit:
            runs[-1].append(i)
            total += size
        else:
            runs.append([i])
            total = size
    return runs


def _block_causal_mask(lengths: Sequence[Sequence[int]], width: int, dtype: torch.dtype) -> torch.Tensor:
    """The additive mask of rows that each pack sequences of ``lengths`` one after another: a position reads its
    own sequence up to itself; a padding position reads itself alone."""
    allowed = torch.eye(width, dtype=torch.bool).repeat(len(lengths), 1, 1)
    for r, row in enumerate(lengths):
        o = 0
        for n in row:
            allowed[r, o : o + n, o : o + n] = torch.ones(n, n, dtype=torch.bool).tril()
            o += n
    return _additive(allowed, dtype)[:, None]


def _additive(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A boolean "may read" mask as the additive mask a forward takes (0 where allowed, the dtype's minimum not)."""
    return torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)


@torch.no_grad()
def source_states_many(
    source: PreTrainedModel,
    examples: Sequence[EncodedExample],
    layers: Sequence[int],
    *,
    uds_compat: bool = False,
    batch_size: int = 8,
) -> list[dict[int, torch.Tensor]]:
    """Block outputs of ``source`` at each example's window rows (hooks, or compat hidden_states), ``batch_size``
    examples per forward, nothing past ``eval_end`` fed, packed into rows of at most :data:`PACK_TOKENS` tokens
    (:func:`_block_causal_mask`). A model whose forward takes no position ids gets one example per row and no mask:
    in a causal model no position reads a later one, so right-padding changes nothing.
    """
    device = next(source.parameters()).device
    packs = "position_ids" in inspect.signature(source.forward).parameters
    out: list[dict[int, torch.Tensor]] = []
    for start in range(0, len(examples), batch_size):
        group = examples[start : start + batch_size]
        runs = consecutive_runs([ex.eval_end for ex in group], PACK_TOKENS if packs else 0)
        lengths = [[group[i].eval_end for i in run] for run in runs]
        width = max(sum(row) for row in lengths)
        ids = torch.zeros(len(runs), width, dtype=torch.long)
        positions = torch.zeros(len(runs), width, dtype=torch.long)
        at: list[tuple[int, int]] = []  # each example's row and offset in it, in the group's order
        for r, run in enumerate(runs):
            o = 0
            for i in run:
                ex = group[i]
                ids[r, o : o + ex.eval_end] = torch.tensor(ex.input_ids[: ex.eval_end], dtype=torch.long)
                positions[r, o : o + ex.eval_end] = torch.arange(ex.eval_end)
                at.append((r, o))
                o += ex.eval_end
        kwargs: dict[str, object] = {}
        if any(len(run) > 1 for run in runs):
            dtype = next(source.parameters()).dtype
            kwargs = {
                "position_ids": positions.to(device),
                "attention_mask": _block_causal_mask(lengths, width, dtype).to(device),
            }
        with capture_blocks(source, layers) as captured:
            source(input_ids=ids.to(device), **kwargs, **keep_last_logits(source))  # no logits are read
        if uds_compat:
            # The reference reads hidden_states[l + 1]: the block output, except the last entry, which is the final
            # norm of the last block's output (§1.7). Rebuilt from the hooks: output_hidden_states=True makes
            # transformers >= 5 install permanent capture hooks on every block of ``source``, which outlive the call.
            parts = resolve_parts(source)
            last = len(parts.blocks) - 1
            if last in captured:
                captured[last] = parts.final_norm(captured[last])
        out += [
            {layer: captured[layer][r, o + ex.eval_start : o + ex.eval_end].float() for layer in layers}
            for ex, (r, o) in zip(group, at, strict=True)
        ]
    return out


@torch.no_grad()
def naive_scores(
    target: PreTrainedModel, ex: EncodedExample, sources: Sequence[SourceStates], layers: Sequence[int]
) -> tuple[float, list[list[float]]]:
    """``s_full`` and, per source and layer, the patched mean entity log-prob: one forward per patch."""
    ids = prompt_batch(target, ex.input_ids)
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
    The kept tensors are only ever read: a packed forward concatenates them into a cache of its own."""

    def __init__(self, max_bytes: int = 256 * 2**20) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._kept: dict[tuple[int, ...], PrefixKV] = {}
        self._target: weakref.ref[PreTrainedModel] | None = None

    def get(self, target: PreTrainedModel, ex: EncodedExample) -> PrefixKV | None:
        if self._target is None or self._target() is not target:  # kept for another model: never read
            return None
        return self._kept.get(ex.input_ids[: ex.eval_start])

    def put(self, target: PreTrainedModel, ex: EncodedExample, kv: PrefixKV) -> None:
        if self._target is None or self._target() is not target:
            self._kept, self.bytes, self._target = {}, 0, weakref.ref(target)
        size = sum(t.numel() * t.element_size() for pair in kv for t in pair)
        if self.bytes + size <= self.max_bytes:
            self._kept[ex.input_ids[: ex.eval_start]] = kv
            self.bytes += size


def _prefix_kv(
    target: PreTrainedModel, ex: EncodedExample, n_blocks: int, prefixes: PrefixMemo | None
) -> PrefixKV | None:
    """Per block, the target's keys and values on ``ex``'s prefix ``[0, eval_start)`` (empty when there is none),
    or None when the model's cache is not one key/value layer per block (a linear-attention layer's state cannot be
    packed or repeated per row here)."""
    from transformers.cache_utils import DynamicLayer

    if ex.eval_start == 0:
        return ()
    kept = prefixes.get(target, ex) if prefixes is not None else None
    if kept is not None:
        return kept
    ids = prompt_batch(target, ex.input_ids)[:, : ex.eval_start]
    cache = output_cache(target(input_ids=ids, use_cache=True, **keep_last_logits(target)))
    layers = [] if cache is None else list(cache.layers)
    kv_layers = [x for x in layers if isinstance(x, DynamicLayer)]
    if len(kv_layers) != n_blocks or len(kv_layers) != len(layers):
        return None
    kv = tuple((cast(torch.Tensor, x.keys), cast(torch.Tensor, x.values)) for x in kv_layers)
    if prefixes is not None:
        prefixes.put(target, ex, kv)
    return kv


def _packed_cache(kvs: Sequence[PrefixKV], rows_at: Sequence[int]) -> Cache | None:
    """One cache holding every example's prefix one after another, each block's repeated to the rows that block
    runs (None when no example has a prefix)."""
    from transformers import DynamicCache

    parts = [kv for kv in kvs if kv]
    if not parts:
        return None
    data = []
    for b, n in enumerate(rows_at):
        keys, values = (torch.cat([kv[b][i] for kv in parts], dim=2) for i in (0, 1))
        data.append((keys.expand(n, -1, -1, -1), values.expand(n, -1, -1, -1)))
    return DynamicCache(ddp_cache_data=data)


def _packed_mask(
    examples: Sequence[EncodedExample], dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    """The additive attention mask of the packed window: a window position reads its own example's prefix and its
    own example's window up to itself, nothing of another example. Keys are every prefix, then every window."""
    prefix = sum(ex.eval_start for ex in examples)
    width = sum(ex.eval_end - ex.eval_start for ex in examples)
    allowed = torch.zeros(width, prefix + width, dtype=torch.bool)
    p0 = w0 = 0
    for ex in examples:
        w = ex.eval_end - ex.eval_start
        allowed[w0 : w0 + w, p0 : p0 + ex.eval_start] = True
        allowed[w0 : w0 + w, prefix + w0 : prefix + w0 + w] = torch.ones(w, w, dtype=torch.bool).tril()
        p0, w0 = p0 + ex.eval_start, w0 + w
    return _additive(allowed, dtype)[None, None].to(device)


#: The most bytes of logits one packed window forward may produce (rows × packed positions × vocabulary, float32):
#: packing stops adding examples there, so a large vocabulary or a long window packs fewer examples.
PACK_LOGIT_BYTES = 128 * 2**20


def window_packs(
    target: PreTrainedModel, examples: Sequence[EncodedExample], rows: int, max_bytes: int = PACK_LOGIT_BYTES
) -> list[list[int]]:
    """Consecutive runs of ``examples``' indices whose windows one forward of ``rows`` rows patches together
    (:func:`fast_scores_many`), each run's logits within ``max_bytes``; an example alone may exceed it."""
    per_position = rows * int(target.config.get_text_config().vocab_size) * 4
    return consecutive_runs([ex.eval_end - ex.eval_start for ex in examples], max_bytes // per_position)


def _join(rows: torch.Tensor, hidden: torch.Tensor, *, replace: bool) -> torch.Tensor:
    """A block's output with ``rows`` appended to the batch (``replace``: the batch becomes ``rows``)."""
    new = rows.to(hidden.dtype)
    return new if replace else torch.cat([hidden, new], dim=0)


@torch.no_grad()
def fast_scores_many(
    target: PreTrainedModel,
    examples: Sequence[EncodedExample],
    sources: Sequence[Sequence[SourceStates]],
    layers: Sequence[int],
    prefixes: PrefixMemo | None = None,
    *,
    clean: bool = True,
) -> list[tuple[float | None, list[list[float]]]]:
    """Per example, the same values as :func:`naive_scores`, from one forward of every example's window packed
    into one sequence over their prefixes' keys and values.

    The packed window starts as one clean row. A row patched at block l equals the clean row below l, so it joins
    the batch at l: block l's hook appends one row per source holding that source's block-l states on the windows.
    Block i therefore runs 1 + (sources × patched layers below i) rows, about half the work of every row through
    every block; packing makes each block's matrix products one large product. An explicit mask keeps each example
    to its own prefix and window (:func:`_packed_mask`). ``sources[e]`` are example e's source states, as many for
    every example; ``prefixes`` keeps the target's prefix keys and values between calls on the same target.
    ``clean=False`` (stage 2, which has ``s_full`` from stage 1) drops the clean row once the first patched rows
    exist, and returns None for ``s_full``.
    """
    n_blocks = len(resolve_parts(target).blocks)
    usable = cache_kwarg(target) is not None and bool(layers)
    kvs = [_prefix_kv(target, ex, n_blocks, prefixes) for ex in examples] if usable else []
    if not usable or any(kv is None for kv in kvs):  # no cache at given positions, or nothing patched
        return [naive_scores(target, ex, src, layers) for ex, src in zip(examples, sources, strict=True)]
    n_src, order = len(sources[0]), sorted(set(layers))
    keep = 1 if clean else 0  # the clean row, past the first patched block
    rows_at = [
        n_src * sum(1 for layer in order if layer < i) + (keep if i > order[0] else 1)
        for i in range(n_blocks)
    ]
    logits = _packed_forward(target, examples, sources, order, rows_at, cast(list[PrefixKV], kvs), clean)
    if logits.shape[0] != keep + n_src * len(order):
        raise UnsupportedArchitecture(
            f"{type(target).__name__}: the patched window came out with {logits.shape[0]} rows, not "
            f"{keep + n_src * len(order)}"
        )
    row = {(s, layer): keep + n_src * j + s for j, layer in enumerate(order) for s in range(n_src)}
    out: list[tuple[float | None, list[list[float]]]] = []
    w0 = 0
    for ex in examples:
        offset = ex.eval_start - w0  # the example's window starts at packed position w0
        patched = [
            [mean_entity_logprob(logits[row[s, layer]], ex, offset) for layer in layers] for s in range(n_src)
        ]
        out.append(((mean_entity_logprob(logits[0], ex, offset) if clean else None), patched))
        w0 += ex.eval_end - ex.eval_start
    return out


def _packed_forward(
    target: PreTrainedModel,
    examples: Sequence[EncodedExample],
    sources: Sequence[Sequence[SourceStates]],
    order: Sequence[int],
    rows_at: Sequence[int],
    kvs: Sequence[PrefixKV],
    clean: bool,
) -> torch.Tensor:
    """The logits of the packed window's forward, one row per clean or patched copy (see :func:`fast_scores_many`)."""
    device = next(target.parameters()).device
    ids = [t for ex in examples for t in ex.input_ids[ex.eval_start : ex.eval_end]]
    positions = [p for ex in examples for p in range(ex.eval_start, ex.eval_end)]
    cache = _packed_cache(kvs, rows_at)
    kwargs: dict[str, object] = {cast(str, cache_kwarg(target)): cache} if cache is not None else {}
    with ExitStack() as stack:
        for layer in order:
            rows = torch.stack(
                [torch.cat([src[s][layer] for src in sources]) for s in range(len(sources[0]))]
            )
            replace = not clean and layer == order[0]
            stack.enter_context(patch_block(target, layer, partial(_join, rows, replace=replace)))
        out = target(
            input_ids=torch.tensor([ids], dtype=torch.long, device=device),
            position_ids=torch.tensor([positions], dtype=torch.long, device=device),
            attention_mask=_packed_mask(examples, next(target.parameters()).dtype, device),
            use_cache=cache is not None,
            **kwargs,
        )
    return cast(torch.Tensor, out.logits)


__all__ = [
    "PrefixMemo",
    "SourceStates",
    "fast_scores_many",
    "mean_entity_logprob",
    "naive_scores",
]
