"""Robustness: how far a metric moves under NF4 quantization (Q) and one epoch of relearning (R).

The UDS paper's symmetric definitions (docs/latent.md; ``docs/data/meta_eval.json`` formulas), per unlearned
model, on m (higher = more knowledge):

* q = 1 − clip(|m_after − m_before| / (|m_before| + |m_after| + ε), 0, 1), after NF4 4-bit quantization: it
  penalises recovery (m rises) and destruction (m falls) alike;
* r = 1 − clip(|Δ_unl − Δ_ret| / (|Δ_unl| + |Δ_ret| + ε), 0, 1) with Δ = m_after − m_before after one epoch of
  relearning on the forget set, and Δ_ret the shift of the retain model relearned the same way (the *reference
  shift*: the line y = x + Δ_ret in the paper's relearning plots). As the reference code's relearning plot script
  (one ``retain`` entry) does, Δ_ret is one never-saw model's shift by default (``reference_shift =
  "retain_model"``: the declared ``retain_model``, else the never-saw model whose id sorts first); the never-saw
  pool's mean or median shift are declared options. ε is the reference scripts' ``EPS = 1e-6`` by default.

Q and R are the means of q and r over the models that pass both filters (the UDS paper §4): utility ≥
``utility_floor`` × the full model's (the model's ``parent`` in the target pool; the target pool's mean when the
parent is absent) and classified as unlearned by the metric's faithfulness threshold (m_before ≤ cut). Robustness
= HM(Q, R). Each mean carries a percentile bootstrap interval over models (Δ_ret held fixed), seeded from the
pre-registered seed. The paper's earlier code (``scripts/meta_eval_robustness.py`` docstring) used the one-sided
OpenUnlearning forms Q = min(m_after/m_before, 1), R = min(Δ_ret/Δ_unl, 1); its published table uses the symmetric
forms, which we follow.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

import numpy as np
from pydantic import Field

from remnant.errors import ConfigError
from remnant.results import PoolTable
from remnant.statement.canonical import derive_seed
from remnant.stats import harmonic_mean, percentile_bootstrap
from remnant.studies.config import StudyModel
from remnant.studies.orientation import Orientation, orient, oriented_shift

#: Smaller moves than this are rounding, not a rise or a fall (the plots' counts).
MOVED = 1e-9


class Point(StudyModel):
    """One model before and after a perturbation (a scatter point)."""

    model: str = Field(description="Model id.")
    method: str | None = Field(description="Removal method.")
    before: float = Field(description="m unperturbed.")
    after: float = Field(description="m perturbed.")
    score: float = Field(description="q or r of this model.")


class Stability(StudyModel):
    """Q or R of one metric over the filtered unlearned models."""

    value: float | None = Field(description="Mean q (or r) over the models (None: no model qualified).")
    ci95: tuple[float, float] | None = Field(description="Percentile bootstrap over models (n ≥ 2).")
    n: int = Field(description="Models behind the mean.")
    rose: int = Field(description="Models whose m rose (quantization: recovery; relearning: over-recovery).")
    fell: int = Field(description="Models whose m fell (destruction; relearning: under-recovery).")
    points: list[Point] = Field(default_factory=list, description="Per-model before/after values.")


class Robustness(StudyModel):
    """Q, R and their harmonic mean, with what the filters removed."""

    quantization: Stability = Field(description="Q under NF4 quantization.")
    relearning: Stability = Field(description="R under one epoch of relearning.")
    hm: float | None = Field(description="HM(Q, R) (None unless both exist).")
    reference_shift: float | None = Field(description="Δ_ret: the never-saw relearning shift of m.")
    n_reference: int = Field(description="Never-saw models behind Δ_ret.")
    reference_model: str | None = Field(
        default=None, description="The one never-saw model behind Δ_ret (reference_shift = retain_model)."
    )
    candidates: int = Field(description="Unlearned models with an unperturbed value.")
    excluded: dict[str, int] = Field(
        description="Models removed by each filter (no_utility, utility, faithfulness)."
    )


def relative_change(before: float, after: float, eps: float) -> float:
    """1 − clip(|after − before| / (|before| + |after| + ε), 0, 1): 1 when unmoved, 0 when moved by its size."""
    return 1.0 - min(max(abs(after - before) / (abs(before) + abs(after) + eps), 0.0), 1.0)


def full_utility(table: PoolTable, model: str) -> float | None:
    """The utility the filter compares against: the parent's (target pool), else the target pool's mean."""
    row = table.row(model, "none")
    parent = row.parent if row is not None else None
    if parent is not None:
        prow = table.row(parent, "none")
        if prow is not None and prow.pool == "target" and prow.ok and prow.utility is not None:
            return prow.utility
    values = [u for m in table.models("target") if (u := table.value(m, "utility", "none")) is not None]
    return float(np.mean(values)) if values else None


def retain_model(table: PoolTable, declared: str | None) -> str | None:
    """The one never-saw model Δ_ret is read on: the declared one (R14), else the id that sorts first."""
    models = sorted(table.models("never_saw"))
    if declared is None:
        return models[0] if models else None
    if declared not in models:
        raise ConfigError(
            f"{table.source}: study config field 'retain_model': {declared!r} is not a finished never-saw model "
            f"(never-saw: {', '.join(models) or 'none'})",
            requirement="R14",
        )
    return declared


def reference_shift(
    table: PoolTable, metric: str, how: Orientation, rule: str, model: str | None = None
) -> tuple[float | None, int]:
    """Δ_ret: ``model``'s relearning shift of m (rule ``retain_model``), else the never-saw models' mean or median;
    and how many models it rests on."""
    names = ([model] if model is not None else []) if rule == "retain_model" else table.models("never_saw")
    shifts = []
    for name in names:
        shift = oriented_shift(table.value(name, metric, "none"), table.value(name, metric, "relearn"), how)
        if shift is not None:
            shifts.append(shift)
    if not shifts:
        return None, 0
    return (statistics.median(shifts) if rule == "median" else float(np.mean(shifts))), len(shifts)


def _stability(points: list[Point], rng: np.random.Generator, n_resamples: int, level: float) -> Stability:
    scores = [p.score for p in points]
    ci = None
    if len(scores) >= 2:
        _, lo, hi = percentile_bootstrap(scores, lambda a: float(np.mean(a)), rng, n_resamples, level)
        ci = (lo, hi)
    return Stability(
        value=float(np.mean(scores)) if scores else None,
        ci95=ci,
        n=len(scores),
        rose=sum(p.after - p.before > MOVED for p in points),
        fell=sum(p.before - p.after > MOVED for p in points),
        points=points,
    )


def _points(
    table: PoolTable,
    kept: list[tuple[str, str | None, float]],
    metric: str,
    how: Orientation,
    perturbation: str,
    score: Callable[[float, float], float],
) -> list[Point]:
    """The kept models' (before, after ``perturbation``) pairs of ``metric``, each with its ``score``."""
    out = []
    for model, method, m_before in kept:
        after = table.value(model, metric, perturbation)
        if after is not None:
            m_after = orient(after, how)
            out.append(
                Point(
                    model=model, method=method, before=m_before, after=m_after, score=score(m_before, m_after)
                )
            )
    return out


