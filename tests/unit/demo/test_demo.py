"""``remnant demo --vectors``: every published vector through the verdict engine, with the V6 gloss."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from rich.console import Console

from remnant.cli import main
from remnant.demo_vectors import PACKAGED_VECTORS, gloss_table, vector_rows, vector_table
from remnant.stats import wilson_interval

pytestmark = pytest.mark.skipif(not PACKAGED_VECTORS.is_dir(), reason="needs the packaged vectors")


def test_every_vector_agrees() -> None:
    rows = vector_rows()
    assert len(rows) == len(list(PACKAGED_VECTORS.glob("*.json"))) >= 24
    assert all(row.agrees for row in rows), [r for r in rows if not r.agrees]
    by_name = {row.vector.split("_")[0]: row for row in rows}
    d2 = by_name["d2"]
    assert d2.verdict == "removed" and d2.gloss == "held up under attack (removed)"
    assert d2.g_star == pytest.approx(15 / 300) and d2.g_star_ci95 == pytest.approx(wilson_interval(15, 300))
    assert d2.n == 300 and d2.r21_ceiling == "W4"
    assert by_name["d1"].verdict == "refused: phi"  # Annex D.1 declares no utility floor (R9)
    assert by_name["d4"].verdict == "partial"
    assert {row.verdict for row in rows} >= {"removed", "hidden", "utility-collapsed", "partial"}


def test_tables_render() -> None:
    console = Console(record=True, width=220)
    console.print(vector_table())
    console.print(gloss_table())
    text = console.export_text()
    assert "suppressed, not removed (hidden)" in text and "broke the model (utility-collapsed)" in text
    assert "✗" not in text
    assert "Nothing. The removal question could not be answered" in text


def test_cli_demo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--vectors", "--out", str(tmp_path / "out")]) == 0
    written = json.loads((tmp_path / "out" / "vectors.json").read_text())
    assert len(written) == len(vector_rows())
    assert "agree with their expected verdict" in capsys.readouterr().out


def test_cli_demo_flags_a_disagreement_and_missing_vectors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vectors = tmp_path / "vectors"
    vectors.mkdir()
    source = next(PACKAGED_VECTORS.glob("e02_*.json"))
    data = json.loads(source.read_text())
    data["expected"]["verdict"] = "removed"  # the engine says hidden: the demo must say so
    (vectors / source.name).write_text(json.dumps(data))
    rows = vector_rows(vectors)
    assert not rows[0].agrees
    assert main(["demo", "--vectors", str(vectors)]) == 1
    shutil.rmtree(vectors)
    vectors.mkdir()
    assert main(["demo", "--vectors", str(vectors)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"remnant demo: error: {vectors}: no conformance test vectors (*.json) found")
    assert "interim" not in error and "\n" not in error


def test_demo_vectors_runs_from_an_installed_wheel(tmp_path: Path) -> None:
    """The vectors are package data: a wheel built from the source carries every one, and ``remnant demo
    --vectors`` run from that wheel's install (not the checkout) finds them and agrees with each (V1, V6)."""
    root = Path(__file__).resolve().parents[3]
    source = tmp_path / "source"  # built from a copy, so the build leaves nothing in the checkout
    shutil.copytree(
        root / "src" / "remnant", source / "src" / "remnant", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (root / name).exists():
            shutil.copy(root / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "whl"), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "whl").glob("remnant-*.whl")
    packaged = {n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("remnant/data/vectors/")}
    assert packaged == {f"remnant/data/vectors/{p.name}" for p in PACKAGED_VECTORS.glob("*.json")}
    site = tmp_path / "site"
    subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(site), str(wheel)], check=True, capture_output=True
    )
    code = (
        "import sys, remnant\nassert remnant.__file__.startswith(sys.argv[1]), remnant.__file__\n"
        "from remnant.cli import main\nsys.exit(main(['demo', '--vectors']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(site)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    count = len(packaged)
    assert f"{count} vectors, {count} agree with their expected verdict" in done.stdout
