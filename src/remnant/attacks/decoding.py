"""What an attack generates from, and the two ways remnant decodes from it: greedy and seeded sampling.

An attack builds, per probe, a :class:`GenerationInput` per *try* (where it spends its budget: GCG's suffix
search, the soft-prompt optimisation, ActPert's δ); decoding is separate — :func:`greedy_texts` (the κ path, R6)
or :func:`sample_ids` (one generator per row) — so the ROUGE scoring (:mod:`remnant.attacks.rouge_scoring`)
decodes from exactly the inputs κ was scored on without running the optimisation twice (seed 003 scores one
greedy generation per auditor, then 50 sampled ones).

Greedy decoding of plain ids is the harness's batched, left-padded path
(:func:`remnant.score.capability.generate_greedy`), so an attack outputs exactly what the harness would;
embeds and steering decode one prompt at a time. No randomness except the generators the caller passes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from remnant.models.greedy import eos_ids
from remnant.models.prompts import pad_id

if TYPE_CHECKING:
    from transformers import PreTrainedModel

#: Installs a steering hook on the model for the duration of a decoding (ActPert: δ added at one block).
Steering = Callable[[Any], AbstractContextManager[Any]]


@dataclass(frozen=True, eq=False)
class GenerationInput:
    """One try of an attack on one probe: what decoding starts from, and what its outcome records.

    ``embeds`` ([T, d]), when set, replaces the input embeddings of the prompt (its ``prompt_ids`` are then the
    bookkeeping ids the vectors started from); ``steering`` wraps every forward of the decoding; ``extra`` is
    the JSON-ready detail the outcome records (the prefill used, the suffix found, the strength...).
    """

    prompt_ids: tuple[int, ...]
    embeds: torch.Tensor | None = None
    steering: Steering | None = None
    extra: Mapping[str, object] = field(default_factory=dict)

    @property
    def plain(self) -> bool:
        """True for token ids alone, decoded on the unmodified forward."""
        return self.embeds is None and self.steering is None

    def scope(self, model: PreTrainedModel) -> AbstractContextManager[Any]:
        return self.steering(model) if self.steering is not None else nullcontext()


def forward_cached(
    model: PreTrainedModel, input_ids: torch.Tensor | None, cache: Any = None, **kwargs: Any
) -> tuple[Any, Any]:
    """One forward pass that uses and returns a key/value cache: ``(logits, cache)``.

    transformers 5 renamed ``past_key_values`` to ``cache`` (the old name warns, and goes in 5.40); this asks
    the model's ``forward`` which one it takes, so attacks decode incrementally on either. ``input_ids`` may be
    None when ``inputs_embeds`` is given.
    """
    from remnant.models.forward_keywords import cache_kwarg, output_cache

    key = cache_kwarg(model) or "past_key_values"
    out = model(input_ids=input_ids, use_cache=True, **{key: cache}, **kwargs)
    return out.logits, output_cache(out)


def filtered_logprobs(logits: torch.Tensor, temperature: float, top_k: int | None) -> torch.Tensor:
    """Log-probabilities of next tokens under temperature then top-k (ties at the k-th value kept, as HF's
    top-k warper does); -inf outside the top k. One function for sampling and the analytic path."""
    scaled = logits.float() / temperature
    if top_k is not None and 0 < top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, top_k, dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    return torch.log_softmax(scaled, dim=-1)


@torch.no_grad()
def greedy_ids(
    model: Any, tokenizer: Any, inp: GenerationInput, *, max_new_tokens: int, use_cache: bool | None = None
) -> list[int]:
    """Greedy continuation ids of one input (``model.generate``, unpadded, inside the input's steering);
    ``use_cache`` set overrides the model's generation config. Token ids go through the harness's one-prompt
    decoding (:func:`remnant.score.capability.generate_greedy_ids`)."""
    from remnant.score.capability import generate_greedy_ids

    with inp.scope(model):
        if inp.embeds is None:
            return generate_greedy_ids(
                model, tokenizer, inp.prompt_ids, max_new_tokens=max_new_tokens, use_cache=use_cache
            )
        device = model.get_input_embeddings().weight.device
        common: dict[str, object] = {
            "max_new_tokens": max_new_tokens,
            "do_sample": False,
            "pad_token_id": pad_id(tokenizer),
        }
        if use_cache is not None:
            common["use_cache"] = use_cache
        embeds = inp.embeds.to(device=device, dtype=model.get_input_embeddings().weight.dtype)[None]
        mask = torch.ones(embeds.shape[:2], dtype=torch.long, device=device)
        out = model.generate(inputs_embeds=embeds, attention_mask=mask, **common)
        return [int(t) for t in out[0]]  # with inputs_embeds alone, generate returns only new tokens


def greedy_texts(
    model: Any, tokenizer: Any, inputs: Sequence[GenerationInput], *, max_new_tokens: int, batch_size: int
) -> list[str]:
    """Greedy continuations of ``inputs``, in order, decoded without special tokens.

    Plain inputs go together through the harness's batched generation (the same call, batches and padding); the
    others one at a time through :func:`greedy_ids`.
    """
    from remnant.score.capability import generate_greedy

    plain = [i for i, inp in enumerate(inputs) if inp.plain]
    texts: list[str | None] = [None] * len(inputs)
    if plain:
        batch = generate_greedy(
            model,
            tokenizer,
            [list(inputs[i].prompt_ids) for i in plain],
            max_new_tokens=max_new_tokens,
            batch_size=batch_size,
        )
        for i, text in zip(plain, batch, strict=True):
            texts[i] = text
    for i, inp in enumerate(inputs):
        if not inp.plain:
            new = greedy_ids(model, tokenizer, inp, max_new_tokens=max_new_tokens)
            texts[i] = tokenizer.decode(new, skip_special_tokens=True)
    return [t if t is not None else "" for t in texts]


def _first_step(model: Any, inp: GenerationInput, n: int, device: torch.device) -> tuple[torch.Tensor, Any]:
    """Logits at the prompt's last position for ``n`` rows, and a cache holding the prompt for each row.

    The prompt runs once and its cache is repeated for the rows where the cache type allows it; otherwise the
    prompt runs ``n`` times (same values either way).
    """
    if inp.embeds is not None:
        emb = inp.embeds.to(device=device, dtype=model.get_input_embeddings().weight.dtype)[None]
        logits, cache = forward_cached(model, None, inputs_embeds=emb)
    else:
        logits, cache = forward_cached(model, torch.tensor([list(inp.prompt_ids)], device=device))
    if hasattr(cache, "batch_repeat_interleave"):
        cache.batch_repeat_interleave(n)
        return logits[:, -1:].expand(n, 1, logits.shape[-1]), cache
    if inp.embeds is not None:
        return forward_cached(model, None, inputs_embeds=emb.expand(n, -1, -1))
    return forward_cached(model, torch.tensor([list(inp.prompt_ids)] * n, device=device))


@torch.no_grad()
def sample_ids(
    model: Any,
    tokenizer: Any,
    inp: GenerationInput,
    generators: Sequence[torch.Generator],
    *,
    temperature: float,
    top_k: int | None,
    max_new_tokens: int,
) -> list[list[int]]:
    """One sampled continuation per generator (token ids, cut after the first end token).

    Row ``i`` draws every token from ``generators[i]`` alone, so it does not depend on the other rows, on
    batching or on the device the model sits on (generators live where the caller made them).
    """
    n = len(generators)
    device = model.get_input_embeddings().weight.device
    eos = eos_ids(model, tokenizer.eos_token_id)
    rows: list[list[int]] = [[] for _ in range(n)]
    with inp.scope(model):
        logits, cache = _first_step(model, inp, n, device)
        done = [False] * n
        for _ in range(max_new_tokens):
            probs = filtered_logprobs(logits[:, -1], temperature, top_k).exp()
            nxt = [int(torch.multinomial(probs[i], 1, generator=generators[i])) for i in range(n)]
            for i, t in enumerate(nxt):
                if not done[i]:
                    rows[i].append(t)
                    done[i] = t in eos
            if all(done):
                break
            step_ids = torch.tensor([[t] for t in nxt], device=device)
            logits, cache = forward_cached(model, step_ids, cache)
    return rows


__all__ = [
    "GenerationInput",
    "Steering",
    "filtered_logprobs",
    "forward_cached",
    "greedy_ids",
    "greedy_texts",
    "sample_ids",
]
