"""Gradient-norm membership scores (their ``GradNormAttack``, p = 2, batch size 1; docs/metrics.md).

Per sample: loss = −mean of the labelled tokens' log-probabilities *without the last one* (their
``tokenwise_logprobs`` drops it), the gradient of that loss with respect to every parameter, and the score is the
**mean over parameter tensors of each tensor's p-norm** (not one global norm), as their code computes it. A larger
gradient means a worse fit, so the score is signed like a loss (higher = less member-like) without negation.

Differences from their code, on purpose:

- the model stays in eval mode (they call ``model.train()``, which turns dropout on where the config has it and
  makes scores random; Llama and Qwen configs have no dropout, so their numbers are unchanged there);
- gradients are taken with ``torch.autograd.grad`` rather than ``backward()``, so the model's ``.grad`` fields
  are left as they were (theirs zeroes them); frozen parameters are differentiated too, as theirs are when loaded;
- a sample with nothing left to score (a one-token answer) scores 0, as their min-k does (their code feeds NaN to
  the AUC and fails).

Tied parameters count once (``model.parameters()`` deduplicates them, in both).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from remnant.metrics.forward import ScoredSequence, logits_keep_kwarg

#: The p-norms their attack accepts.
NORMS = (1.0, 2.0, float("inf"))


@contextlib.contextmanager
def _all_trainable(params: list[torch.nn.Parameter]) -> Iterator[None]:
    before = [p.requires_grad for p in params]
    try:
        for p in params:
            p.requires_grad_(True)
        yield
    finally:
        for p, flag in zip(params, before, strict=True):
            p.requires_grad_(flag)


def _one(model: Any, params: list[torch.nn.Parameter], seq: ScoredSequence, p: float) -> float:
    n = len(seq.input_ids)
    if n - seq.label_start < 2:
        return 0.0
    device = params[0].device
    ids = torch.tensor([seq.input_ids], dtype=torch.long, device=device)
    kwargs: dict[str, Any] = {"use_cache": False}
    keep_name = logits_keep_kwarg(model)
    if keep_name is not None:  # the output head (forward and backward) only where the loss reads it
        kwargs[keep_name] = n - (seq.label_start - 1)
    logits = model(input_ids=ids, attention_mask=torch.ones_like(ids), **kwargs).logits
    offset = n - logits.shape[1]  # logits[:, j] predicts the token at position offset + j + 1
    # Positions label_start-1 .. n-3 predict the labelled tokens except the last.
    logp = torch.log_softmax(logits[0, seq.label_start - 1 - offset : n - 2 - offset].float(), dim=-1)
    targets = ids[0, seq.label_start : n - 1]
    loss = -logp.gather(-1, targets[:, None]).mean()
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    norms = [g.detach().float().norm(p=p) for g in grads if g is not None]
    return float(torch.stack(norms).mean().item())


def gradnorm_scores(
    model: Any, sequences: Sequence[ScoredSequence], *, p: float = 2.0, progress: bool = False
) -> list[float]:
    """One score per sequence (see the module docstring)."""
    from tqdm.auto import tqdm  # type: ignore[import-untyped]

    if float(p) not in NORMS:
        raise ValueError(f"gradient norm p must be one of 1, 2, inf, not {p!r}")
    params = list(model.parameters())
    with _all_trainable(params), torch.enable_grad():
        return [
            _one(model, params, s, float(p))
            for s in tqdm(sequences, desc="gradient norms", disable=not progress, leave=False)
        ]


__all__ = ["NORMS", "gradnorm_scores"]
