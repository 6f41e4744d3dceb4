"""The sweep page's per-metric figures, one set for every measured column of the results table (R23: the table
the records gave, nothing recomputed): the P (target) against N (never-saw) distribution the UDS paper's
faithfulness figures show, the forget-against-utility trade-off of each method across its strengths, and the
sentence that stands in for a figure when a column holds no value. The before/after-perturbation scatter is
:func:`remnant.sweep.html.perturbation_svg`, drawn for every column too.

The figures plot values as the table holds them (the metric's own orientation); the AUC, Q, R and their filters
are the meta-evaluation study's (``remnant study meta-eval``), not this page's. Research output: nothing here
adjudicates (C-H6).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

#: The pools the faithfulness figure compares (the studies' P and N pools, remnant.studies.faithfulness).
P_POOL, N_POOL = "target", "never_saw"
P_COLOUR, N_COLOUR = "#b8352a", "#2766a8"
#: Method lines avoid the pools' colours (remnant.sweep.html.POOL_COLOURS), so a method never reads as a pool.
METHOD_COLOURS = ("#8a5a9e", "#c07a12", "#0f8b8d", "#a23b72", "#4a4a4a", "#7a6a00")


def number(value: object) -> float | None:
    """A finite number from a table cell, else None (missing, text, bool, NaN or infinite)."""
    return (
        float(value)
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        else None
    )


def measured(rows: Sequence[dict[str, Any]], col: str) -> bool:
    """Whether any row holds a value of ``col``."""
    return any(number(r.get(col)) is not None for r in rows)


def _unperturbed(rows: Sequence[dict[str, Any]], col: str, pool: str) -> list[float]:
    return [
        v
        for r in rows
        if r["perturbation"] == "none" and r["pool"] == pool and (v := number(r.get(col))) is not None
    ]


def distribution_svg(rows: Sequence[dict[str, Any]], col: str, plot_id: str) -> str | None:
    """``col`` over the P pool against the N pool (unperturbed rows), as histograms with each model marked; None
    when either pool has no value (the caller says so in words)."""
    import matplotlib

    from remnant.report.plots import _RC, _render
    from remnant.sweep.html import _figure

    pos, neg = _unperturbed(rows, col, P_POOL), _unperturbed(rows, col, N_POOL)
    if not pos or not neg:
        return None
    lo, hi = min(pos + neg), max(pos + neg)
    if hi == lo:  # every model the same value: a unit-wide window centred on it, not one starting at it
        lo, hi = lo - 0.5, hi + 0.5
    span = hi - lo
    bins = [lo - 0.05 * span + i * 1.1 * span / 12 for i in range(13)]
    with matplotlib.rc_context(_RC):
        fig = _figure(4.2, 3.0)
        ax = fig.add_subplot()
        for values, colour, label in ((pos, P_COLOUR, "P: target"), (neg, N_COLOUR, "N: never-saw")):
            ax.hist(values, bins=bins, color=colour, alpha=0.35, label=f"{label} (n={len(values)})")
            ax.plot(values, [0.0] * len(values), "|", color=colour, markersize=12)
        ax.set_xlabel(col)
        ax.set_ylabel("models")
        ax.legend(fontsize=7, frameon=False)
        title = f"{col}: target (P) against never-saw (N)"
        ax.set_title(title, fontsize=9)
        fig.tight_layout()
        return _render(fig, plot_id, title)


def _strength_key(value: Any) -> tuple[int, float, str]:
    """Strengths in numeric order where they are numbers, else as text (a sweep's strengths are labels)."""
    try:
        return (0, float(value), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(value))


def tradeoff_svg(rows: Sequence[dict[str, Any]], col: str, plot_id: str) -> str | None:
    """Utility against ``col`` per method, its models joined in order of strength, the reference pools as
    markers; None when no unperturbed row has both values."""
    import matplotlib

    from remnant.report.plots import _RC, _render
    from remnant.sweep.html import POOL_COLOURS, _figure

    both = [
        (r, x, y)
        for r in rows
        if r["perturbation"] == "none"
        and (x := number(r.get(col))) is not None
        and (y := number(r.get("utility"))) is not None
    ]
    if not both:
        return None
    methods: dict[str, list[tuple[Any, float, float]]] = {}
    for r, x, y in both:
        if r["pool"] == "unlearned":
            methods.setdefault(r["method"] or "—", []).append((r.get("strength"), x, y))
    with matplotlib.rc_context(_RC):
        fig = _figure(4.2, 3.4)
        ax = fig.add_subplot()
        for i, (method, points) in enumerate(sorted(methods.items())):
            points.sort(key=lambda p: _strength_key(p[0]))
            (line,) = ax.plot(
                [p[1] for p in points],
                [p[2] for p in points],
                marker="o",
                markersize=4,
                color=METHOD_COLOURS[i % len(METHOD_COLOURS)],
                label=method,
            )
            line.set_gid(f"{plot_id}-method-{i}")  # methods in name order: a reader or a test finds each line
        for pool in ("target", "never_saw", "base"):
            mine = [(x, y) for r, x, y in both if r["pool"] == pool]
            if mine:
                ax.scatter(
                    [p[0] for p in mine], [p[1] for p in mine], s=22, marker="s", color=POOL_COLOURS[pool]
                )
                ax.scatter([], [], marker="s", color=POOL_COLOURS[pool], label=pool)
        ax.set_xlabel(f"{col} (forget side)")
        ax.set_ylabel("utility")
        ax.legend(fontsize=7, frameon=False)
        title = f"{col} against utility per method across strengths"
        ax.set_title(f"{col} against utility\nper method across strengths", fontsize=9)
        fig.tight_layout()
        return _render(fig, plot_id, title)


__all__ = ["distribution_svg", "measured", "number", "tradeoff_svg"]
