"""The studies' figures as inline SVG, drawn like the reports' (:mod:`remnant.report.plots`: matplotlib without
pyplot, text kept as text, deterministic ids prefixed by the plot's id, coordinates rounded): ROC curves (the UDS
paper §4), before/after scatters with the reference-shift line y = x + Δ_ret (the UDS paper E.2), and a predictor
against recovery (the J-Access paper Fig. 3) or an audit against the penalty weight.

Element ids: ``<plot>-identity`` (y = x), ``<plot>-shift`` (y = x + Δ_ret), ``<plot>-roc-<i>`` (the i-th
curve), so a test or a reader can find the lines the paper's figures carry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from remnant.report.plots import figure_svg

if TYPE_CHECKING:
    from matplotlib.axes import Axes

PALETTE = ("#b8352a", "#2766a8", "#3b8a3e", "#8a5a9e", "#c07a12", "#4a4a4a", "#0f8b8d", "#a23b72")


def _scatter(ax: Axes, points: Sequence[tuple[float, float, str]], size: float) -> list[str]:
    """The points, one colour per group (their third field), in order of first appearance; the groups."""
    groups = list(dict.fromkeys(p[2] for p in points))
    for i, group in enumerate(groups):
        mine = [p for p in points if p[2] == group]
        ax.scatter(
            [p[0] for p in mine], [p[1] for p in mine], s=size, color=PALETTE[i % len(PALETTE)], label=group
        )
    return groups


def roc_svg(curves: Mapping[str, Sequence[tuple[float, float]]], *, plot_id: str, title: str) -> str:
    """One ROC curve per metric (label → points), with the chance diagonal."""

    def draw(ax: Axes) -> None:
        (diag,) = ax.plot([0, 1], [0, 1], color="#999999", linewidth=1, linestyle=":", label="chance")
        diag.set_gid(f"{plot_id}-chance")
        for i, (label, points) in enumerate(curves.items()):
            (line,) = ax.plot(
                [p[0] for p in points],
                [p[1] for p in points],
                color=PALETTE[i % len(PALETTE)],
                linewidth=1.6,
                drawstyle="default",
                label=label,
            )
            line.set_gid(f"{plot_id}-roc-{i}")
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("false positive rate (never-saw called target)")
        ax.set_ylabel("true positive rate (target called target)")
        ax.legend(loc="lower right", frameon=False, fontsize=8)

    return figure_svg(4.8, 4.2, plot_id, title, draw)


def scatter_svg(
    points: Sequence[tuple[float, float, str]],
    *,
    plot_id: str,
    title: str,
    xlabel: str,
    ylabel: str,
    shift: float | None = None,
) -> str:
    """Before (x) against after (y) per model, coloured by method, with y = x and optionally y = x + shift."""

    def draw(ax: Axes) -> None:
        xs = [p[0] for p in points] or [0.0, 1.0]
        ys = [p[1] for p in points] or [0.0, 1.0]
        lo = min(min(xs), min(ys), min(xs) + (shift or 0.0))
        hi = max(max(xs), max(ys), max(xs) + (shift or 0.0))
        pad = 0.05 * (hi - lo or 1.0)
        lo, hi = lo - pad, hi + pad
        (ident,) = ax.plot([lo, hi], [lo, hi], color="#777777", linewidth=1, linestyle=":", label="y = x")
        ident.set_gid(f"{plot_id}-identity")
        if shift is not None:
            (ref,) = ax.plot(
                [lo, hi],
                [lo + shift, hi + shift],
                color="#333333",
                linewidth=1,
                linestyle="--",
                label=f"y = x + Δ_ret ({shift:+.3f})",
            )
            ref.set_gid(f"{plot_id}-shift")
        _scatter(ax, points, 14)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.legend(loc="upper left", frameon=False, fontsize=8)

    return figure_svg(4.8, 4.2, plot_id, title, draw)


def xy_svg(
    points: Sequence[tuple[float, float, str]], *, plot_id: str, title: str, xlabel: str, ylabel: str
) -> str:
    """A scatter of y against x, coloured by group (no reference line)."""

    def draw(ax: Axes) -> None:
        groups = _scatter(ax, points, 16)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(color="#eeeeee", linewidth=0.6)
        if groups:
            ax.legend(loc="best", frameon=False, fontsize=8)

    return figure_svg(4.8, 3.6, plot_id, title, draw)


__all__ = ["roc_svg", "scatter_svg", "xy_svg"]
