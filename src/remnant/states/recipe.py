"""A *recipe*: everything that determines a model state's weights, and its digest (the state's content key).

A state is made from a base model by steps (an install, then a removal of that install) and any state can be read
under a perturbation (NF4, a relearned copy). The recipe names each input that changes the weights — the base
model's file digest, the pack digest, the attributes and prompt, the dtype, the step's settings (the removal
method's registered name, version and every parameter), its seed, the state it starts from, the position in the
run (``final`` or ``epoch=X``) and the perturbation's settings — and nothing else (not a pool's name, not which
metrics are measured), so two plans that declare the same state share one stored checkpoint and the state's digest
is known before it is built (R23). The digests are the ones the sweep's store has always used, so checkpoints
stored before the states layer existed keep their keys. Pure: no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

from remnant.statement.canonical import canonical_sha256

#: Bumped when the way a checkpoint is built changes, so stored checkpoints built the old way are not reused.
BUILD_VERSION = "1"

Step = Literal["base", "install", "removal", "folder"]


def checkpoint_key(job_key: str, checkpoint: str) -> str:
    """The content key of one stored checkpoint: its job's key and its position in the run."""
    return canonical_sha256({"job": job_key, "checkpoint": checkpoint, "build": BUILD_VERSION})


@dataclass(frozen=True)
class Recipe:
    """One state's recipe (module docstring): ``base``, the inputs every step shares; ``params``, the last step's
    settings (JSON); ``parent``, the digest of the state it starts from (None: the base model)."""

    base: dict[str, object]
    step: Step
    params: dict[str, object]
    parent: str | None = None
    checkpoint: str = "final"
    perturbation: dict[str, object] | None = None

    @property
    def job(self) -> str:
        """The key of the build job (one training run) that makes this state and its sibling checkpoints."""
        return canonical_sha256(
            {"kind": self.step, "parent": self.parent, "recipe": self.params, **self.base}
        )

    @property
    def digest(self) -> str:
        """The state's digest: its stored checkpoint's key, or (perturbed) the digest of that and the settings."""
        state = checkpoint_key(self.job, self.checkpoint)
        return state if self.perturbation is None else perturbed_state(state, self.perturbation)

    def at(self, checkpoint: str) -> Recipe:
        """The same run's state at another position (``final`` or ``epoch=X``)."""
        return replace(self, checkpoint=checkpoint)


def perturbed_state(state: str, perturbation: Mapping[str, object]) -> str:
    """The digest of state ``state`` read under ``perturbation`` (its settings, JSON)."""
    return canonical_sha256({"state": state, "perturbation": perturbation})


__all__ = ["BUILD_VERSION", "Recipe", "Step", "checkpoint_key", "perturbed_state"]
