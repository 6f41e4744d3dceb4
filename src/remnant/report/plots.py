"""Inline SVG plots for the reports, drawn by matplotlib without pyplot (no global figure state).

Each plot is returned as an ``<svg>`` element ready to be placed in the HTML: no XML prolog, text kept as text
(so the page is searchable and a browser's DOM shows the labels), deterministic ids prefixed by the plot's id so
several plots can share a page, coordinates rounded to 0.1 px (smaller files, and no long digit runs that could
look like a canary value, R18). The post-removal and control lines carry the element ids ``<plot>-post`` and
``<plot>-control`` so a reader, or a test, can find the two curves C-W5 requires.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from remnant.curves import RelearningCurve
from remnant.report.curves import point_views

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

POST_COLOUR = "#b8352a"
CONTROL_COLOUR = "#2766a8"
TAU_COLOUR = "#555555"
METRIC_SYMBOLS = {"kappa": "κ", "w": "w"}

_RC: Any = {  # Any: matplotlib types rc keys as a Literal union
    "svg.fonttype": "none",  # real <text>, not glyph paths
    "svg.hashsalt": "remnant",  # deterministic clip-path ids: the same inputs give the same report bytes
    "font.family": "sans-serif",
    "font.size": 10.0,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
_GEOMETRY_ATTR = re.compile(r'\b(d|points|transform|x|y|x1|x2|y1|y2|width|height|cx|cy|r)="([^"]*)"')
_NUMBER = re.compile(r"-?\d+\.\d+")
_ID = re.compile(r'\bid="([^"]+)"')


def _round_attr(match: re.Match[str]) -> str:
    value = _NUMBER.sub(lambda m: f"{float(m.group(0)):.1f}".rstrip("0").rstrip("."), match.group(2))
    return f'{match.group(1)}="{value}"'


def _inline(svg: str, plot_id: str, title: str) -> str:
    """Make matplotlib's SVG document an inline element with unique ids and a title for screen readers."""
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"\s*<metadata>.*?</metadata>", "", svg, flags=re.S)
    ids = {i for i in _ID.findall(svg) if not i.startswith(plot_id)}
    # every id attribute in one pass (a renamed id starts with plot_id, so no rename makes another match), then
    # the references to each id, longest first
    svg = _ID.sub(lambda m: f'id="{plot_id}-{m[1]}"' if m[1] in ids else m[0], svg)
    for ident in sorted(ids, key=len, reverse=True):
        svg = svg.replace(f"#{ident})", f"#{plot_id}-{ident})").replace(
            f'"#{ident}"', f'"#{plot_id}-{ident}"'
        )
    svg = _GEOMETRY_ATTR.sub(_round_attr, svg)
    # Size by the page, not by points: the viewBox keeps the aspect ratio.
    svg = re.sub(r'<svg([^>]*?)\swidth="[^"]*"\sheight="[^"]*"', r'<svg\1 class="plot"', svg, count=1)
    escaped = title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    svg = re.sub(r"(<svg[^>]*>)", rf'\1<title id="{plot_id}-title">{escaped}</title>', svg, count=1)
    return svg.replace("<svg ", f'<svg role="img" aria-labelledby="{plot_id}-title" ', 1).strip()


def _render(fig: Figure, plot_id: str, title: str) -> str:
    from matplotlib.backends.backend_svg import FigureCanvasSVG

    FigureCanvasSVG(fig)
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    return _inline(buffer.getvalue(), plot_id, title)


def figure_svg(width: float, height: float, plot_id: str, title: str, paint: Callable[[Axes], None]) -> str:
    """One figure of ``width`` × ``height`` inches in remnant's plot style (:data:`_RC`), ``paint(ax)`` drawing on
    its one axes, laid out tight and rendered as an inline SVG with ``plot_id`` and ``title`` (every plot of the
    reports, the sweep page and the studies is drawn here)."""
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(width, height))
        paint(fig.add_subplot())
        fig.tight_layout()
        return _render(fig, plot_id, title)