def robustness(
    table: PoolTable,
    metric: str,
    how: Orientation,
    threshold: float | None,
    *,
    seed: int,
    utility_floor: float = 0.8,
    faithfulness_filter: bool = True,
    shift_rule: str = "retain_model",
    reference_model: str | None = None,
    eps: float = 1e-6,
    n_resamples: int = 2000,
    level: float = 0.95,
) -> Robustness:
    """Q, R and HM of one metric over the pool's unlearned models (module docstring for the definitions)."""
    excluded = {"no_utility": 0, "utility": 0, "faithfulness": 0}
    kept: list[tuple[str, str | None, float]] = []
    candidates = 0
    for model in table.models("unlearned"):
        before = table.value(model, metric, "none")
        if before is None:
            continue
        candidates += 1
        m_before = orient(before, how)
        full, own = full_utility(table, model), table.value(model, "utility", "none")
        if full is None or own is None:
            excluded["no_utility"] += 1
        elif own < utility_floor * full:
            excluded["utility"] += 1
        elif faithfulness_filter and (threshold is None or m_before > threshold):
            excluded["faithfulness"] += 1
        else:
            row = table.row(model, "none")
            kept.append((model, row.method if row is not None else None, m_before))
    if shift_rule == "retain_model" and reference_model is None:
        reference_model = retain_model(table, None)
    shift, n_ref = reference_shift(table, metric, how, shift_rule, reference_model)

    q_points = _points(table, kept, metric, how, "nf4", lambda b, a: relative_change(b, a, eps))
    r_points: list[Point] = []
    if shift is not None:
        ref = shift
        r_points = _points(table, kept, metric, how, "relearn", lambda b, a: relative_change(ref, a - b, eps))
    q = _stability(
        q_points, np.random.default_rng(derive_seed(seed, "meta-eval", "nf4", metric)), n_resamples, level
    )
    r = _stability(
        r_points, np.random.default_rng(derive_seed(seed, "meta-eval", "relearn", metric)), n_resamples, level
    )
    if shift is not None:  # relearning "rose"/"fell" relative to the reference shift, as the paper counts
        r.rose = sum(p.after - p.before - shift > MOVED for p in r_points)
        r.fell = sum(shift - (p.after - p.before) > MOVED for p in r_points)
    hm = harmonic_mean([q.value, r.value]) if q.value is not None and r.value is not None else None
    return Robustness(
        quantization=q,
        relearning=r,
        hm=hm,
        reference_shift=shift,
        n_reference=n_ref,
        reference_model=reference_model if shift_rule == "retain_model" else None,
        candidates=candidates,
        excluded=excluded,
    )


__all__ = [
    "Point",
    "Robustness",
    "Stability",
    "full_utility",
    "reference_shift",
    "relative_change",
    "retain_model",
    "robustness",
]
