"""Attack measurements: one registered attack (or none: the unattacked baseline) on the probe set (C-Q1..C-Q4).

The same attack instance, probes and context (seed, demonstrations, scorer, budgets) run on every state; only the
model differs, and the attack is never told which state it has (C-Q4). Each state's cell records an observation
per item, then κ and w as separate cell records (R6). An attack that crashes is a *failed* cell, not a crashed
run (it blocks *removed*). An attack that does not apply is a :func:`not_applicable` status record (C-Q2).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from remnant.engine.cell import CellFields, CellTarget, cell_record, observation_record, status_record
from remnant.engine.measurement import Measurement, NotRun, Record, State, component_spec, loaded
from remnant.standard.derive import NONE

if TYPE_CHECKING:
    from remnant.attacks.base import Attack, AttackContext, ItemOutcome
    from remnant.score.probe import Probe


def score_outcomes(
    target: CellTarget,
    checkpoint: str,
    seed: int,
    outcomes: Sequence[ItemOutcome],
    probes: Sequence[Probe],
    fields: CellFields,
    elapsed: float,
) -> list[Record]:
    """Observations, then κ and w cell records (R6) carrying ``fields``, for one state's outcomes at one
    checkpoint.

    An analytic κ counts round(Σp) and records Σp as ``expected_k`` (:func:`remnant.attacks.harness.cell`).
    """
    from remnant.attacks.harness import cell as rate_cell

    out: list[Record] = [
        observation_record(
            target,
            checkpoint=checkpoint,
            seed=seed,
            item_id=o.item_id,
            value=o.kappa if o.is_analytic else bool(o.kappa),
            willing=o.willing,
            output=o.output,
        )
        for o in outcomes
    ]
    result = rate_cell(target.state, outcomes, probes, elapsed)
    kappa_fields = fields.copy()
    if result.expected_k is not None:
        kappa_fields["expected_k"] = result.expected_k
    kappa, willing = result.kappa, result.willing
    out.append(
        cell_record(target, k=kappa.k, n=kappa.n, checkpoint=checkpoint, fields=kappa_fields, elapsed=elapsed)
    )
    if willing is not None and willing.n:
        out.append(
            cell_record(
                target,
                metric="w",
                k=willing.k,
                n=willing.n,
                checkpoint=checkpoint,
                fields=fields,
                elapsed=elapsed,
            )
        )
    return out


def context_inputs(ctx: AttackContext) -> dict[str, object]:
    """What of an attack context determines a cell's numbers besides the model: seed, budgets, demonstrations."""
    return {
        "seed": ctx.seed,
        "max_new_tokens": ctx.max_new_tokens,
        "batch_size": ctx.batch_size,
        "demonstrations": [d.item_id for d in ctx.demonstrations],
        "target_demonstrations": [d.item_id for d in ctx.target_demonstrations],
    }


class AttackMeasurement(Measurement):
    """One attack (``attack`` None: the unattacked baseline) on the probe set, under ``ctx`` (C-Q4)."""

    kind: ClassVar[str] = "attack"
    failure_is_outcome: ClassVar[bool] = True

    def __init__(
        self,
        name: str,
        attack: Attack | None,
        ctx: AttackContext,
        probes: Sequence[Probe],
        inputs: Mapping[str, object],
        *,
        roles: tuple[str, ...] = ("post_removal", "control", "pre_removal"),
    ) -> None:
        self.name = name
        self.attack = attack
        self.ctx = ctx
        self.probes = tuple(probes)
        self.surface = attack.surface if attack is not None else "baseline"
        self._inputs = dict(inputs)
        self._roles = roles

    @property
    def component(self) -> dict[str, object]:
        """The attack's registered name, version and every parameter (R23)."""
        return component_spec(self.attack) or {"name": NONE}

    def roles(self) -> tuple[str, ...]:
        return self._roles

    def key_inputs(self) -> dict[str, object]:
        """The component, the shared inputs, and the context that shapes its numbers: the seed its generators
        derive from, its generation length and batch size, and the demonstrations it may show (R23)."""
        return {"attack": self.component, "context": context_inputs(self.ctx), **self._inputs}

    def fields(self) -> CellFields:
        """What every record of this attack carries: its component, and ``adjudicating`` false on an arm that
        never decides (C-W6)."""
        out: CellFields = {"component": self.component}
        if self.attack is not None and not getattr(self.attack, "adjudicating", True):
            out["adjudicating"] = False
        return out

    def measure(self, state: State | None, target: CellTarget) -> list[Record]:
        from remnant.attacks.base import no_attack

        state = loaded(state, self)
        sctx = self.ctx.with_model(state.model, state.tokenizer)
        start = time.perf_counter()
        run = self.attack.run if self.attack is not None else no_attack
        outcomes = run(sctx, list(self.probes))
        elapsed = time.perf_counter() - start
        return score_outcomes(target, "final", self.ctx.seed, outcomes, self.probes, self.fields(), elapsed)

    def failed(self, target: CellTarget, exc: BaseException, elapsed: float) -> list[Record]:
        reason = f"{type(exc).__name__}: {exc}"
        return [status_record(target, status="failed", reason=reason, elapsed=elapsed, fields=self.fields())]


def not_applicable(name: str, surface: str, reason: str, inputs: Mapping[str, object]) -> NotRun:
    """A declared attack (or relearning arm) that does not apply (C-Q2) or is disabled, with its reason: one
    status record under the post-removal model, recorded and never withstood."""
    key = {"attack": name, "reason": reason, **inputs}
    return NotRun("not_applicable", name, surface, "not_applicable", reason, key)


__all__ = ["AttackMeasurement", "context_inputs", "not_applicable", "score_outcomes"]
