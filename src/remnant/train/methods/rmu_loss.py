"""RMU's pieces as pure tensor functions: the control vector and the masked activation MSE (docs/methods.md).

Both RMU terms are an activation MSE over the positions *holding* answer tokens (``labels != -100``, no causal
shift): :func:`masked_activation_mse` (remnant's per-sequence mean) or :func:`broadcast_activation_mse` (the
reference's ``[B]/[B, 1]`` broadcast, ``compat="openunlearning"``); the two agree at batch size 1.
"""

from __future__ import annotations

import torch

from remnant.models.prompts import IGNORE_INDEX


def control_vector(dim: int, steering_coeff: float, generator: torch.Generator) -> torch.Tensor:
    """``c = steering_coeff * u / ||u||`` with ``u ~ U[0, 1)^dim`` drawn from ``generator``; shape ``[dim]``.

    Every component is non-negative (the reference draws ``torch.rand``, not a Gaussian), and ``||c|| = s``.
    """
    if dim <= 0:
        raise ValueError(f"dim must be positive, got {dim}")
    u = torch.rand(dim, generator=generator, dtype=torch.float64)
    c: torch.Tensor = (u / u.norm() * steering_coeff).to(torch.float32)
    return c


def answer_mask(labels: torch.Tensor) -> torch.Tensor:
    """Positions that hold answer tokens (labels aligned with the inputs, no shift), as in the reference."""
    return labels != IGNORE_INDEX


def masked_activation_mse(
    activations: torch.Tensor, target: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """``mean_b [ sum_{t in ans} mean_d (a - target)^2 / n_ans(b) ]``.

    ``activations`` is ``[B, T, D]``; ``target`` broadcasts to it (a ``[D]`` control vector or a ``[B, T, D]``
    reference activation); ``mask`` is ``[B, T]``. A sequence with no answer tokens contributes 0 rather than
    a NaN (its count is clamped to 1), so an empty answer cannot masquerade as divergence.
    """
    diff = activations.float() - target.float()
    per_position = diff.pow(2).mean(dim=-1)
    m = mask.to(per_position.dtype)
    per_sequence = (per_position * m).sum(dim=-1) / m.sum(dim=-1).clamp(min=1.0)
    return per_sequence.mean()


def broadcast_activation_mse(
    activations: torch.Tensor, target: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """OpenUnlearning's ``compute_activation_loss``: ``mean_{i,j} S_j / n_i`` = ``mean_j S_j · mean_i 1/n_i``.

    ``S_j`` is sequence ``j``'s sum over answer positions of ``mean_d (a - target)^2`` and ``n_i`` sequence ``i``'s
    answer count; dividing the ``[B]`` sums by the ``[B, 1]`` counts broadcasts to ``[B, B]`` before the mean. It
    equals :func:`masked_activation_mse` at batch size 1 or when every sequence has as many answer tokens. No
    floor on the counts, as there (``encode_pair`` gives every sequence at least one answer token).
    """
    diff = activations.float() - target.float()
    m = mask.to(diff.dtype)
    sums = (diff.pow(2) * m.unsqueeze(-1)).mean(dim=-1).sum(dim=-1)
    counts = m.sum(dim=-1, keepdim=True)
    return (sums / counts).mean()


__all__ = ["answer_mask", "broadcast_activation_mse", "control_vector", "masked_activation_mse"]
