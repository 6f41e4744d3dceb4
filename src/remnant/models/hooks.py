"""Capture and patch decoder-block outputs with plain forward hooks that are always removed.

Block outputs come from hooks, never from ``output_hidden_states[-1]``, which is after the final norm
(docs/latent.md). Hook outputs may be a tuple or a tensor; both are handled.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from remnant.errors import UnsupportedArchitecture
from remnant.models.arch import resolve_parts


def block_hidden(output: Any) -> torch.Tensor:
    hidden = output[0] if isinstance(output, tuple) else output
    if not isinstance(hidden, torch.Tensor):
        raise UnsupportedArchitecture(
            f"a decoder block returned {type(hidden).__name__}, not a hidden-state tensor"
        )
    return hidden


def with_hidden(output: Any, new: torch.Tensor) -> Any:
    return (new, *output[1:]) if isinstance(output, tuple) else new


@contextmanager
def capture_blocks(
    model: torch.nn.Module, layers: Sequence[int], *, detach: bool = True
) -> Iterator[dict[int, torch.Tensor]]:
    """Record the (detached) output of each listed block during forwards run inside the context; ``detach=False``
    keeps each one with its graph (a training penalty on it)."""
    blocks = resolve_parts(model).blocks
    captured: dict[int, torch.Tensor] = {}
    handles = []
    try:
        for layer in layers:

            def hook(_m: object, _i: object, out: Any, layer: int = layer) -> None:
                captured[layer] = block_hidden(out).detach().clone() if detach else block_hidden(out)

            handles.append(blocks[layer].register_forward_hook(hook))
        yield captured
    finally:
        for h in handles:
            h.remove()


def prompt_batch(model: torch.nn.Module, ids: Sequence[int]) -> torch.Tensor:
    """One prompt's token ids as a ``[1, T]`` batch on ``model``'s device: a model on a GPU cannot read ids from
    the CPU (R24: the run records that device)."""
    return torch.tensor([list(ids)], dtype=torch.long, device=next(model.parameters()).device)


def block_outputs(
    model: torch.nn.Module, ids: Sequence[int], layers: Sequence[int], *, detach: bool = True
) -> dict[int, torch.Tensor]:
    """One forward of ``model`` on one prompt ``ids`` (put on the model's device, :func:`prompt_batch`): each listed
    block's output ``[1, T, d]`` (:func:`capture_blocks`; ``detach=False`` keeps each one with its graph)."""
    with capture_blocks(model, layers, detach=detach) as captured:
        model(input_ids=prompt_batch(model, ids))
    return captured


@contextmanager
def patch_block(
    model: torch.nn.Module,
    layer: int,
    value: torch.Tensor | Callable[[torch.Tensor], torch.Tensor],
    positions: Sequence[int] | None = None,
) -> Iterator[None]:
    """Replace the output of block ``layer`` (at ``positions``, or everywhere) by a tensor or a function of it. A
    function's result, with no ``positions``, is taken whole: it may change the batch (rows appended there run
    through the later blocks as rows of their own)."""
    block = resolve_parts(model).blocks[layer]

    def hook(_m: object, _i: object, out: Any) -> Any:
        hidden = block_hidden(out)
        new = value(hidden) if callable(value) else value.to(hidden.dtype)
        if positions is None:
            patched = new if callable(value) or new.shape == hidden.shape else new.expand_as(hidden)
        else:
            patched = hidden.clone()
            idx = list(positions)
            patched[:, idx] = new[:, idx] if new.shape == hidden.shape else new
        return with_hidden(out, patched)

    handle = block.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()
