"""Task-vector negation (Ilharco et al. 2023; Annex B.6): subtract a scaled weight difference.

``θ_U = θ − s·τ``. With ``source="install"`` (default) ``τ = θ_installed − θ_control``: the model being
removed from minus the never-modified control (needs the control; with s=1 and an install set that held only
the target, this restores the control exactly). With ``source="finetune"`` ``τ = θ_ft − θ`` where ``θ_ft`` is
``θ`` fine-tuned further on the forget set for ``finetune_epochs`` at the method's lr (the original recipe,
which needs no control and moves a never-installed model too: the procedure control of Annex B).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from remnant.errors import ConfigError
from remnant.registry import register
from remnant.train.loop import TrainOutcome
from remnant.train.methods.base import ProcedureContext, RemovalMethod


@register("method", "task_vector", "1")
class TaskVectorNegation(RemovalMethod):
    """Negate a task vector: installed-minus-control, or fine-tuned-minus-start."""

    kind = "procedure"
    needs_control = True  # the default source, the install; an instance from a fine-tune sets False
    formula = "theta_U = theta - scale*tau; tau = theta_installed - theta_control | theta_ft(forget) - theta"
    source = "Ilharco et al. 2023 (task arithmetic); Standard Annex B.6"

    def __init__(
        self,
        *,
        scale: float = 1.0,
        vector_source: str = "install",
        finetune_epochs: float = 5.0,
        lr: float = 1e-5,
        **common: Any,
    ) -> None:
        super().__init__(lr=lr, **common)
        if vector_source not in ("install", "finetune"):
            raise ConfigError(
                f"task_vector: vector_source must be 'install' or 'finetune', not {vector_source!r}"
            )
        self.scale = scale
        self.vector_source = vector_source
        self.needs_control = vector_source == "install"
        self.finetune_epochs = finetune_epochs

    def run(self, ctx: ProcedureContext) -> TrainOutcome:
        start = {n: p.detach().clone() for n, p in ctx.model.named_parameters()}
        outcome: TrainOutcome
        if self.vector_source == "install":
            if ctx.control is None:
                raise ConfigError("task_vector with vector_source='install' needs the never-modified control")
            control = dict(ctx.control.named_parameters())
            missing = sorted(set(start) - set(control))
            if missing:
                raise ConfigError(
                    f"task_vector: control lacks parameter {missing[0]!r} (different architecture)"
                )
            tau = {n: start[n] - control[n].detach().to(start[n].dtype) for n in start}
            outcome = TrainOutcome(  # arithmetic only: nothing trained
                status="completed",
                steps=0,
                total_steps=0,
                steps_per_epoch=0,
                losses=(),
                initial_loss=None,
                checkpoints=(),
            )
        else:
            # Fine-tune the model itself on the forget set (same loop, checkpoints, seed), then negate.
            outcome = ctx.train(list(ctx.data.forget), replace(ctx.config, epochs=self.finetune_epochs))
            if outcome.diverged:
                return outcome
            tuned = dict(ctx.model.named_parameters())
            tau = {n: tuned[n].detach() - start[n] for n in start}
        with torch.no_grad():
            for name, p in ctx.model.named_parameters():
                p.copy_(start[name] - self.scale * tau[name])
        return outcome
