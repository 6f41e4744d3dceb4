"""Direction survival (Standard Annex B.3; deprecated C-H1–C-H4 kept for reference). Non-adjudicating (C-H6).

Procedure (B.3): at layer ℓ and token position p, the direction is the mean activation difference, installed
minus never-modified, over the probe inputs; it is frozen. Every other state's mean difference from the
never-modified model on **identical** inputs is projected onto it, normalised so the installed model reads 1:
``survival_s = mean_i ⟨a_s(x_i) − a_0(x_i), u⟩ / ⟨u, u⟩``, with a percentile-bootstrap interval over probe
inputs (``remnant.stats.percentile_bootstrap``) and, per cell, the signature ‖u‖ against a sign-flip permutation
floor. It is reported across at least three layers and two positions (the deprecated C-H4 grid; whether the
grid was met is recorded), and for both control states of C-H7(c): the procedure control (removal applied to a
never-installed model) and the content control (the content-shuffled twin installed). For each control, the
interval is compared with a margin of zero declared beforehand (Annex B.6 used δ = 0.10); that comparison is a
reading, not a gate: the Standard's study found these nulls fail, which is why this figure never adjudicates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field

from remnant.latent.cache import model_digest
from remnant.models.arch import resolve_parts
from remnant.models.hooks import block_outputs
from remnant.stats import percentile_bootstrap

if TYPE_CHECKING:
    from transformers import PreTrainedModel

Role = Literal["removed", "procedure_control", "content_control", "other"]
CONTROL_ROLES: tuple[Role, Role] = ("procedure_control", "content_control")


@dataclass(frozen=True)
class DirectionConfig:
    """Grid and statistics settings (declare them before the run: margin and seed are pre-registered values)."""

    layers: tuple[int, ...] | None = None
    positions: tuple[str, ...] = ("last", "mean")
    n_resamples: int = 2000
    n_permutations: int = 1000
    level: float = 0.95
    margin: float = 0.10
    seed: int = 0

    def resolve_layers(self, model: PreTrainedModel) -> list[int]:
        """Three depths (early, mid, late: 25/50/75 % of the stack) unless given."""
        if self.layers is not None:
            return list(self.layers)
        n = len(resolve_parts(model).blocks)
        return sorted({round(f * (n - 1)) for f in (0.25, 0.5, 0.75)})


def _pick(h: torch.Tensor, position: str) -> torch.Tensor:
    """Row of a [T, d] activation: ``last``, ``mean`` (over prompt tokens) or a negative offset ``-k``."""
    if position == "last":
        return h[-1]
    if position == "mean":
        return h.mean(dim=0)
    offset = int(position)
    if offset >= 0:
        raise ValueError(f"direction survival: position {position!r} must be last, mean or a negative offset")
    return h[offset]


@torch.no_grad()
def activations(
    model: PreTrainedModel, prompts: Sequence[Sequence[int]], layers: Sequence[int], positions: Sequence[str]
) -> dict[tuple[int, str], np.ndarray]:
    """Block outputs (hooks) of ``model`` on each prompt at each (layer, position): {cell: [n_prompts, d]}."""
    rows: dict[tuple[int, str], list[np.ndarray]] = {(la, p): [] for la in layers for p in positions}
    for ids in prompts:
        captured = block_outputs(model, ids, layers)
        for layer in layers:
            for p in positions:
                rows[(layer, p)].append(_pick(captured[layer][0].float(), p).cpu().numpy().astype(np.float64))
    return {cell: np.stack(v) for cell, v in rows.items()}


class SurvivalFigure(BaseModel):
    """Survival of the frozen direction in one state at one (layer, position)."""

    model_config = ConfigDict(extra="forbid")

    state: str = Field(description="Model state name.")
    role: str = Field(description="installed, removed, procedure_control, content_control or other.")
    layer: int = Field(description="Block index.")
    position: str = Field(description="Token position (last, mean or a negative offset).")
    survival: float = Field(description="Projection on the frozen direction; installed = 1.")
    ci95: tuple[float, float] = Field(description="Percentile-bootstrap interval over probe inputs.")
    within_margin: bool | None = Field(
        description="Controls only: interval wholly inside ±margin (the deprecated C-H3 equivalence reading)."
    )


class SignatureFigure(BaseModel):
    """Signature magnitude at one cell against its permutation floor (B.3 step 3)."""

    model_config = ConfigDict(extra="forbid")

    layer: int = Field(description="Block index.")
    position: str = Field(description="Token position.")
    magnitude: float = Field(description="‖u‖: norm of the mean installed-minus-never-modified difference.")
    permutation_floor: float = Field(description="Level-quantile of ‖u‖ under random sign flips of the rows.")


class DirectionResult(BaseModel):
    """Direction survival over the grid, with its reference and control states (C-H7 b, c)."""

    model_config = ConfigDict(extra="forbid")

    measurement: Literal["direction_survival"] = Field(default="direction_survival", description="Name.")
    reference: str = Field(description="Weights digest of the never-modified model (C-H7b).")
    installed: str = Field(description="Weights digest of the installed model (direction source).")
    states: dict[str, str] = Field(description="Other states: name -> weights digest.")
    roles: dict[str, str] = Field(description="Other states: name -> role.")
    layers: list[int] = Field(description="Layers read.")
    positions: list[str] = Field(description="Positions read.")
    n_prompts: int = Field(description="Probe inputs (identical for every state).")
    margin: float = Field(description="Declared equivalence margin for the control readings.")
    controls_run: bool = Field(description="Both C-H3 control states were measured (C-H7c).")
    grid_met: bool = Field(description="At least three layers and two positions (deprecated C-H4 grid).")
    figures: list[SurvivalFigure] = Field(description="Per state and cell.")
    signatures: list[SignatureFigure] = Field(description="Per cell.")
    provenance: str = Field(description="Procedure provenance.")


def within_margin(ci95: tuple[float, float], margin: float) -> bool:
    """Equivalence to zero (Annex B.3's control null): the whole interval ``ci95`` inside (−margin, margin)."""
    return -margin < ci95[0] and ci95[1] < margin


def _floor(diffs: np.ndarray, rng: np.random.Generator, n: int, level: float) -> float:
    draws = np.empty(n)
    for i in range(n):
        signs = rng.choice(np.array([-1.0, 1.0]), size=diffs.shape[0])
        draws[i] = np.linalg.norm((signs[:, None] * diffs).mean(axis=0))
    return float(np.quantile(draws, level))


def direction_survival(
    never_modified: PreTrainedModel,
    installed: PreTrainedModel,
    states: Mapping[str, Any],
    roles: Mapping[str, Role],
    prompts: Sequence[Sequence[int]],
    cfg: DirectionConfig | None = None,
) -> DirectionResult:
    """Annex B.3 over the grid for every state in ``states`` (each with a role)."""
    cfg = cfg or DirectionConfig()
    if set(states) != set(roles):
        raise ValueError("direction survival: every state needs exactly one role")
    layers = cfg.resolve_layers(installed)
    positions = list(cfg.positions)
    ref = activations(never_modified, prompts, layers, positions)
    inst = activations(installed, prompts, layers, positions)
    others = {name: activations(m, prompts, layers, positions) for name, m in states.items()}
    rng = np.random.default_rng(cfg.seed)
    figures: list[SurvivalFigure] = []
    signatures: list[SignatureFigure] = []
    for cell in ref:
        diff_inst = inst[cell] - ref[cell]
        u = diff_inst.mean(axis=0)
        norm2 = float(u @ u)
        signatures.append(
            SignatureFigure(
                layer=cell[0],
                position=cell[1],
                magnitude=float(np.sqrt(norm2)),
                permutation_floor=_floor(diff_inst, rng, cfg.n_permutations, cfg.level),
            )
        )
        for name, acts, role in [
            ("installed", inst, "installed"),
            *[(n, others[n], roles[n]) for n in states],
        ]:
            proj = (acts[cell] - ref[cell]) @ u / norm2 if norm2 > 0 else np.zeros(len(prompts))
            est, lo, hi = percentile_bootstrap(proj, np.mean, rng, cfg.n_resamples, cfg.level)
            within = within_margin((lo, hi), cfg.margin) if role in CONTROL_ROLES else None
            figures.append(
                SurvivalFigure(
                    state=name,
                    role=role,
                    layer=cell[0],
                    position=cell[1],
                    survival=est,
                    ci95=(lo, hi),
                    within_margin=within,
                )
            )
    return DirectionResult(
        reference=model_digest(never_modified),
        installed=model_digest(installed),
        states={name: model_digest(m) for name, m in states.items()},
        roles=dict(roles),
        layers=layers,
        positions=positions,
        n_prompts=len(prompts),
        margin=cfg.margin,
        controls_run=all(r in roles.values() for r in CONTROL_ROLES),
        grid_met=len(layers) >= 3 and len(positions) >= 2,
        figures=figures,
        signatures=signatures,
        provenance="[V] Standard Annex B.3 mean-difference direction; demoted to non-adjudicating (B.6, C-H6)",
    )


__all__ = [
    "CONTROL_ROLES",
    "DirectionConfig",
    "DirectionResult",
    "SignatureFigure",
    "SurvivalFigure",
    "activations",
    "direction_survival",
    "within_margin",
]
