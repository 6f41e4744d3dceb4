"""Retraining from the control on retain only: the exact-unlearning reference (docs/methods.md).

``θ_U = fine-tune(θ_control, retain)``: the model's weights are replaced by the never-modified control's and
fine-tuned on the retain items alone with the method's training parameters (which should match the install
recipe), so the target was never seen. Defaults: the shared finetune defaults.
"""

from __future__ import annotations

import torch

from remnant.errors import ConfigError
from remnant.registry import register
from remnant.train.loop import TrainOutcome
from remnant.train.methods.base import ProcedureContext, RemovalMethod


@register("method", "retrain", "1")
class Retrain(RemovalMethod):
    """Start again from the control and fine-tune on retain only."""

    kind = "procedure"
    formula = "theta_U = finetune(theta_control, retain) (answer-only NLL)"
    source = "exact-unlearning reference; training defaults docs/methods.md"
    needs_control = True

    def run(self, ctx: ProcedureContext) -> TrainOutcome:
        if ctx.control is None:
            raise ConfigError("retrain needs the never-modified control model")
        if not ctx.data.retain:
            raise ConfigError("retrain needs a retain set to train on")
        control = dict(ctx.control.named_parameters())
        with torch.no_grad():
            for name, p in ctx.model.named_parameters():
                if name not in control:
                    raise ConfigError(f"retrain: control lacks parameter {name!r} (different architecture)")
                p.copy_(control[name].detach().to(p.dtype))
        outcome: TrainOutcome = ctx.train(list(ctx.data.retain), ctx.config)
        return outcome
