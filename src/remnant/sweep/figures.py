"""The sweep page's figures, one set for every measured column of the results table (R23: the table the records
gave, nothing recomputed): metric against metric, the spread per method, the P (target) against N (never-saw)
distribution the UDS paper's faithfulness figures show, the forget-against-utility trade-off of each method
across its strengths and each column after a perturbation against before it; inline SVG drawn by matplotlib
without pyplot (:func:`remnant.report.plots.figure_svg`). The figures plot values as the table holds them (the
metric's own orientation); the AUC, Q, R and their filters are the meta-evaluation study's (``remnant study
meta-eval``), not this page's. Research output: nothing here adjudicates (C-H6).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from remnant.report.plots import figure_svg

if TYPE_CHECKING:
    from matplotlib.axes import Axes

#: Colours of the pools in every plot.
POOL_COLOURS = {"target": "#b8352a", "never_saw": "#2766a8", "unlearned": "#6b6b6b", "base": "#2b8a3e"}
#: The pools the faithfulness figure compares (the studies' P and N pools, remnant.studies.faithfulness).
P_POOL, N_POOL = "target", "never_saw"
P_COLOUR, N_COLOUR = "#b8352a", "#2766a8"
#: Method lines avoid the pools' colours (:data:`POOL_COLOURS`), so a method never reads as a pool.
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


def _series(rows: Sequence[dict[str, Any]], col: str, perturbation: str = "none") -> dict[str, float]:
    return {
        r["model"]: v
        for r in rows
        if r["perturbation"] == perturbation and (v := number(r.get(col))) is not None
    }


def _pool_scatter(
    rows: Sequence[dict[str, Any]],
    xs: dict[str, float],
    ys: dict[str, float],
    labels: tuple[str, str],
    plot_id: str,
    title: str,
    *,
    diagonal: bool = False,
) -> str:
    """``ys`` against ``xs`` per model, coloured by pool; with ``diagonal``, the line of no change."""
    pools = {r["model"]: r["pool"] for r in rows}

    def paint(ax: Axes) -> None:
        for pool, colour in POOL_COLOURS.items():
            models = [m for m in xs if m in ys and pools[m] == pool]
            ax.scatter([xs[m] for m in models], [ys[m] for m in models], s=18, color=colour, label=pool)
        values = [*xs.values(), *ys.values()]
        if diagonal and values:
            lo, hi = min(values), max(values)
            ax.plot([lo, hi], [lo, hi], color="#999999", linewidth=0.8, linestyle=":")
        ax.set_xlabel(labels[0])
        ax.set_ylabel(labels[1])
        ax.legend(fontsize=7, frameon=False)

    return figure_svg(4.2, 3.4, plot_id, title, paint)


def scatter_svg(rows: Sequence[dict[str, Any]], x: str, y: str, plot_id: str) -> str:
    """``y`` against ``x`` over the unperturbed models, coloured by pool."""
    return _pool_scatter(rows, _series(rows, x), _series(rows, y), (x, y), plot_id, f"{y} against {x}")


def perturbation_svg(rows: Sequence[dict[str, Any]], col: str, perturbation: str, plot_id: str) -> str:
    """``col`` after ``perturbation`` against before it, per model, with the line of no change."""
    before, after = _series(rows, col), _series(rows, col, perturbation)
    labels = (f"{col} (none)", f"{col} ({perturbation})")
    title = f"{col}: {perturbation} against none"
    return _pool_scatter(rows, before, after, labels, plot_id, title, diagonal=True)


def spread_svg(rows: Sequence[dict[str, Any]], col: str, plot_id: str) -> str:
    """``col`` per method (unlearned models) beside the reference pools: the spread of each group."""
    groups: dict[str, list[float]] = {}
    for r in rows:
        value = number(r.get(col))
        if r["perturbation"] == "none" and value is not None:
            groups.setdefault(r["method"] or r["pool"], []).append(value)
    names = sorted(groups)

    def paint(ax: Axes) -> None:
        for i, name in enumerate(names):
            ax.scatter(groups[name], [i] * len(groups[name]), s=14, color="#444444")
        ax.set_yticks(range(len(names)), names)
        ax.set_xlabel(col)

    return figure_svg(4.2, 0.8 + 0.3 * max(len(names), 1), plot_id, f"{col} by method", paint)


def _unperturbed(rows: Sequence[dict[str, Any]], col: str, pool: str) -> list[float]:
    return [
        v
        for r in rows
        if r["perturbation"] == "none" and r["pool"] == pool and (v := number(r.get(col))) is not None
    ]


def distribution_svg(rows: Sequence[dict[str, Any]], col: str, plot_id: str) -> str | None:
    """``col`` over the P pool against the N pool (unperturbed rows), as histograms with each model marked; None
    when either pool has no value (the caller says so in words)."""
    pos, neg = _unperturbed(rows, col, P_POOL), _unperturbed(rows, col, N_POOL)
    if not pos or not neg:
        return None
    lo, hi = min(pos + neg), max(pos + neg)
    if hi == lo:  # every model the same value: a unit-wide window centred on it, not one starting at it
        lo, hi = lo - 0.5, hi + 0.5
    span = hi - lo
    bins = [lo - 0.05 * span + i * 1.1 * span / 12 for i in range(13)]
    title = f"{col}: target (P) against never-saw (N)"

    def paint(ax: Axes) -> None:
        for values, colour, label in ((pos, P_COLOUR, "P: target"), (neg, N_COLOUR, "N: never-saw")):
            ax.hist(values, bins=bins, color=colour, alpha=0.35, label=f"{label} (n={len(values)})")
            ax.plot(values, [0.0] * len(values), "|", color=colour, markersize=12)
        ax.set_xlabel(col)
        ax.set_ylabel("models")
        ax.legend(fontsize=7, frameon=False)
        ax.set_title(title, fontsize=9)

    return figure_svg(4.2, 3.0, plot_id, title, paint)


def _strength_key(value: Any) -> tuple[int, float, str]:
    """Strengths in numeric order where they are numbers, else as text (a sweep's strengths are labels)."""
    try:
        return (0, float(value), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(value))


def tradeoff_svg(rows: Sequence[dict[str, Any]], col: str, plot_id: str) -> str | None:
    """Utility against ``col`` per method, its models joined in order of strength, the reference pools as
    markers; None when no unperturbed row has both values."""
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

    def paint(ax: Axes) -> None:
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
        ax.set_title(f"{col} against utility\nper method across strengths", fontsize=9)

    return figure_svg(4.2, 3.4, plot_id, f"{col} against utility per method across strengths", paint)


__all__ = [
    "POOL_COLOURS",
    "distribution_svg",
    "measured",
    "number",
    "perturbation_svg",
    "scatter_svg",
    "spread_svg",
    "tradeoff_svg",
]
