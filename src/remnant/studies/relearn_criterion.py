"""The studies' relearning criterion (§4.2, C-W2, C-W5, C-W6): the post-removal model AND the control relearned
identically, their recovery curves compared.

For each declared budget ``b`` both states are relearned through :meth:`remnant.engine.relearning.RelearnPlan.relearn`
(the one relearned copy, the same plan the assessment uses): the first ``b`` examples of one seeded permutation of
the relearning set (nested subsets), the same hyper-parameters, checkpoints and scorer (C-W5). P is scored at
step 0 and at every checkpoint on both; both curves are kept (k, n per checkpoint per model).

Headline (C-W2): the smallest budget at which the post-removal model's recovery exceeds the control's — by the
threshold rule (at some checkpoint the post-removal rate reaches τ while the control's, at the same checkpoint,
stays below τ: V1's point rule), and, as a supplementary figure, by the lower bound of the Newcombe difference
interval being above zero (Annex F.9). The relearning set must be disjoint from P (C-W6); an arm that relearns on
the scored items themselves is available and marked non-adjudicating.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from remnant.engine.measurement import StateView
from remnant.engine.relearning import RelearnPlan
from remnant.errors import ConfigError
from remnant.models.prompts import PromptFormat
from remnant.stats import newcombe_difference
from remnant.train.relearn import Arm, RelearnSpec, Scorer, greedy_scorer, relearn_order

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from remnant.train.loop import CheckpointPoint
    from remnant.train.methods.base import QA


@dataclass(frozen=True)
class CurvePoint:
    """P scored at one checkpoint of one model (k of n)."""

    step: int
    epoch: float
    k: int
    n: int
    loss: float | None = None

    @property
    def rate(self) -> float:
        return self.k / self.n if self.n else 0.0


@dataclass(frozen=True)
class Curve:
    """One model's recovery curve under one budget; ``status`` is completed or diverged."""

    model: Literal["post_removal", "control"]
    points: tuple[CurvePoint, ...]
    status: str = "completed"
    reason: str | None = None


@dataclass(frozen=True)
class BudgetResult:
    """Both curves at one budget and whether, and where, post-removal recovery exceeds the control's."""

    budget: int
    examples: tuple[int, ...]
    post_removal: Curve
    control: Curve
    threshold_step: int | None
    newcombe: tuple[float, float, float] | None
    newcombe_step: int | None

    @property
    def exceeds_threshold(self) -> bool:
        return self.threshold_step is not None

    @property
    def exceeds_newcombe(self) -> bool:
        return self.newcombe_step is not None


@dataclass(frozen=True)
class RelearnResult:
    """The attack's record: spec, arm, every budget's two curves, and the headline budgets (C-W2)."""

    spec: RelearnSpec
    arm: Arm
    adjudicating: bool
    relearn_set_size: int
    budgets: tuple[BudgetResult, ...]
    skipped_budgets: tuple[int, ...] = field(default_factory=tuple)

    @property
    def headline_budget(self) -> int | None:
        """Smallest budget whose post-removal curve reaches τ where the control's stays below (C-W2)."""
        return next((b.budget for b in self.budgets if b.exceeds_threshold), None)

    @property
    def headline_budget_newcombe(self) -> int | None:
        """Supplementary: smallest budget with a Newcombe lower bound above zero at some checkpoint."""
        return next((b.budget for b in self.budgets if b.exceeds_newcombe), None)


def _run_curve(
    start: PreTrainedModel,
    which: Literal["post_removal", "control"],
    tokenizer: PreTrainedTokenizerBase,
    plan: RelearnPlan,
    budget: int,
    fmt: PromptFormat,
    scorer: Scorer,
) -> Curve:
    def on_checkpoint(m: Any, point: CheckpointPoint) -> dict[str, Any]:
        k, n = scorer(m)
        return {"k": k, "n": n}

    state = StateView(which, "", start, tokenizer)
    outcome, model = plan.relearn(
        state, budget, fmt, label=f"relearn {which} b={budget}", progress=False, on_checkpoint=on_checkpoint
    )
    points = tuple(
        CurvePoint(step=c.step, epoch=c.epoch, k=int(c.scores["k"]), n=int(c.scores["n"]), loss=c.loss)
        for c in outcome.checkpoints
    )
    del model
    return Curve(model=which, points=points, status=outcome.status, reason=outcome.reason)


def relearn_attack(
    post_removal: PreTrainedModel,
    control: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    relearn_set: Sequence[QA],
    probe: Sequence[QA],
    spec: RelearnSpec,
    *,
    arm: Arm = "held_out",
    fmt: PromptFormat | None = None,
) -> RelearnResult:
    """Relearn ``post_removal`` and ``control`` on nested budgets of ``relearn_set``; score ``probe`` (P) by
    teacher-forced greedy match.

    Neither input model is modified. ``arm="held_out"`` refuses a relearning set that shares a question with P
    (C-W6); ``arm="scored_items"`` is the secondary arm on the scored items themselves and is never adjudicating.
    """
    fmt = fmt or PromptFormat.for_tokenizer(tokenizer)
    if arm == "held_out":
        scored = {q.question.strip().casefold() for q in probe}
        shared = [q.question for q in relearn_set if q.question.strip().casefold() in scored]
        if shared:
            raise ConfigError(
                f"relearn: relearning set repeats scored question {shared[0]!r}", requirement="C-W6"
            )
    scorer = greedy_scorer(tokenizer, probe, fmt)
    plan = RelearnPlan(arm, spec, tuple(relearn_set), relearn_order(spec.seed, len(relearn_set)), False)
    results: list[BudgetResult] = []
    skipped: list[int] = []
    for budget in spec.budgets:
        if budget > len(relearn_set):
            skipped.append(budget)
            continue
        # C-W5: the same plan (examples, order, seed, config, checkpoints) and scorer for both models
        post_curve = _run_curve(post_removal, "post_removal", tokenizer, plan, budget, fmt, scorer)
        ctrl_curve = _run_curve(control, "control", tokenizer, plan, budget, fmt, scorer)
        results.append(_compare(budget, plan.chosen(budget), post_curve, ctrl_curve, spec))
    return RelearnResult(
        spec=spec,
        arm=arm,
        adjudicating=arm == "held_out",
        relearn_set_size=len(relearn_set),
        budgets=tuple(results),
        skipped_budgets=tuple(skipped),
    )


def _compare(budget: int, chosen: tuple[int, ...], pu: Curve, pc: Curve, spec: RelearnSpec) -> BudgetResult:
    threshold_step = None
    newcombe_step = None
    best_nc: tuple[float, float, float] | None = None
    for a, c in zip(pu.points, pc.points, strict=False):
        if threshold_step is None and a.rate >= spec.tau and c.rate < spec.tau:
            threshold_step = a.step
        diff, lo, hi = newcombe_difference(a.k, a.n, c.k, c.n, level=spec.level)
        if best_nc is None or lo > best_nc[1]:
            best_nc = (float(diff), float(lo), float(hi))
        if newcombe_step is None and lo > 0:
            newcombe_step = a.step
    return BudgetResult(
        budget=budget,
        examples=chosen,
        post_removal=pu,
        control=pc,
        threshold_step=threshold_step,
        newcombe=best_nc,
        newcombe_step=newcombe_step,
    )


__all__ = ["BudgetResult", "Curve", "CurvePoint", "RelearnResult", "relearn_attack"]
