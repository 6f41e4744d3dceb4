"""RMU: misdirect one block's representation of the forget answers (docs/methods.md ``rmu.py``; Annex B.6).

On forget answers the output ``h`` of decoder block ``layer`` is pulled toward a fixed random vector
``c = steering_coeff * u / ||u||`` (``u ~ U[0, 1)^d``, drawn once in :meth:`RMU.setup` from the removal seed's
generator, so a resumed run draws the same ``c``; theirs comes from the global RNG); on retain answers it is
held to the frozen reference's output at the same block (``EMBED_DIFF``), or a plain NLL / KL retain term is
used. ``L = gamma * MSE_ans(h_f, c) + alpha * MSE_ans(h_r, h_r^ref)``, both MSEs from
:mod:`remnant.train.methods.rmu_loss` (``compat`` picks the reduction there; a KL retain term masks padding
unless ``compat="openunlearning"``).

Defaults are OpenUnlearning's shipped YAML: block 7, steering_coeff 2, gamma = alpha = 1, every parameter
trainable (``trainable=None``; their code default trains only ``model.layers.(5|6|7).mlp.down_proj`` — pass
those patterns as ``trainable`` to reproduce it; the original CAIS recipe used alpha ~1200 and steering 6.5).
Annex B.6 saw RMU diverge numerically at pilot settings on two of three families: a non-finite or exploding
loss is not an error here, the loop stops the run and records it as *diverged* with the step and reason.
"""

from __future__ import annotations

from typing import Any

import torch

from remnant.errors import ConfigError
from remnant.models.arch import resolve_parts
from remnant.models.forward_keywords import unwrapped
from remnant.models.hooks import capture_blocks
from remnant.registry import register
from remnant.train.methods.base import LossTerms, MethodBatch, RemovalMethod, StepContext
from remnant.train.methods.compat import check_compat
from remnant.train.methods.retain import add_retain, check_retain_type
from remnant.train.methods.rmu_loss import (
    answer_mask,
    broadcast_activation_mse,
    control_vector,
    masked_activation_mse,
)

_RETAIN_TYPES = ("EMBED_DIFF", "NLL", "KL")
_CONTROL_KEY = "rmu_control_vector"


def block_output(model: Any, layer: int, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Output of block ``layer`` for ``batch`` (``[B, T, D]``), with gradient when grad mode is on; the hook sits
    on the blocks of the model a peft LoRA wrapper forwards to (:func:`~remnant.models.forward_keywords.unwrapped`)."""
    with capture_blocks(unwrapped(model), [layer], detach=False) as kept:
        model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    return kept[layer]


@register("method", "rmu", "1")
class RMU(RemovalMethod):
    """Representation misdirection: forget activations to a scaled random vector, retain ones to the reference.

    compat: remnant averages per sequence; OpenUnlearning's [B]/[B,1] broadcast averages every sum over every count.
    """

    kind = "loss"
    formula = (
        "L = gamma*mean_b[sum_{t in ans} mean_d (h_l - c)^2 / n_ans] + alpha*(same MSE of h_l vs h_l^ref on retain), "
        "c = steering_coeff*u/|u|, u ~ U[0,1)^d"
    )
    source = "docs/methods.md (rmu.py, configs/trainer/RMU.yaml)"
    needs_reference = True

    def __init__(
        self,
        *,
        layer: int = 7,
        steering_coeff: float = 2.0,
        gamma: float = 1.0,
        alpha: float = 1.0,
        retain_loss_type: str = "EMBED_DIFF",
        compat: str = "remnant",
        **common: Any,
    ) -> None:
        super().__init__(**common)
        if layer < 0:
            raise ConfigError(f"rmu: layer must be a block index >= 0, not {layer}")
        if retain_loss_type not in _RETAIN_TYPES:
            raise ConfigError(
                f"rmu: retain_loss_type must be one of {_RETAIN_TYPES}, not {retain_loss_type!r}"
            )
        self.layer = layer
        self.steering_coeff = steering_coeff
        self.gamma = gamma
        self.alpha = alpha
        self.retain_loss_type = retain_loss_type
        self.compat = check_compat("rmu", compat)

    def _activation_mse(
        self, activations: torch.Tensor, target: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        if self.compat == "openunlearning":
            return broadcast_activation_mse(activations, target, mask)
        return masked_activation_mse(activations, target, mask)

    def setup(self, model: Any, ctx: StepContext) -> None:
        blocks = resolve_parts(unwrapped(model)).blocks
        if self.layer >= len(blocks):
            raise ConfigError(
                f"rmu: layer={self.layer} but the model has {len(blocks)} blocks (0..{len(blocks) - 1})"
            )
        dim = int(model.get_input_embeddings().embedding_dim)
        ctx.state[_CONTROL_KEY] = control_vector(dim, self.steering_coeff, ctx.generator)

    def loss(self, model: Any, batch: MethodBatch, ctx: StepContext) -> LossTerms:
        control = ctx.state.get(_CONTROL_KEY)
        if control is None:
            raise ValueError("rmu: setup() was not run, so there is no control vector")
        h_forget = block_output(model, self.layer, batch.forget)
        forget = self._activation_mse(
            h_forget, control.to(h_forget.device), answer_mask(batch.forget["labels"])
        )
        parts = {"forget": float(forget.detach())}
        total = self.gamma * forget
        if self.retain_loss_type == "EMBED_DIFF":
            if batch.retain is not None and self.alpha:
                h_retain = block_output(model, self.layer, batch.retain)
                with torch.no_grad():
                    h_ref = block_output(ctx.reference, self.layer, batch.retain)
                retain = self._activation_mse(h_retain, h_ref, answer_mask(batch.retain["labels"]))
                parts["retain"] = float(retain.detach())
                total = total + self.alpha * retain
        else:
            kind = check_retain_type("rmu", self.retain_loss_type)
            total = add_retain(total, parts, model, batch, ctx, self.alpha, kind, self.compat)
        return LossTerms(loss=total, parts=parts)


__all__ = ["RMU", "block_output"]
