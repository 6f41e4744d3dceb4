"""WGA: weighted gradient ascent, each forget token weighted by its own probability (docs/methods.md).

OpenUnlearning's ``wga.py`` / ``compute_wga_loss`` (Wang et al. 2025, "Rethinking LLM Unlearning Objectives"):
per answer token ``ℓ_t = CE_t`` and ``w_t = exp(−ℓ_t)^β = p_t^β`` (detached), ``L_f = −mean_t w_t·ℓ_t`` over
every answer token of the batch (:func:`remnant.train.losses.reweighted_ascent`): ascent concentrates on tokens
the model still predicts confidently. ``L = γ·L_f + α·L_retain``. Defaults from ``configs/trainer/WGA.yaml``:
β=1, γ=1, α=1, NLL retain, lr 1e-5, 5 epochs (their TOFU experiment file, merged after the trainer file, sets
10 epochs; pass ``epochs`` to match it). Their trainer builds a reference model it never uses; ours builds one
only for a KL retain term. ``compat``: the forget term is the same; a KL retain term masks padding (remnant) or
averages over all B·T positions (OpenUnlearning).
"""

from __future__ import annotations

from typing import Any

import torch

from remnant.registry import register
from remnant.train.methods.retain import ReweightedAscent


@register("method", "wga", "1")
class WGA(ReweightedAscent):
    """Weighted gradient ascent: −mean p_t^beta · CE_t on forget answers (compat: only the KL retain term differs)."""

    kind = "loss"
    formula = "L = gamma*(-mean_{t in ans} w_t*CE_t) + alpha*L_retain, w_t = p_t^beta (detached)"
    source = "docs/methods.md (WGA: wga.py, compute_wga_loss, configs/trainer/WGA.yaml)"

    def __init__(
        self,
        *,
        beta: float = 1.0,
        gamma: float = 1.0,
        alpha: float = 1.0,
        retain_loss_type: str = "NLL",
        compat: str = "remnant",
        epochs: float = 5,
        **common: Any,
    ) -> None:
        super().__init__(epochs=epochs, **common)
        self.beta = beta
        self._set_weights("wga", gamma, alpha, retain_loss_type, compat)

    def _weight(self, p: torch.Tensor) -> torch.Tensor:
        return p**self.beta


__all__ = ["WGA"]
