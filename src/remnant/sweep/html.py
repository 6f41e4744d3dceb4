"""The sweep's HTML page: the leaderboard and plots (metric against metric, per-method spread, target against
never-saw, forget against utility per method, before/after perturbation), inline SVG drawn by matplotlib without
pyplot (no script, no network). Every section draws one figure per measured column of the results table, and
says in words which columns have no value (the rule is printed on the page; the figures: remnant.sweep.figures).
Research output: nothing here adjudicates (C-H6).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from remnant.sweep.figures import (
    distribution_svg,
    perturbation_svg,
    scatter_svg,
    spread_svg,
    tradeoff_svg,
)
from remnant.sweep.figures import measured as has_value
from remnant.sweep.figures import number as _num

MAX_COLUMNS = 4


def _fmt(value: object) -> str:
    number = _num(value)
    if number is not None:
        return f"{number:.3f}"
    return "—" if value is None else html.escape(str(value))


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


__all__ = ["render_page"]
