"""SatImp: gradient ascent reweighted by saturation and importance (docs/methods.md, ``satimp.py``).

OpenUnlearning's ``compute_satimp_loss`` (Yang et al. 2025, "Exploring Criteria of Loss Reweighting to Enhance
LLM Unlearning"): per answer token ``p_t = exp(−CE_t)`` and ``w_t = p_t^β1·(1 − p_t)^β2`` (detached),
``L_f = −mean_t w_t·CE_t`` over every answer token of the batch (:func:`remnant.train.losses.reweighted_ascent`);
``L = γ·L_f + α·L_retain``. Defaults from ``configs/trainer/SatImp.yaml``: β1=5, β2=1, γ=0.1, α=1, NLL retain,
lr 1e-5, 5 epochs. Their code defaults and README say γ=1, α=0.1 instead (the paper's ES-first setting); the
shipped YAML is what a run of their tool gets, so it is ours (their TOFU experiment file sets 10 epochs).
``compat``: the forget term is the same; a KL retain term masks padding (remnant) or averages over all B·T
positions (OpenUnlearning).
"""

from __future__ import annotations

from typing import Any

import torch

from remnant.registry import register
from remnant.train.methods.retain import ReweightedAscent


@register("method", "satimp", "1")
class SatImp(ReweightedAscent):
    """Saturation-importance reweighted ascent (compat: only the KL retain term differs)."""

    kind = "loss"
    formula = (
        "L = gamma*(-mean_{t in ans} w_t*CE_t) + alpha*L_retain, w_t = p_t^beta1 * (1-p_t)^beta2 (detached)"
    )
    source = "docs/methods.md (SatImp: satimp.py, compute_satimp_loss, configs/trainer/SatImp.yaml)"

    def __init__(
        self,
        *,
        beta1: float = 5.0,
        beta2: float = 1.0,
        gamma: float = 0.1,
        alpha: float = 1.0,
        retain_loss_type: str = "NLL",
        compat: str = "remnant",
        epochs: float = 5,
        **common: Any,
    ) -> None:
        super().__init__(epochs=epochs, **common)
        self.beta1 = beta1
        self.beta2 = beta2
        self._set_weights("satimp", gamma, alpha, retain_loss_type, compat)

    def _weight(self, p: torch.Tensor) -> torch.Tensor:
        return p**self.beta1 * (1.0 - p) ** self.beta2


__all__ = ["SatImp"]
