"""Relearning measurements: one budget of the declared relearning procedure on one state (C-W1..C-W6).

Every state goes through :meth:`RelearnPlan.relearn` (the one relearned copy) with the same plan — one seeded
order of the relearning set (budget b takes its first b, nested subsets), the same hyper-parameters,
checkpoints inside the first epoch and scorer (C-W5) — so the post-removal model and the control are measured
identically. P is scored at step 0 (the state itself: its unattacked baseline is reused, greedy decoding being
deterministic) and at every checkpoint (C-W3); a diverged curve is a ``diverged`` record (Annex B.6). With
utility metrics, the relearned copy's utility is read once training ends (attack stage, R12, C-W4).

A checkpoint's records carry its budget, step, epoch and examples seen as typed fields (C-W3), and the label
(:func:`remnant.standard.derive.checkpoint_label`) that the statement's cells show; the diverged record and the
relearned copy's utility readings carry the budget too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

from remnant.engine.attack import context_inputs, score_outcomes
from remnant.engine.cell import CellFields, CellTarget, status_record
from remnant.engine.measurement import Measurement, Record, State, loaded
from remnant.engine.utility import UtilityMeasurement
from remnant.standard.derive import checkpoint_label

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from remnant.attacks.base import AttackContext, ItemOutcome
    from remnant.models.prompts import PromptFormat
    from remnant.score.probe import Probe
    from remnant.train.loop import CheckpointPoint, TrainOutcome
    from remnant.train.relearn import RelearnSpec


class QAItem(Protocol):
    """A relearning example as the plan reads it (a pack item or a QA pair)."""

    @property
    def question(self) -> str: ...

    @property
    def answer(self) -> str: ...


def checkpoint_fields(budget: int, point: CheckpointPoint) -> CellFields:
    """Where a relearning checkpoint was scored (C-W3): budget, optimiser step, epochs done and examples seen."""
    return {
        "budget": budget,
        "step": point.step,
        "epoch": point.epoch,
        "examples": round(point.epoch * budget),
    }


@dataclass(frozen=True)
class RelearnPlan:
    """The declared relearning procedure of one arm (C-W1, C-W3, C-W5): what every state goes through."""

    arm: str
    spec: RelearnSpec
    relearn_set: tuple[QAItem, ...]  # in the pack's order
    order: tuple[int, ...]  # relearn_order: budget b uses its first b (nested subsets, C-W1)
    utility_at_end: bool

    def chosen(self, budget: int) -> tuple[int, ...]:
        return self.order[:budget]

    def examples(self, budget: int) -> list[tuple[str, str]]:
        """The (question, answer) pairs budget ``budget`` relearns on, in order (hashed into the key)."""
        return [(self.relearn_set[i].question, self.relearn_set[i].answer) for i in self.chosen(budget)]

    def spec_inputs(self) -> dict[str, object]:
        return {k: v for k, v in asdict(self.spec).items() if k != "budgets"}

    def relearn(
        self,
        state: State,
        budget: int,
        fmt: PromptFormat,
        *,
        label: str,
        progress: bool,
        on_checkpoint: Callable[[PreTrainedModel, CheckpointPoint], dict[str, object]],
    ) -> tuple[TrainOutcome, PreTrainedModel]:
        """The relearned copy of ``state`` at ``budget`` (C-W1, C-W5): the plan's first ``budget`` examples,
        encoded in ``fmt``, fine-tuned under the plan's spec from a copy of the state (never the state itself),
        ``on_checkpoint`` called at step 0 and every declared checkpoint (C-W3). Every relearning measurement
        relearns through here."""
        from remnant.models.prompts import encode_pair
        from remnant.states.perturb import relearned_copy

        pairs = [encode_pair(state.tokenizer, q, a, fmt) for q, a in self.examples(budget)]
        return relearned_copy(
            state.model,
            state.tokenizer,
            pairs,
            self.spec,
            label=label,
            progress=progress,
            on_checkpoint=on_checkpoint,
        )


class RelearningMeasurement(Measurement):
    """P scored along the relearning curve of one budget (module docstring)."""

    kind: ClassVar[str] = "relearning"
    surface = "relearning"

    def __init__(
        self,
        plan: RelearnPlan,
        budget: int,
        ctx: AttackContext,
        probes: Sequence[Probe],
        inputs: Mapping[str, object],
        *,
        utility: Sequence[UtilityMeasurement] = (),
        step0: Callable[[str], Sequence[ItemOutcome] | None] | None = None,
        progress: bool = False,
    ) -> None:
        self.plan = plan
        self.budget = budget
        self.ctx = ctx
        self.probes = tuple(probes)
        self.name = plan.arm
        self.utility = tuple(utility)
        self.step0 = step0
        self.progress = progress
        self._inputs = dict(inputs)

    def key_inputs(self) -> dict[str, object]:
        return {
            "arm": self.plan.arm,
            "budget": self.budget,
            "spec": self.plan.spec_inputs(),
            "examples": self.plan.examples(self.budget),
            "utility": [u.metric_name for u in self.utility],
            "context": context_inputs(self.ctx),
            **self._inputs,
        }

    def label(self, role: str) -> str:
        return f"{self.plan.arm} b={self.budget} on {role}"

    def measure(self, state: State | None, target: CellTarget) -> list[Record]:
        from remnant.attacks.base import no_attack

        state = loaded(state, self)
        tok, spec, budget = state.tokenizer, self.plan.spec, self.budget
        reused = self.step0(state.role) if self.step0 is not None else None
        records: list[Record] = []
        start = time.perf_counter()

        def on_checkpoint(model: PreTrainedModel, point: CheckpointPoint) -> dict[str, object]:
            if point.step == 0 and reused is not None:
                outcomes = list(reused)
            else:
                outcomes = no_attack(self.ctx.with_model(model, tok), list(self.probes))
            label = checkpoint_label(budget, point.step)
            elapsed = time.perf_counter() - start
            fields = checkpoint_fields(budget, point)
            records.extend(score_outcomes(target, label, spec.seed, outcomes, self.probes, fields, elapsed))
            return {"k": sum(bool(o.kappa) for o in outcomes), "n": len(outcomes)}

        run_label = self.label(state.role)
        outcome, model = self.plan.relearn(
            state, budget, self.ctx.fmt, label=run_label, progress=self.progress, on_checkpoint=on_checkpoint
        )
        if outcome.status == "diverged":
            reason = f"step {outcome.diverged_step}: {outcome.reason}"
            records.append(
                status_record(
                    target,
                    status="diverged",
                    reason=reason,
                    elapsed=outcome.seconds,
                    checkpoint=checkpoint_label(budget, "diverged"),
                    fields={"budget": budget},
                )
            )
        as_utility = target.retarget(surface="utility")
        for metric in self.utility:
            records.append(metric.read(model, state, as_utility, checkpoint_label(budget, "final"), budget))
        del model
        return records


__all__ = ["RelearnPlan", "RelearningMeasurement", "checkpoint_fields"]
