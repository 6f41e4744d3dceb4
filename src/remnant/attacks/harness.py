"""Run one attack identically on two or three model states and read the result (C-Q2, C-Q3, C-Q4; R19, R22).

The same attack instance, probes, context (seed, demonstrations, scorer, budgets) run on every state; only the
model changes, and the attack is never told which state it has (C-Q4). Each state's cell reports κ and w as
separate rates (R6), each as k, n and a Wilson interval (R19), per state (R22).

What a cell's k/n counts: items. For attacks that score an output, k is the number of probes whose scored output
hit. For analytic attacks (κ a probability per item), ``expected_k`` is the exact expected count Σ p_i and the
Rate uses k = round(Σ p_i) so that it still has an interval; both are recorded.

C-Q3: where the attack lowers the post-removal κ below the unattacked baseline, the harness checks whether it
lowers the pre-removal model's κ too. If it does, the adopted explanation is *format disruption* (the attack
breaks answering even where the target is present, so the low score is not evidence of robustness); if the
pre-removal model is unharmed, the drop is specific to the post-removal model; without a pre-removal run the
explanation is *undetermined* and robustness must not be recorded, and so it is over a pre-removal model whose
installation did not reach its target (R2). The rule is :func:`remnant.standard.cq3.explain`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from remnant.attacks.base import Attack, AttackContext, ItemOutcome, no_attack
from remnant.score.probe import Probe, target_format
from remnant.score.rates import Rate, count_items
from remnant.standard.cq3 import Explanation, Holding, explain

POST, CONTROL, PRE = "post_removal", "control", "pre_removal"


@dataclass(frozen=True)
class StateResult:
    """One state's cell under one attack: κ and w rates (separately, R6), per-item outcomes, time taken."""

    state: str
    kappa: Rate
    willing: Rate | None
    outcomes: tuple[ItemOutcome, ...]
    seconds: float
    expected_k: float | None = None

    def to_dict(self, *, with_items: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "state": self.state,
            "kappa": self.kappa.to_dict(),
            "willing": self.willing.to_dict() if self.willing is not None else None,
            "seconds": self.seconds,
        }
        if self.expected_k is not None:
            out["kappa"]["expected_k"] = self.expected_k
        if with_items:
            out["items"] = [
                {
                    "item_id": o.item_id,
                    "output": o.output,
                    "kappa": o.kappa,
                    "willing": o.willing,
                    "extra": dict(o.extra),
                }
                for o in self.outcomes
            ]
        return out


@dataclass(frozen=True)
class CQ3Finding:
    """C-Q3: did the attack reduce the score, and which explanation was adopted, with the reason."""

    explanation: Explanation
    reason: str
    post_delta: float | None = None
    pre_delta: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "explanation": self.explanation,
            "reason": self.reason,
            "post_removal_delta": self.post_delta,
            "pre_removal_delta": self.pre_delta,
        }


@dataclass(frozen=True)
class AttackResult:
    """An attack's result over states: status (``run`` / ``not_applicable``), cells, baseline, C-Q3 finding."""

    attack: Mapping[str, Any]
    status: Literal["run", "not_applicable"]
    reason: str | None = None
    states: Mapping[str, StateResult] = field(default_factory=dict)
    baseline: Mapping[str, StateResult] = field(default_factory=dict)
    cq3: CQ3Finding | None = None

    def lift(self, state: str) -> float | None:
        """κ under attack minus κ unattacked for ``state`` (C-Q4 compares the control's lift to the post's)."""
        if state not in self.states or state not in self.baseline:
            return None
        return self.states[state].kappa.net - self.baseline[state].kappa.net

    def to_dict(self, *, with_items: bool = False) -> dict[str, Any]:
        return {
            "attack": dict(self.attack),
            "status": self.status,
            "reason": self.reason,
            "states": {k: v.to_dict(with_items=with_items) for k, v in self.states.items()},
            "baseline": {k: v.to_dict(with_items=with_items) for k, v in self.baseline.items()},
            "lift": {k: self.lift(k) for k in self.states},
            "cq3": self.cq3.to_dict() if self.cq3 is not None else None,
        }


