"""Embedding-space (soft-prompt) attack, budget-capped (Schwinn et al. 2024; docs/latent.md; seed 003's SoftGCG).

Layout ``[before][attack vectors][after][target]`` (the same place GCG's suffix goes, inside the prompt format
the harness uses for every state). The vectors start at the embeddings of real tokens and move by signed
gradient steps ``e ← e − step·sign(∇_e L)`` on the cross-entropy of an answer-free target.

Why a cap and a control are essential (§4.8 pitfalls; Chen et al. 2025, "Soft Token Attacks Cannot Reliably
Audit Unlearning"): unconstrained soft tokens can force arbitrary strings, including content the model never
held, so an unbounded soft-prompt "recovery" says nothing about a removal. The budget here is fixed and small —
few vectors, few steps — and every vector stays within a norm ball around its starting embedding whose radius
is stated relative to the model's own embedding scale (``rms`` = root-mean-square entry of the input embedding
matrix): L-inf ``|δ| ≤ radius·rms`` per entry, or L2 ``‖δ_j‖ ≤ radius·rms·√d`` per vector (≈ radius × a typical
token's norm). The step is ``step_size·rms``. The same attack, budget and seed run on the control (C-Q4).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import torch

from remnant.attacks.decoding import GenerationInput
from remnant.attacks.gcg_core import SuffixObjective
from remnant.attacks.suffix_layout import SuffixLayout
from remnant.errors import ConfigError

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@dataclass(frozen=True)
class SoftPromptConfig:
    """Soft-prompt budget. Schwinn et al. use 20 vectors and 100 steps of 0.001; §4.8 caps at ≤20 and ≤100."""

    n_tokens: int = 10
    steps: int = 20
    step_size: float = 0.05
    radius: float = 0.5
    norm: Literal["linf", "l2"] = "linf"

    def __post_init__(self) -> None:
        if not 1 <= self.n_tokens <= 20 or not 0 <= self.steps <= 100:
            raise ConfigError("soft_prompt: n_tokens must be in 1..20 and steps in 0..100 (docs/latent.md)")
        if self.step_size <= 0 or self.radius <= 0:
            raise ConfigError("soft_prompt: step_size and radius must be positive")
        if self.norm not in ("linf", "l2"):
            raise ConfigError(f"soft_prompt: norm must be 'linf' or 'l2', not {self.norm!r}")


@dataclass(frozen=True)
class SoftPromptResult:
    """Best vectors (lowest target loss seen), the trace, and the absolute scales the budget resolved to."""

    best_embeds: torch.Tensor
    best_loss: float
    init_loss: float
    losses: tuple[float, ...]
    best_step: int
    rms: float
    radius_abs: float
    step_abs: float
    max_deviation: float


def embedding_rms(model: Any) -> float:
    """Root-mean-square entry of the input embedding matrix (the scale budgets and noise are stated against)."""
    weight = model.get_input_embeddings().weight.detach()
    return float(weight.float().pow(2).mean().sqrt())


def project(delta: torch.Tensor, norm: str, radius_abs: float) -> torch.Tensor:
    """Project deviations ``delta`` [L, d] onto the budget ball (per entry for L-inf, per vector for L2)."""
    if norm == "linf":
        return delta.clamp(-radius_abs, radius_abs)
    norms = delta.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    shrink: torch.Tensor = (radius_abs / norms).clamp(max=1.0)
    return delta * shrink


def soft_prompt_optimise(
    model: PreTrainedModel,
    layout: SuffixLayout,
    target_ids: Sequence[int],
    init_ids: Sequence[int],
    cfg: SoftPromptConfig,
) -> SoftPromptResult:
    """Signed-gradient descent on the suffix vectors within the cap; deterministic (no randomness at all)."""
    if len(init_ids) != cfg.n_tokens:
        raise ConfigError(f"soft_prompt: {len(init_ids)} initial ids for {cfg.n_tokens} vectors")
    objective = SuffixObjective(model, layout, target_ids, use_prefix_cache=True)
    rms = embedding_rms(model)
    d = int(objective.embed.weight.shape[1])
    radius_abs = cfg.radius * rms * (d**0.5 if cfg.norm == "l2" else 1.0)
    step_abs = cfg.step_size * rms
    with torch.no_grad():
        init = objective.embed(objective.ids_tensor(init_ids))[0].detach()
    current = init.clone()
    with torch.no_grad():
        init_loss = float(objective.loss_of_embeds(current.unsqueeze(0))[0])
    best, best_loss, best_step = current.clone(), init_loss, -1
    losses: list[float] = []
    for step in range(cfg.steps):
        current.requires_grad_(True)
        loss = objective.loss_of_embeds(current.unsqueeze(0))[0]
        (grad,) = torch.autograd.grad(loss, [current])
        with torch.no_grad():
            moved = current - step_abs * grad.sign()
            current = init + project(moved - init, cfg.norm, radius_abs)
            new_loss = float(objective.loss_of_embeds(current.unsqueeze(0))[0])
        losses.append(new_loss)
        if new_loss < best_loss:
            best, best_loss, best_step = current.clone(), new_loss, step
    deviation = best - init
    max_dev = float(deviation.abs().max() if cfg.norm == "linf" else deviation.norm(dim=-1).max())
    return SoftPromptResult(
        best_embeds=best.detach(),
        best_loss=best_loss,
        init_loss=init_loss,
        losses=tuple(losses),
        best_step=best_step,
        rms=rms,
        radius_abs=radius_abs,
        step_abs=step_abs,
        max_deviation=max_dev,
    )


@torch.no_grad()
def soft_prompt_input(
    model: PreTrainedModel,
    layout: SuffixLayout,
    vectors: torch.Tensor,
    start_ids: Sequence[int],
    extra: Mapping[str, object] | None = None,
) -> GenerationInput:
    """The generation input of an optimised soft prompt: the input embeddings [T, d] of ``[before][vectors]
    [after]`` (no target: the model must produce it itself), and the ids the vectors started at."""
    embed: Any = model.get_input_embeddings()
    device = embed.weight.device
    parts = [
        embed(torch.tensor(list(layout.before), dtype=torch.long, device=device)),
        vectors.to(device=device, dtype=embed.weight.dtype),
        embed(torch.tensor(list(layout.after), dtype=torch.long, device=device)),
    ]
    embeds = torch.cat(parts, dim=0)
    return GenerationInput(tuple(layout.prompt_ids(start_ids)), embeds=embeds, extra=dict(extra or {}))
