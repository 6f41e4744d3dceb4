"""The sweep page draws one figure per measured column of the results table in every section, with the rule
printed on the page, and says in words which column has no value instead of drawing an empty plot (R23: the
table the records gave; research output, C-H6). The figures researchers expect from the papers: the target (P)
against never-saw (N) distribution per metric, before/after each perturbation per metric, and forget against
utility per method across strengths."""

from __future__ import annotations

import re
from typing import Any

from remnant.sweep.html import render_page

COLUMNS = ["kappa", "uds", "mia_loss", "mia_zlib", "empty_col"]
MODELS = (
    ("t0", "target", None, None),
    ("t1", "target", None, None),
    ("n0", "never_saw", None, None),
    ("n1", "never_saw", None, None),
    ("u0", "unlearned", "npo", "1"),
    ("u1", "unlearned", "npo", "2"),
    ("u2", "unlearned", "ga", "1"),
)


def sweep_rows(perturbations: tuple[str, ...] = ("none", "nf4", "relearn")) -> list[dict[str, Any]]:
    """A tiny results table: five metric columns past the first three, one empty in every row."""
    rows = []
    for i, (model, pool, method, strength) in enumerate(MODELS):
        for j, perturbation in enumerate(perturbations):
            rows.append(
                {
                    "model": model,
                    "pool": pool,
                    "method": method,
                    "strength": strength,
                    "status": "ok",
                    "perturbation": perturbation,
                    "utility": 0.5 + i / 20,
                    **{c: (i + 1) / 10 + j / 100 + k / 1000 for k, c in enumerate(COLUMNS[:-1])},
                    "empty_col": None,
                }
            )
    return rows


def _section(page: str, heading: str) -> str:
    return page.split(f"<h2>{heading}</h2>")[1].split("<h2>")[0]


def _titles(section: str) -> list[str]:
    return re.findall(r'<title id="[^"]+">([^<]*)</title>', section)


def test_every_measured_column_gets_its_own_figure_in_every_section() -> None:
    page = render_page("p", sweep_rows(), COLUMNS, ["none", "nf4", "relearn"], "note")
    measured = ["utility", *COLUMNS[:-1]]
    assert _titles(_section(page, "Spread per method")) == [f"{c} by method" for c in measured]
    assert _titles(_section(page, "Faithfulness: target (P) against never-saw (N)")) == [
        f"{c}: target (P) against never-saw (N)" for c in COLUMNS[:-1]
    ]
    assert _titles(_section(page, "Forget against utility per method")) == [
        f"{c} against utility per method across strengths" for c in COLUMNS[:-1]
    ]
    assert _titles(_section(page, "Before and after perturbation")) == [
        f"{c}: {p} against none" for c in measured for p in ("nf4", "relearn")
    ]
    # the pairs are capped, and the page says which columns they are drawn among
    assert len(_titles(_section(page, "Metric against metric"))) == 6
    assert "pairs are drawn among the first 4 of them only (utility, kappa, uds, mia_loss)" in page


def test_a_column_with_no_value_is_named_in_words_not_drawn() -> None:
    page = render_page("p", sweep_rows(), COLUMNS, ["none", "nf4"], "note")
    for heading in (
        "Spread per method",
        "Faithfulness: target (P) against never-saw (N)",
        "Forget against utility per method",
        "Before and after perturbation",
    ):
        section = _section(page, heading)
        assert '<p class="missing">empty_col: no value in any row, so no figure</p>' in section, heading
        assert not any(t.startswith("empty_col") for t in _titles(section)), heading


def test_a_pool_without_values_says_so_instead_of_a_one_sided_distribution() -> None:
    rows = [r for r in sweep_rows(("none",)) if r["pool"] != "never_saw"]
    page = render_page("p", rows, COLUMNS, ["none"], "note")
    section = _section(page, "Faithfulness: target (P) against never-saw (N)")
    assert "<svg" not in section
    assert (
        '<p class="missing">kappa: no unperturbed value in the target or the never-saw pool, so no figure</p>'
        in section
    )


def test_the_tradeoff_joins_each_method_in_order_of_strength() -> None:
    """npo's two strengths form one line of two points, in order of strength; ga's single strength is one point."""
    page = render_page("p", sweep_rows(("none",)), ["kappa"], ["none"], "note")
    section = _section(page, "Forget against utility per method")

    def path(i: int) -> list[tuple[float, float]]:
        group = re.search(rf'<g id="tradeoff-0-method-{i}"[^>]*>\s*<path d="M ([^"]+)"', section)
        assert group, i
        return [
            (float(x), float(y))
            for x, y in re.findall(r"(-?[\d.]+) (-?[\d.]+)", group.group(1).replace("L ", ""))
        ]

    ga, npo = path(0), path(1)
    assert len(ga) == 1 and len(npo) == 2
    # strength 1 (u0: kappa 0.5, utility 0.7) before strength 2 (u1: higher kappa and utility): SVG y grows down
    assert npo[0][0] < npo[1][0] and npo[0][1] > npo[1][1]


def test_no_utility_says_so_instead_of_a_tradeoff() -> None:
    rows = [{**r, "utility": None} for r in sweep_rows(("none",))]
    page = render_page("p", rows, ["kappa"], ["none"], "note")
    section = _section(page, "Forget against utility per method")
    assert "<svg" not in section
    assert "kappa: no unperturbed row holds both it and utility, so no figure" in section
