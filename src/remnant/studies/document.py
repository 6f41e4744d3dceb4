"""A study report as data — sections of text, tables and figures — rendered to Markdown and to one HTML page.

The HTML page is self-contained (inline CSS, inline SVG, no script), as the assessment reports are; text is
escaped, figures are the SVG elements :mod:`remnant.studies.plots` draws. Markdown carries the same text and tables
and names each figure (figures live in the HTML).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")

CSS = """
body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
table{border-collapse:collapse;margin:0.8em 0;font-size:0.9em}th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}.note{color:#555;font-size:0.92em}
.figs{display:flex;flex-wrap:wrap;gap:12px}.figs svg{width:420px;height:auto}.paper{background:#fbf8ef}
"""


@dataclass(frozen=True)
class Table:
    """A table: a header and rows of already formatted cells; ``paper`` columns are shaded in HTML."""

    header: list[str]
    rows: list[list[str]]
    paper_columns: frozenset[int] = frozenset()


@dataclass
class Section:
    """A heading with paragraphs, tables and figures (in that order)."""

    heading: str
    text: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[tuple[str, str]] = field(default_factory=list)  # (caption, svg)


@dataclass
class Document:
    """A whole report."""

    title: str
    sections: list[Section] = field(default_factory=list)


def column_table(
    items: Iterable[T], columns: Sequence[tuple[str, Callable[[T], str]]], paper: frozenset[int] = frozenset()
) -> Table:
    """A table with one row per item, from (header, cell) pairs: each column's header beside what fills it."""
    return Table([h for h, _ in columns], [[cell(x) for _, cell in columns] for x in items], paper)


def fmt(value: float | None, digits: int = 3) -> str:
    """A number for a table cell; an em dash for a missing one."""
    if value is None:
        return "—"
    return f"{value:.{digits}f}"


def fmt_ci(value: float | None, ci: tuple[float, float] | None) -> str:
    """``value [lo, hi]``."""
    if value is None or ci is None:
        return fmt(value)
    return f"{value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(doc: Document) -> str:
    lines = [f"# {doc.title}", ""]
    for section in doc.sections:
        lines += [f"## {section.heading}", ""]
        for paragraph in section.text:
            lines += [paragraph, ""]
        for table in section.tables:
            lines.append("| " + " | ".join(_md_cell(h) for h in table.header) + " |")
            lines.append("|" + "|".join("---" for _ in table.header) + "|")
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows]
            lines.append("")
        for caption, _ in section.figures:
            lines += [f"*Figure (in the HTML report): {caption}*", ""]
    return "\n".join(lines).rstrip() + "\n"


def _html_table(table: Table) -> str:
    def cell(tag: str, i: int, text: str) -> str:
        cls = ' class="paper"' if i in table.paper_columns else ""
        return f"<{tag}{cls}>{html.escape(text)}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(table.header))
    body = "".join(
        "<tr>" + "".join(cell("td", i, c) for i, c in enumerate(row)) + "</tr>" for row in table.rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def to_html(doc: Document) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(doc.title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(doc.title)}</h1>",
    ]
    for section in doc.sections:
        parts.append(f"<h2>{html.escape(section.heading)}</h2>")
        parts += [f"<p>{html.escape(p)}</p>" for p in section.text]
        parts += [_html_table(t) for t in section.tables]
        if section.figures:
            figures = "".join(
                f'<figure>{svg}<figcaption class="note">{html.escape(caption)}</figcaption></figure>'
                for caption, svg in section.figures
            )
            parts.append(f'<div class="figs">{figures}</div>')
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


__all__ = ["Document", "Section", "Table", "column_table", "fmt", "fmt_ci", "to_html", "to_markdown"]
