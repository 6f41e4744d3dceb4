"""The declared relearning procedure of §4.2 (C-W1, C-W3, C-W5): its settings, its one seeded order, and κ by
teacher-forced greedy match.

Declared before the run (C-W1, R14): sample budgets, learning rate, epoch ceiling, and checkpoints inside the
first epoch (C-W3). For each budget ``b`` the first ``b`` examples of one seeded permutation of the relearning
set (nested subsets, :func:`relearn_order`) fine-tune a copy of each state under the identical procedure
(:func:`remnant.states.perturb.relearned_copy`): same examples, order, seed, hyper-parameters, checkpoints and
scorer (C-W5).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import torch

from remnant.errors import ConfigError
from remnant.models.prompts import EncodedPair, PromptFormat, encode_pair
from remnant.train.loop import TrainConfig, TrainerSettings, make_generator
from remnant.train.methods.base import QA

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

Scorer = Callable[["PreTrainedModel"], tuple[int, int]]
Utility = Callable[["PreTrainedModel"], float]
Arm = Literal["held_out", "scored_items"]


@dataclass(frozen=True, kw_only=True)
class RelearnSpec(TrainerSettings):
    """The declared relearning procedure (C-W1, C-W3). Defaults: docs/latent.md harness defaults."""

    budgets: tuple[int, ...] = (8, 16, 32, 64)
    lr: float = 2e-5
    epochs: int = 1
    checkpoint_epochs: tuple[float, ...] = (0.25, 0.5, 0.75)
    tau: float = 0.5
    level: float = 0.95
    seed: int = 0

    def __post_init__(self) -> None:
        if (
            not self.budgets
            or any(b < 1 for b in self.budgets)
            or list(self.budgets) != sorted(set(self.budgets))
        ):
            raise ConfigError("relearn: budgets must be increasing positive example counts (C-W1)")
        if any(not 0 < f < 1 for f in self.checkpoint_epochs):
            raise ConfigError("relearn: checkpoints inside the first epoch are fractions in (0, 1) (C-W3)")

    def train_config(self, progress: bool, desc: str) -> TrainConfig:
        return self.trainer_config(
            lr=self.lr,
            epochs=self.epochs,
            seed=self.seed,
            progress=progress,
            desc=desc,
            checkpoint_epochs=self.checkpoint_epochs,
            score_at_start=True,
        )


def relearn_order(seed: int, size: int) -> tuple[int, ...]:
    """The one seeded permutation of a relearning set of ``size`` examples; budget b takes its first b (C-W1:
    nested subsets). Every state relearns in this order (C-W5)."""
    return tuple(torch.randperm(size, generator=make_generator(seed, "relearn-subset")).tolist())


def relearn_budgets(spec: RelearnSpec, size: int) -> tuple[int, ...]:
    """The declared budgets a relearning set of ``size`` examples can supply (C-W1)."""
    return tuple(b for b in spec.budgets if b <= size)


def greedy_scorer(
    tokenizer: PreTrainedTokenizerBase, items: Sequence[QA], fmt: PromptFormat, batch_size: int = 32
) -> Scorer:
    """κ on ``items`` by teacher-forced greedy match: (correct, total)."""
    return pairs_scorer([encode_pair(tokenizer, q.question, q.answer, fmt) for q in items], batch_size)


def pairs_scorer(pairs: Sequence[EncodedPair], batch_size: int = 32) -> Scorer:
    """κ on already encoded ``pairs`` by teacher-forced greedy match: (correct, total)."""
    from remnant.score.capability import greedy_match

    def score(model: PreTrainedModel) -> tuple[int, int]:
        hits = greedy_match(model, pairs, batch_size=batch_size)
        return sum(hits), len(hits)

    return score


__all__ = [
    "Arm",
    "RelearnSpec",
    "Scorer",
    "Utility",
    "greedy_scorer",
    "pairs_scorer",
    "relearn_budgets",
    "relearn_order",
]