def _series(
    ax: Axes, gid: str, points: Sequence[tuple[int, float, tuple[float, float]]], colour: str, **style: Any
) -> None:
    """One model's rates at each x with their Wilson band, the band drawn first (ids ``gid-band``, ``gid``)."""
    xs = [x for x, _, _ in points]
    band = ax.fill_between(
        xs, [ci[0] for *_, ci in points], [ci[1] for *_, ci in points], color=colour, alpha=0.18
    )
    band.set_gid(f"{gid}-band")
    (line,) = ax.plot(xs, [rate for _, rate, _ in points], color=colour, markersize=4, linewidth=2, **style)
    line.set_gid(gid)


def _interval(ax: Axes, y: float, rate: float, ci: tuple[float, float], fmt: str, colour: str) -> None:
    """One rate at height ``y`` with its Wilson interval as error bars."""
    xerr = [[rate - ci[0]], [ci[1] - rate]]
    ax.errorbar([rate], [y], xerr=xerr, fmt=fmt, color=colour, markersize=5, capsize=3)


def curve_svg(curve: RelearningCurve, *, plot_id: str, title: str | None = None) -> str:
    """Recovery of the post-removal model and the control at every checkpoint, Wilson bands, τ line (C-W5)."""
    views = point_views(curve)
    use_examples = any(v.examples for v in views)
    xs = [v.examples if use_examples else v.step for v in views]
    label = title or f"{curve.attack}: recovery with {curve.budget} relearning examples"

    def paint(ax: Axes) -> None:
        post = [(x, v.post_rate, v.post_ci) for x, v in zip(xs, views, strict=True)]
        _series(ax, f"{plot_id}-post", post, POST_COLOUR, marker="o", label="post-removal model")
        control = [
            (x, v.control_rate, v.control_ci)
            for x, v in zip(xs, views, strict=True)
            if v.control_rate is not None and v.control_ci is not None
        ]
        if control:
            style = {"marker": "s", "linestyle": "--", "label": "never-modified control"}
            _series(ax, f"{plot_id}-control", control, CONTROL_COLOUR, **style)
        tau = ax.axhline(curve.tau, color=TAU_COLOUR, linewidth=1, linestyle=":", label=f"τ = {curve.tau:g}")
        tau.set_gid(f"{plot_id}-tau")
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("relearning examples seen" if use_examples else "relearning steps")
        metric = METRIC_SYMBOLS.get(curve.metric, curve.metric)
        ax.set_ylabel(f"recovery ({metric}{', net of chance' if curve.chance_rate else ''})")
        ax.grid(axis="y", color="#dddddd", linewidth=0.6)
        ax.legend(loc="upper left", frameon=False, fontsize=9)

    return figure_svg(6.4, 3.4, plot_id, label, paint)


@dataclass(frozen=True)
class IntervalRow:
    """One attack's two rates with intervals, for the per-surface interval plot (R4, R19)."""

    label: str
    post_rate: float
    post_ci: tuple[float, float]
    control_rate: float | None
    control_ci: tuple[float, float] | None


def intervals_svg(rows: Sequence[IntervalRow], *, tau: float, plot_id: str, title: str) -> str:
    """Each attack's post-removal and control rates with Wilson 95% intervals against τ (R4, R19, R20)."""

    def paint(ax: Axes) -> None:
        ys = list(range(len(rows)))[::-1]
        for y, row in zip(ys, rows, strict=True):
            _interval(ax, y + 0.12, row.post_rate, row.post_ci, "o", POST_COLOUR)
            if row.control_rate is not None and row.control_ci is not None:
                _interval(ax, y - 0.12, row.control_rate, row.control_ci, "s", CONTROL_COLOUR)
        ax.axvline(tau, color=TAU_COLOUR, linewidth=1, linestyle=":")
        ax.set_yticks(ys, [r.label for r in rows])
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.7, len(rows) - 0.3)
        ax.set_xlabel("rate with 95% Wilson interval")
        ax.grid(axis="x", color="#dddddd", linewidth=0.6)

    return figure_svg(6.4, 0.9 + 0.45 * max(len(rows), 1), plot_id, title, paint)
