"""Installation (R2): fine-tune the control on the install split until the target is present to a declared level.

Capability on the installed items is the teacher-forced greedy match κ (``remnant.score.capability``), scored
before training (the control's κ, which R5 wants near zero) and at the end of every epoch; training stops once
κ reaches ``target`` or the epoch budget runs out. An install that runs every epoch (``stop_at_target=False``)
has nothing to decide at the epochs between: it is scored before training and after its last epoch only (each
scoring is a forward pass over every installed item). The result records the strength reached (κ, k/n, epochs,
steps) so the target's presence and extent are known before removal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from remnant.config.models import InstallBudget
from remnant.models.prompts import PromptFormat, encode_pair, pad_id
from remnant.train.loop import (
    CheckpointPoint,
    TrainerSettings,
    TrainOutcome,
    merge_lora,
    prepare_model,
    train,
)
from remnant.train.methods.base import QA
from remnant.train.objectives import PairsObjective
from remnant.train.relearn import pairs_scorer


@dataclass(frozen=True, kw_only=True)
class InstallSpec(TrainerSettings):
    """The declared installation recipe and stopping level (fixed before the run, R14)."""

    target: float = 0.9
    max_epochs: int = 20
    lr: float = 1e-4
    #: Stop once κ reaches ``target``; False runs every epoch, scored before the first and after the last only
    #: (R2 reads κ after the last one either way).
    stop_at_target: bool = True

    @classmethod
    def from_budget(cls, budget: InstallBudget) -> InstallSpec:
        """The spec an assessment config's ``[models.pre_removal.install]`` declares (R2, R14)."""
        return cls(
            target=budget.target_kappa,
            max_epochs=budget.max_epochs,
            lr=budget.lr,
            batch_size=budget.batch_size,
            trainable=tuple(budget.trainable) if budget.trainable is not None else None,
            stop_at_target=budget.stop_at_target is not False,
        )


@dataclass(frozen=True)
class InstallResult:
    """Strength reached (R2): κ on the installed items, the control's κ before training, epochs and steps."""

    reached: bool
    target: float
    kappa: float
    k: int
    n: int
    control_kappa: float
    epochs: float
    steps: int
    curve: tuple[tuple[float, float], ...]
    outcome: TrainOutcome

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["outcome"] = self.outcome.to_dict()
        return d


def install(
    model: Any,
    tokenizer: Any,
    items: Sequence[QA],
    spec: InstallSpec,
    *,
    seed: int,
    fmt: PromptFormat | None = None,
    score_batch_size: int = 32,
    progress: bool = False,
    checkpoint_dir: str | Path | None = None,
    resume: bool = False,
) -> tuple[Any, InstallResult]:
    """Install ``items`` into ``model`` (in place; LoRA merged) and return it with the strength reached."""
    fmt = fmt or PromptFormat.for_tokenizer(tokenizer)
    pairs = [encode_pair(tokenizer, q.question, q.answer, fmt) for q in items]
    score = pairs_scorer(pairs, score_batch_size)  # the pairs it trains on, encoded once

    def on_checkpoint(m: Any, point: CheckpointPoint) -> dict[str, Any]:
        if not (spec.stop_at_target or point.step == 0 or point.epoch >= spec.max_epochs):
            return {}  # a fixed-epoch install reads κ before training (R5) and after its last epoch (R2) only
        k, n = score(m)
        kappa = k / n
        return {
            "k": k,
            "n": n,
            "kappa": kappa,
            "stop": spec.stop_at_target and point.step > 0 and kappa >= spec.target,
        }

    config = spec.trainer_config(
        lr=spec.lr, epochs=spec.max_epochs, seed=seed, progress=progress, desc="install", score_at_start=True
    )
    wrapped = prepare_model(model, config)
    outcome = train(
        wrapped,
        PairsObjective(pairs, pad_id(tokenizer)),
        config,
        on_checkpoint=on_checkpoint,
        checkpoint_dir=checkpoint_dir,
        resume=resume,
    )
    model = merge_lora(wrapped)
    model.eval()
    scored = [c for c in outcome.checkpoints if "kappa" in c.scores]
    curve = tuple((c.epoch, float(c.scores["kappa"])) for c in scored)
    last = scored[-1].scores if scored else {"k": 0, "n": len(pairs), "kappa": 0.0}
    result = InstallResult(
        reached=float(last["kappa"]) >= spec.target and not outcome.diverged,
        target=spec.target,
        kappa=float(last["kappa"]),
        k=int(last["k"]),
        n=int(last["n"]),
        control_kappa=curve[0][1] if curve else 0.0,
        epochs=outcome.epochs_done,
        steps=outcome.steps,
        curve=curve,
        outcome=outcome,
    )
    return model, result


__all__ = ["InstallResult", "InstallSpec", "install"]
