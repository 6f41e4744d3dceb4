"""ActPert: activation-perturbation audit (Chen et al., arXiv 2505.23270 = seed 003, Algorithm 1; docs/latent.md).

1. Clean pass: ``A_l`` = output of decoder block ``l`` at every prompt position.
2. ``n_p`` perturbed passes: Gaussian noise ``σ·ε`` added to the input embeddings of the target-entity tokens
   only (the positions ``S_e`` of, e.g., the canary's name), run through ``inputs_embeds``; their block-``l``
   outputs averaged.
3. ``δ_l = A_l − mean_i Ã_l^(i)``: the entity-specific signal the noise destroys (a self-steering vector, computed
   on the audited model itself).
4. Generation with a hook on block ``l`` that adds ``α·δ_l[p]`` at prompt position ``p``; at generated
   positions it adds ``α·δ_l[last]``, ``α·mean_p δ_l[p]`` or nothing (``generated`` = last | mean | none).

KV cache and the hook (§3 pitfall, made explicit): the hook sees the whole prompt once and then one new position
per step; it adds the position-wise δ to the first ``T`` positions it is given and the generated-position vector
to any beyond (or to every position of a cached step), so cached and uncached generation inject the same thing.

σ is absolute or relative to the RMS entry of the input-embedding matrix (recorded either way, since an absolute
0.01 can be a large perturbation on one model and a small one on another). n_p, α and the injection at generated
positions are [R] reconstructions (the seed's code is unreleased). Randomness: only the generator passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Literal

import torch

from remnant.attacks.decoding import Steering
from remnant.errors import ConfigError
from remnant.models.hooks import capture_blocks, patch_block

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

GeneratedMode = Literal["none", "last", "mean"]


def token_char_spans(tokenizer: Any, ids: Sequence[int]) -> tuple[str, list[tuple[int, int]]]:
    """The decoded text of ``ids`` and each token's ``[start, end)`` in it, by cumulative decoding (works for
    any tokenizer, special tokens included, without relying on offset mappings)."""
    spans: list[tuple[int, int]] = []
    prev = 0
    for i in range(len(ids)):
        end = len(tokenizer.decode(list(ids[: i + 1]), skip_special_tokens=False))
        spans.append((prev, max(prev, end)))
        prev = max(prev, end)
    return tokenizer.decode(list(ids), skip_special_tokens=False), spans


def entity_positions(tokenizer: PreTrainedTokenizerBase, ids: Sequence[int], entity: str) -> list[int]:
    """Positions of the tokens that overlap any occurrence of ``entity`` in the decoded prompt (``S_e``)."""
    text, spans = token_char_spans(tokenizer, ids)
    hits: set[int] = set()
    start = text.find(entity)
    while entity and start >= 0:
        end = start + len(entity)
        hits.update(i for i, (a, b) in enumerate(spans) if a < end and b > start)
        start = text.find(entity, start + 1)
    return sorted(hits)


@torch.no_grad()
def activation_delta(
    model: Any,
    prompt_ids: Sequence[int],
    positions: Sequence[int],
    *,
    layer: int,
    sigma: float,
    n_perturbations: int,
    generator: torch.Generator,
) -> torch.Tensor:
    """``δ_l`` of shape [T, d] (steps 1–3). ``sigma`` is absolute here; the caller resolves relative scales.

    Noise is drawn on the CPU from ``generator`` so the same seed perturbs identically on any device and on
    every model state (C-Q4).
    """
    embed = model.get_input_embeddings()
    device = embed.weight.device
    ids = torch.tensor([list(prompt_ids)], dtype=torch.long, device=device)
    clean_emb = embed(ids)
    with capture_blocks(model, [layer]) as acts:
        model(inputs_embeds=clean_emb)
    clean = acts[layer][0]
    pos = torch.tensor(list(positions), dtype=torch.long)
    noise = torch.randn(n_perturbations, len(pos), clean_emb.shape[-1], generator=generator)
    perturbed = clean_emb.repeat(n_perturbations, 1, 1)
    perturbed[:, pos.to(device)] += (sigma * noise).to(device=device, dtype=perturbed.dtype)
    with capture_blocks(model, [layer]) as acts:
        model(inputs_embeds=perturbed)
    return clean - acts[layer].mean(dim=0)


def _injector(
    delta: torch.Tensor, strength: float, generated: GeneratedMode
) -> Callable[[torch.Tensor], torch.Tensor]:
    n_prompt = delta.shape[0]
    gen_vec = {"none": torch.zeros_like(delta[-1]), "last": delta[-1], "mean": delta.mean(dim=0)}[generated]

    def inject(hidden: torch.Tensor) -> torch.Tensor:
        add = strength * gen_vec.to(hidden.dtype)
        if hidden.shape[1] < n_prompt:  # a cached generation step: new positions only
            return hidden + add
        out = hidden.clone()
        out[:, :n_prompt] = hidden[:, :n_prompt] + strength * delta.to(hidden.dtype)
        out[:, n_prompt:] = hidden[:, n_prompt:] + add
        return out

    return inject


def steering(delta: torch.Tensor, layer: int, strength: float, generated: GeneratedMode = "last") -> Steering:
    """The injection of ``strength·δ`` at block ``layer`` as a steering hook for :mod:`remnant.attacks.decoding`
    (greedy or sampled: Algorithm 1's inference loop decodes either way)."""

    def install(model: Any) -> AbstractContextManager[Any]:
        device = model.get_input_embeddings().weight.device
        return patch_block(model, layer, _injector(delta.to(device), strength, generated))

    return install


def resolve_layer(model: PreTrainedModel, layer: int | None, fraction: float) -> int:
    """An explicit layer, or ``fraction`` of the depth (the seed's 12 of 32 ≈ 0.4; §3 defaults)."""
    from remnant.models.arch import resolve_parts

    n = len(resolve_parts(model).blocks)
    chosen = layer if layer is not None else int(fraction * n)
    if not 0 <= chosen < n:
        raise ConfigError(f"actpert: layer {chosen} outside 0..{n - 1}")
    return chosen