def cell(state: str, outcomes: Sequence[ItemOutcome], probes: Sequence[Probe], seconds: float) -> StateResult:
    """Rates for one state from its outcomes (see module docstring for what k counts)."""
    chance = sum(p.chance_rate for p in probes) / len(probes) if probes else 0.0
    counts = count_items([o.kappa for o in outcomes], [o.willing for o in outcomes])
    kappa = Rate.of(counts.k, counts.n, chance=chance)
    willing = Rate.of(counts.willing_k, counts.willing_n) if counts.willing_n else None
    return StateResult(state, kappa, willing, tuple(outcomes), seconds, counts.expected_k)


def _pair(state: Any) -> tuple[Any, Any]:
    if isinstance(state, tuple):
        return state[0], state[1]
    return state.model, state.tokenizer


def _timed(fn: Any, ctx: AttackContext, probes: Sequence[Probe]) -> tuple[list[ItemOutcome], float]:
    start = time.perf_counter()
    outcomes = list(fn(ctx, probes))
    return outcomes, time.perf_counter() - start


def cq3_check(
    baseline: Mapping[str, StateResult], attacked: Mapping[str, StateResult], holding: Holding = None
) -> CQ3Finding:
    """C-Q3: where the attack lowers the post-removal score, consider format disruption and say which
    explanation is adopted and why (point rates net of chance; any drop triggers the check). ``holding`` is what
    is known of the pre-removal model's hold on the target (R2; :func:`remnant.standard.cq3.explain` reads it)."""
    if POST not in baseline or POST not in attacked:
        return CQ3Finding("undetermined", "no post-removal cell with and without the attack")
    post_delta = attacked[POST].kappa.net - baseline[POST].kappa.net
    pre_delta = None
    if PRE in baseline and PRE in attacked:
        pre_delta = attacked[PRE].kappa.net - baseline[PRE].kappa.net
    explanation, reason = explain(post_delta, pre_delta, holding)
    return CQ3Finding(explanation, reason, post_delta, pre_delta if post_delta < 0 else None)


def run_on_states(
    attack: Attack,
    ctx: AttackContext,
    states: Mapping[str, Any],
    probes: Sequence[Probe],
    *,
    track: str | None = None,
    with_baseline: bool = True,
) -> AttackResult:
    """Run ``attack`` on every state (``post_removal``, ``control`` and optionally ``pre_removal``: each a
    ``ModelState`` or ``(model, tokenizer)``) with one context, so inputs, seeds and scoring are identical
    (C-Q4). A not-applicable attack returns its reason and no cells (C-Q2)."""
    reason = attack.applicable(target_format(list(probes)), track)
    if reason is not None:
        return AttackResult(attack.describe(), "not_applicable", reason)
    cells: dict[str, StateResult] = {}
    base: dict[str, StateResult] = {}
    for label, state in states.items():
        model, tok = _pair(state)
        sctx = ctx.with_model(model, tok)
        outcomes, secs = _timed(attack.run, sctx, probes)
        if len(outcomes) != len(probes) or [o.item_id for o in outcomes] != [p.item_id for p in probes]:
            raise RuntimeError(f"attack {attack.name} returned outcomes that do not match its probes")
        cells[label] = cell(label, outcomes, probes, secs)
        if with_baseline:
            b_out, b_secs = _timed(no_attack, sctx, probes)
            base[label] = cell(label, b_out, probes, b_secs)
    finding = cq3_check(base, cells) if with_baseline else None
    return AttackResult(attack.describe(), "run", None, cells, base, finding)


__all__ = [
    "CONTROL",
    "POST",
    "PRE",
    "AttackResult",
    "CQ3Finding",
    "StateResult",
    "cell",
    "cq3_check",
    "run_on_states",
]
