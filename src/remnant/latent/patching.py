"""Block-output activation patching on entity spans: the naive algorithm and an exact fast path.

Naive (docs/latent.md): one unpatched forward of the target for ``s_full``; one forward of each source,
whose block outputs are captured with the same forward hooks used for patching (never ``hidden_states``, whose
last entry is after the final norm, §1.7); then one patched forward of the target per layer.

Fast path (§1.6 b, exact): patching never touches positions before ``eval_start`` and attention is causal, so
the target runs once on the prefix ``[0, eval_start)`` with a KV cache, and the window ``[eval_start, eval_end)``
is run once for every (source, layer) at once — one batch row per patch, plus one clean row for ``s_full`` —
over the cache repeated across the batch. Only the window is fed, because the logits at ``eval_end - 1``
already predict the last entity token. Each layer's hook patches only its own row.

``uds_compat=True`` reproduces the reference's source states: ``hidden_states[l + 1]``, whose last entry is the
post-final-norm state, so the last layer's patch applies the norm twice and source = target gives Δ ≠ 0 there.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import torch

from remnant.latent.inputs import EncodedExample
from remnant.models.arch import resolve_parts
from remnant.models.hooks import capture_blocks, patch_block

if TYPE_CHECKING:
    from transformers import PreTrainedModel

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
def source_states(
    source: PreTrainedModel, ex: EncodedExample, layers: Sequence[int], *, uds_compat: bool = False
) -> dict[int, torch.Tensor]:
    """Block outputs of ``source`` on ``ex``'s ids at the window rows, from hooks (or compat hidden_states)."""
    ids = _ids(ex, source)
    window = slice(ex.eval_start, ex.eval_end)
    with capture_blocks(source, layers) as captured:
        source(input_ids=ids)
    if uds_compat:
        # The reference reads hidden_states[l + 1]: the block output, except the last entry, which is the final
        # norm of the last block's output (§1.7). Rebuilt from the hooks: output_hidden_states=True makes
        # transformers >= 5 install permanent capture hooks on every block of ``source``, which outlive the call.
        parts = resolve_parts(source)
        last = len(parts.blocks) - 1
        if last in captured:
            captured[last] = parts.final_norm(captured[last])
    return {layer: captured[layer][0, window].float() for layer in layers}


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


def cache_kwarg(model: PreTrainedModel) -> str:
    """The forward keyword for a KV cache: ``cache`` from transformers 5.2x, ``past_key_values`` before."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def kv_cache(output: Any) -> Any:
    """The KV cache of a forward output under either transformers naming."""
    return output["cache"] if "cache" in output else output["past_key_values"]


def _row_patch(rows: list[tuple[int, torch.Tensor]]) -> Any:
    def patch(hidden: torch.Tensor) -> torch.Tensor:
        new = hidden.clone()
        for row, value in rows:
            new[row] = value.to(hidden.dtype)
        return new

    return patch


@torch.no_grad()
def fast_scores(
    target: PreTrainedModel, ex: EncodedExample, sources: Sequence[SourceStates], layers: Sequence[int]
) -> tuple[float, list[list[float]]]:
    """Same values as :func:`naive_scores` from one prefix forward and one batched window forward."""
    ids = _ids(ex, target)
    ps, pe = ex.eval_start, ex.eval_end
    n_rows = 1 + len(sources) * len(layers)
    cache = None
    if ps > 0:
        cache = kv_cache(target(input_ids=ids[:, :ps], use_cache=True))
        cache.batch_repeat_interleave(n_rows)
    window = ids[:, ps:pe].expand(n_rows, -1)
    per_layer: dict[int, list[tuple[int, torch.Tensor]]] = {layer: [] for layer in layers}
    for s, states in enumerate(sources):
        for j, layer in enumerate(layers):
            per_layer[layer].append((1 + s * len(layers) + j, states[layer]))
    with ExitStack() as stack:
        for layer, rows in per_layer.items():
            stack.enter_context(patch_block(target, layer, _row_patch(rows)))
        kwargs = {cache_kwarg(target): cache} if cache is not None else {}
        logits = target(input_ids=window, use_cache=cache is not None, **kwargs).logits
    scores = [mean_entity_logprob(logits[r], ex, offset=ps) for r in range(n_rows)]
    out = [scores[1 + s * len(layers) : 1 + (s + 1) * len(layers)] for s in range(len(sources))]
    return scores[0], out


__all__ = ["SourceStates", "fast_scores", "mean_entity_logprob", "naive_scores", "source_states"]
