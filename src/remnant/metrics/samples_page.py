"""``remnant eval --samples FILE``: the evaluation log's per-item generations as one HTML page (R23: every value is
the log's own, nothing rescored): one collapsed table per generation metric (the ROUGE metrics), rows capped at
:data:`MAX_ROWS` with the count left out stated; the metrics without generations are named in one sentence.
Pure: the same page renders from a saved ``TOFU_EVAL.json``."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping

#: Items shown per metric (the log holds them all).
MAX_ROWS = 50
TEXT_FIELDS = ("input", "ground_truth", "generation")


def _cell(value: object) -> str:
    values = value if isinstance(value, list) else [value]
    return "<br>".join(
        (f"{v:.3f}" if math.isfinite(v) else "—") if isinstance(v, float) else html.escape(str(v))
        for v in values
    )


def _metric_table(metric: str, by_index: Mapping[str, object], limit: int) -> str:
    rows = [(k, v) for k, v in by_index.items() if isinstance(v, Mapping)]
    scores = sorted({f for _, v in rows for f, x in v.items() if f not in TEXT_FIELDS and f != "index"})
    head = ["item", "prompt", "answer", "generation", *scores]
    lines = [
        f'<details class="samples" id="samples-{html.escape(metric)}"><summary>{html.escape(metric)}: '
        f"{min(len(rows), limit)} of {len(rows)} items"
        + (f", {len(rows) - limit} left out" if len(rows) > limit else "")
        + "</summary>",
        "<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>",
    ]
    for key, entry in rows[:limit]:
        cells = [html.escape(key), *(_cell(entry.get(f, "")) for f in TEXT_FIELDS)]
        cells += [_cell(entry.get(f, "")) for f in scores]
        lines.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    lines.append("</table></details>")
    return "\n".join(lines)


def samples_page(log: Mapping[str, object], *, title: str, limit: int = MAX_ROWS) -> str:
    """The page (module docstring) of a log in OpenUnlearning's layout (metric → entry)."""
    tables, without = [], []
    for metric in sorted(log):
        entry = log[metric]
        by_index = entry.get("value_by_index") if isinstance(entry, Mapping) else None
        if isinstance(by_index, Mapping) and any(
            isinstance(v, Mapping) and "generation" in v for v in by_index.values()
        ):
            tables.append(_metric_table(metric, by_index, limit))
        else:
            without.append(metric)
    note = (
        f"<p>No per-item generations (probability or aggregate metrics): {html.escape(', '.join(without))}.</p>"
        if without
        else ""
    )
    body = "\n".join(tables) or "<p>No metric of this log logs generations.</p>"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1400px}}table{{border-collapse:collapse;font-size:12px}}
td,th{{border:1px solid #ddd;padding:2px 6px;vertical-align:top;text-align:left}}th{{background:#f4f4f4}}
details{{margin:0.6em 0}}summary{{cursor:pointer;font-weight:600}}</style></head><body>
<h1>{html.escape(title)}</h1>
<p>Each generation metric's items: prompt, reference answer, the model's greedy generation and its scores, as the
log holds them. Collapsed: open a metric to read its items.</p>
{body}
{note}
</body></html>
"""


__all__ = ["MAX_ROWS", "samples_page"]
