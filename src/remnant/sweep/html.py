"""The sweep's HTML page: the leaderboard and plots (metric against metric, per-method spread, target against
never-saw, forget against utility per method, before/after perturbation), inline SVG drawn by matplotlib without
pyplot (no script, no network). Every section draws one figure per measured column of the results table, and
says in words which columns have no value (the rule is printed on the page; the figures: remnant.sweep.figures).
Research output: nothing here adjudicates (C-H6).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Colours of the pools in every plot.
POOL_COLOURS = {"target": "#b8352a", "never_saw": "#2766a8", "unlearned": "#6b6b6b", "base": "#2b8a3e"}
MAX_COLUMNS = 4


def _num(value: object) -> float | None:
    from remnant.sweep.figures import number

    return number(value)


def _fmt(value: object) -> str:
    number = _num(value)
    if number is not None:
        return f"{number:.3f}"
    return "—" if value is None else html.escape(str(value))


def _figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height))


def _svg(fig: Figure, plot_id: str, title: str) -> str:
    from remnant.report.plots import _render

    return _render(fig, plot_id, title)


def _series(rows: Sequence[dict[str, Any]], col: str, perturbation: str = "none") -> dict[str, float]:
    return {
        r["model"]: v
        for r in rows
        if r["perturbation"] == perturbation and (v := _num(r.get(col))) is not None
    }


def scatter_svg(rows: Sequence[dict[str, Any]], x: str, y: str, plot_id: str) -> str:
    """``y`` against ``x`` over the unperturbed models, coloured by pool."""
    import matplotlib

    from remnant.report.plots import _RC

    pools = {r["model"]: r["pool"] for r in rows}
    xs, ys = _series(rows, x), _series(rows, y)
    with matplotlib.rc_context(_RC):
        fig = _figure(4.2, 3.4)
        ax = fig.add_subplot()
        for pool, colour in POOL_COLOURS.items():
            models = [m for m in xs if m in ys and pools[m] == pool]
            ax.scatter([xs[m] for m in models], [ys[m] for m in models], s=18, color=colour, label=pool)
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        ax.legend(fontsize=7, frameon=False)
        fig.tight_layout()
        return _svg(fig, plot_id, f"{y} against {x}")


def spread_svg(rows: Sequence[dict[str, Any]], col: str, plot_id: str) -> str:
    """``col`` per method (unlearned models) beside the reference pools: the spread of each group."""
    import matplotlib

    from remnant.report.plots import _RC

    groups: dict[str, list[float]] = {}
    for r in rows:
        value = _num(r.get(col))
        if r["perturbation"] == "none" and value is not None:
            groups.setdefault(r["method"] or r["pool"], []).append(value)
    names = sorted(groups)
    with matplotlib.rc_context(_RC):
        fig = _figure(4.2, 0.8 + 0.3 * max(len(names), 1))
        ax = fig.add_subplot()
        for i, name in enumerate(names):
            ax.scatter(groups[name], [i] * len(groups[name]), s=14, color="#444444")
        ax.set_yticks(range(len(names)), names)
        ax.set_xlabel(col)
        fig.tight_layout()
        return _svg(fig, plot_id, f"{col} by method")


def perturbation_svg(rows: Sequence[dict[str, Any]], col: str, perturbation: str, plot_id: str) -> str:
    """``col`` after ``perturbation`` against before it, per model, with the line of no change."""
    import matplotlib

    from remnant.report.plots import _RC

    pools = {r["model"]: r["pool"] for r in rows}
    before, after = _series(rows, col), _series(rows, col, perturbation)
    with matplotlib.rc_context(_RC):
        fig = _figure(4.2, 3.4)
        ax = fig.add_subplot()
        for pool, colour in POOL_COLOURS.items():
            models = [m for m in before if m in after and pools[m] == pool]
            ax.scatter(
                [before[m] for m in models], [after[m] for m in models], s=18, color=colour, label=pool
            )
        values = list(before.values()) + list(after.values())
        if values:
            lo, hi = min(values), max(values)
            ax.plot([lo, hi], [lo, hi], color="#999999", linewidth=0.8, linestyle=":")
        ax.set_xlabel(f"{col} (none)")
        ax.set_ylabel(f"{col} ({perturbation})")
        ax.legend(fontsize=7, frameon=False)
        fig.tight_layout()
        return _svg(fig, plot_id, f"{col}: {perturbation} against none")


def _leaderboard(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    shown = [r for r in rows if r["perturbation"] == "none"]
    key = next((c for c in ("kappa", *columns) if any(_num(r.get(c)) is not None for r in shown)), None)
    if key is not None:
        shown.sort(
            key=lambda r: (
                _num(r.get(key)) is None,
                _num(r.get(key)) or 0.0,
                -(_num(r.get("utility")) or 0.0),
            )
        )
    head = ["model", "pool", "method", "strength", "status", "utility", *columns]
    lines = [
        "<table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr></thead><tbody>"
    ]
    for r in shown:
        lines.append("<tr>" + "".join(f"<td>{_fmt(r.get(h))}</td>" for h in head) + "</tr>")
    lines.append("</tbody></table>")
    return "\n".join(lines)


def _missing(columns: Sequence[str], why: str) -> str:
    """One sentence per column that gets no figure, saying why (never an empty plot)."""
    return "".join(f'<p class="missing">{html.escape(c)}: {html.escape(why)}</p>' for c in columns)


def _per_column_sections(
    rows: Sequence[dict[str, Any]], measured: Sequence[str], empty: Sequence[str], declared: Sequence[str]
) -> dict[str, str]:
    """The figures drawn once for every measured column: spread, P vs N, trade-off, before/after."""
    from remnant.sweep.figures import distribution_svg, tradeoff_svg

    metrics = [c for c in measured if c != "utility"]
    no_value = _missing(empty, "no value in any row, so no figure")
    spreads = "".join(spread_svg(rows, c, f"spread-{i}") for i, c in enumerate(measured))
    faithful, tradeoff = [], []
    for i, c in enumerate(metrics):
        faithful.append(
            distribution_svg(rows, c, f"pn-{i}")
            or _missing([c], "no unperturbed value in the target or the never-saw pool, so no figure")
        )
        tradeoff.append(
            tradeoff_svg(rows, c, f"tradeoff-{i}")
            or _missing([c], "no unperturbed row holds both it and utility, so no figure")
        )
    shifts = [
        perturbation_svg(rows, c, p, f"shift-{i}-{p}") for i, c in enumerate(measured) for p in declared
    ]
    return {
        "spread": spreads + no_value if spreads else "",
        "faithfulness": "".join(faithful) + no_value if faithful else "",
        "tradeoff": "".join(tradeoff) + no_value if tradeoff else "",
        "shift": "".join(shifts) + no_value if shifts else "",
    }


def _rule(measured: Sequence[str], pairs: Sequence[str]) -> str:
    shown = ", ".join(measured) or "none"
    paired = ", ".join(pairs) or "none"
    return (
        f"Which figures: every section below draws one figure per measured column of the results table "
        f"({shown}); the metric-against-metric pairs are drawn among the first {MAX_COLUMNS} of them only "
        f"({paired}). Values are as the table holds them; the AUC, Q and R are the meta-evaluation study's "
        f"(remnant study meta-eval)."
    )


def render_page(
    name: str, rows: Sequence[dict[str, Any]], columns: Sequence[str], perturbations: Sequence[str], note: str
) -> str:
    """The whole page (module docstring)."""
    from remnant.sweep.figures import measured as has_value

    every = list(dict.fromkeys(("utility", *columns)))
    measured = [c for c in every if has_value(rows, c)]
    empty = [c for c in every if c not in measured]
    main = measured[:MAX_COLUMNS]
    plots: list[str] = []
    for i, x in enumerate(main):
        for y in main[i + 1 :]:
            plots.append(scatter_svg(rows, x, y, f"scatter-{len(plots)}"))
    declared = [p for p in perturbations if p != "none"]
    sections = _per_column_sections(rows, measured, empty, declared)
    # Each placeholder says why its section is empty, from the plan and the table, never a guess.
    no_shift = (
        "no perturbation declared"
        if not declared
        else f"no measured column to compare before and after {', '.join(declared)}"
    )
    title = html.escape(f"Sweep {name}")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1200px}}table{{border-collapse:collapse;font-size:12px}}
td,th{{border:1px solid #ddd;padding:2px 6px;text-align:right}}th{{background:#f4f4f4}}
svg.plot{{width:420px;display:inline-block;margin:4px}}p.missing{{color:#8a5a00}}</style></head><body>
<h1>{title}</h1>
<p>{html.escape(note)}</p>
<p class="rule">{html.escape(_rule(measured, main))}</p>
<h2>Leaderboard (unperturbed models)</h2>
{_leaderboard(rows, columns)}
<h2>Metric against metric</h2>
{"".join(plots) or "<p>fewer than two measured columns</p>"}
<h2>Spread per method</h2>
{sections["spread"] or "<p>no measured column</p>"}
<h2>Faithfulness: target (P) against never-saw (N)</h2>
{sections["faithfulness"] or "<p>no measured metric column</p>"}
<h2>Forget against utility per method</h2>
{sections["tradeoff"] or "<p>no measured metric column</p>"}
<h2>Before and after perturbation</h2>
{sections["shift"] or f"<p>{html.escape(no_shift)}</p>"}
</body></html>
"""


__all__ = ["perturbation_svg", "render_page", "scatter_svg", "spread_svg"]
