"""Logit lens (J = I): the comparator of J-Access and the UDS paper's logit-lens baseline. Non-adjudicating.

Readout ``lm_head(final_norm(h_l))`` with ``h_l`` a block output from hooks (for the last block the pre-norm
state, so the norm is applied once; docs/latent.md). The J-Access comparator is
``remnant.latent.jaccess.read_access(..., lens=None)``.

The UDS paper's baseline (docs/latent.md [V]): ``k_{m,l}`` is the mean entity log-prob obtained by decoding
model m's layer-l states on the entity window through the **full** model's norm and unembedding;
``d_ret = k_full − k_ret``, ``d_unl = k_full − k_unl``, aggregated exactly as UDS (τ filter on d_ret, clipped
ratio, d_ret-weighted). It is observational: a rotated but intact representation reads as erased (the UDS paper §5.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from remnant.latent.cache import model_digest
from remnant.latent.inputs import EncodedExample, EntityExample, encode_examples
from remnant.latent.jacobian_lens import readout
from remnant.latent.patching import mean_entity_logprob
from remnant.latent.uds import UDSConfig, UDSExampleResult, UDSResult, n_blocks, summary_fields
from remnant.models.hooks import block_outputs

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


@torch.no_grad()
def layer_logprobs(
    decoder: Any, model: PreTrainedModel, ex: EncodedExample, layers: Sequence[int]
) -> list[float]:
    """Per layer: mean entity log-prob of ``model``'s block outputs decoded through ``decoder``'s norm and head
    (:func:`~remnant.latent.jacobian_lens.readout` with J = I)."""
    captured = block_outputs(model, ex.input_ids, layers)
    window = slice(ex.eval_start, ex.eval_end)
    return [
        mean_entity_logprob(readout(decoder, captured[la][0, window]), ex, ex.eval_start) for la in layers
    ]


def logit_lens_uds(
    full: PreTrainedModel,
    retain: PreTrainedModel,
    unlearned: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    examples: Sequence[EntityExample],
    cfg: UDSConfig | None = None,
) -> UDSResult:
    """The §1.9 logit-lens baseline on the UDS examples and aggregation (decoder: the full model's)."""
    cfg = cfg or UDSConfig()
    encoded = encode_examples(tokenizer, examples, cfg.prompt_format, cfg.system_prompt)
    layers = cfg.resolve_layers(full)
    rows: list[UDSExampleResult] = []
    for ex in encoded.examples:
        k_full, k_ret, k_unl = (layer_logprobs(full, m, ex, layers) for m in (full, retain, unlearned))
        d_ret = [a - b for a, b in zip(k_full, k_ret, strict=True)]
        d_unl = [a - b for a, b in zip(k_full, k_unl, strict=True)]
        rows.append(UDSExampleResult.profile(ex.idx, k_full[-1], d_ret, d_unl, layers, cfg.tau))
    return UDSResult(
        measurement="logit_lens_uds",
        **summary_fields(rows, len(encoded.skipped), layers, cfg.tau),
        prompt_format=encoded.style,
        uds_compat=False,
        n_blocks=n_blocks(full),
        target_model=model_digest(full),
        retain_model=model_digest(retain),
        source_model=model_digest(unlearned),
        stage1_key=None,
        layer_mean_ler=[None] * len(layers),
        examples=rows,
        provenance="[V] logit-lens baseline of the UDS meta-evaluation (docs/latent.md): full model's decoder",
    )


__all__ = ["layer_logprobs", "logit_lens_uds"]
