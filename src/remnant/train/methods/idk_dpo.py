"""IdkDPO: prefer a refusal over the forget answer, against the frozen reference (docs/methods.md, ``dpo.py``).

``L_f = -(2/beta) * mean log sigmoid(beta * [r(y_idk|x) - r(y_f|x)])`` with ``r`` the answer log-ratio against
the starting model and ``y_idk`` drawn from the IDK bank per visit (``QAwithIdkDataset``);
``L = gamma * L_f + alpha * L_retain``. Defaults beta = 0.1, gamma = 1, alpha = 1, NLL retain. ``compat``: the
preference term is the same; the KL retain term masks padding (remnant) or averages over all B·T positions
(OpenUnlearning).
"""

from __future__ import annotations

from typing import Any

from remnant.registry import register
from remnant.train.methods.idk import IDK_BANK_VERSION, bank_digest, check_idk_bank
from remnant.train.methods.preference import PreferenceMethod


@register("method", "idk_dpo", "1")
class IdkDPO(PreferenceMethod):
    """DPO with a refusal preferred and the forget answer rejected (compat: only the KL retain term differs)."""

    kind = "loss"
    formula = (
        "L = gamma*(-(2/beta)*mean log sigmoid(beta*(r(y_idk|x) - r(y_f|x)))) + alpha*L_retain, "
        "r = log pi - log pi_ref over answer tokens"
    )
    needs_alternates = "idk"
    missing = "idk_dpo: needs IDK answers and the reference model"

    def __init__(
        self,
        *,
        beta: float = 0.1,
        gamma: float = 1.0,
        alpha: float = 1.0,
        retain_loss_type: str = "NLL",
        compat: str = "remnant",
        idk_bank: str = f"remnant-idk-v{IDK_BANK_VERSION}",
        **common: Any,
    ) -> None:
        super().__init__(**common)
        self._set_beta("idk_dpo", beta)
        self.idk_bank = check_idk_bank("idk_dpo", idk_bank)
        self._set_weights("idk_dpo", gamma, alpha, retain_loss_type, compat)
        self.idk_bank_digest = bank_digest()


__all__ = ["IdkDPO"]
