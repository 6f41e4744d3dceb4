"""Which parameters take gradients, for the span of a block: one helper for every place that freezes or unfreezes
a model temporarily (per-sample gradient norms, the Jacobian lens)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import torch


@contextlib.contextmanager
def grad_required(params: Iterable[torch.nn.Parameter], flag: bool) -> Iterator[None]:
    """Set ``requires_grad`` on ``params`` for the block, and put each back as it was after."""
    before = [(p, p.requires_grad) for p in params]
    try:
        for p, _ in before:
            p.requires_grad_(flag)
        yield
    finally:
        for p, was in before:
            p.requires_grad_(was)


__all__ = ["grad_required"]
