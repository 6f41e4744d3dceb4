"""The report in a real browser (headless Chromium): the page shows the verdict and both relearning curves (C-W5).

Skipped where Debian's ``chromium`` is not installed (``.ci/run`` installs it).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from report_helpers import hidden_facts, make_curve, make_statement

from remnant.report.plots import CONTROL_COLOUR, POST_COLOUR
from remnant.report.render import ReportEntry, render_report, write_html

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")


def _chromium(page: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                *extra,
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    entry = ReportEntry(statement=make_statement(hidden_facts()), curves=[make_curve()])
    return write_html(tmp_path_factory.mktemp("report") / "report.html", render_report(entry))


def test_browser_dom_shows_verdict_and_both_curves(page: Path) -> None:
    dom = _chromium(page, "--dump-dom").stdout
    verdict = re.search(r'<div class="verdict v-hidden" id="verdict-0">(.*?)</div>', dom, flags=re.S)
    assert verdict and '<span class="term">hidden</span>' in verdict.group(1)
    assert "suppressed, not removed" in verdict.group(1)
    for line in ("a0-curve0-post", "a0-curve0-control"):
        group = re.search(rf'<g id="{line}"[^>]*>(.*?)</g>', dom, flags=re.S)
        assert group, line
        path = re.search(r'<path d="M ([^"]+)"', group.group(1))
        # five checkpoints: one move and four line segments
        assert path and path.group(1).count("L") == 4, line


def _painted(page: Path, shot: Path) -> dict[str, int]:
    """Pixels within a small distance of each curve colour in a full-page screenshot."""
    import numpy as np
    from PIL import Image

    _chromium(page, "--window-size=1000,5000", "--hide-scrollbars", f"--screenshot={shot}")
    pixels = np.asarray(Image.open(shot).convert("RGB"), dtype=np.int32)
    counts = {}
    for colour in (POST_COLOUR, CONTROL_COLOUR):
        rgb = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)], dtype=np.int32)
        counts[colour] = int((np.abs(pixels - rgb).sum(axis=2) < 24).sum())
    return counts


def test_browser_paints_both_curves(page: Path, tmp_path: Path) -> None:
    """The curves are drawn, not only present: against the same report without curves, both colours gain pixels."""
    bare = write_html(tmp_path / "bare.html", render_report(make_statement(hidden_facts())))
    with_curves = _painted(page, tmp_path / "curves.png")
    without = _painted(bare, tmp_path / "bare.png")
    for colour in (POST_COLOUR, CONTROL_COLOUR):
        assert with_curves[colour] - without[colour] > 400, colour


def _sweep_rows() -> list[dict[str, object]]:
    """Two models per pool, metric columns past the first three and one column with no value (R23)."""
    rows: list[dict[str, object]] = []
    pools = (("target", None), ("never_saw", None), ("unlearned", "npo"))
    for i, (pool, method) in enumerate(p for p in pools for _ in range(2)):
        for j, perturbation in enumerate(("none", "nf4")):
            rows.append(
                {
                    "model": f"m{i}",
                    "pool": pool,
                    "method": method,
                    "strength": str(i % 2 + 1) if method else None,
                    "status": "ok",
                    "perturbation": perturbation,
                    "utility": 0.5 + i / 20,
                    **{
                        c: (i + 1) / 10 + j / 50 + k / 100
                        for k, c in enumerate(("kappa", "uds", "mia", "kappa_x"))
                    },
                    "never": None,
                }
            )
    return rows


def test_browser_shows_every_sweep_figure_and_the_empty_column_in_words(tmp_path: Path) -> None:
    """The sweep page in Chromium: one figure per measured column in each section, the P vs N colours painted,
    the column with no value named in words (R23, C-H6)."""
    from remnant.sweep.figures import N_COLOUR, P_COLOUR
    from remnant.sweep.html import render_page

    columns = ["kappa", "uds", "mia", "kappa_x", "never"]
    page = write_html(
        tmp_path / "sweep.html", render_page("tiny", _sweep_rows(), columns, ["none", "nf4"], "")
    )
    dom = _chromium(page, "--dump-dom").stdout
    titles = re.findall(r'<title id="[^"]+">([^<]*)</title>', dom)
    measured = ["utility", "kappa", "uds", "mia", "kappa_x"]
    for c in measured[1:]:
        assert f"{c}: target (P) against never-saw (N)" in titles, c
        assert f"{c} against utility per method across strengths" in titles, c
    for c in measured:
        assert f"{c} by method" in titles and f"{c}: nf4 against none" in titles, c
    assert not any(t.startswith("never") for t in titles)
    assert dom.count("never: no value in any row, so no figure") == 4
    shot = tmp_path / "sweep.png"
    _chromium(page, "--window-size=1280,8000", "--hide-scrollbars", f"--screenshot={shot}")
    import numpy as np
    from PIL import Image

    pixels = np.asarray(Image.open(shot).convert("RGB"), dtype=np.int32)
    for colour in (P_COLOUR, N_COLOUR):
        rgb = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)], dtype=np.int32)
        # the histograms' fill (alpha 0.35 on white) is drawn by no other figure: the bars are painted
        fill = 255 - 0.35 * (255 - rgb)
        assert int((np.abs(pixels - fill).sum(axis=2) < 12).sum()) > 2000, colour
