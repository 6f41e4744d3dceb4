"""remnant's metrics against OpenUnlearning's own code on the tiny model (optional: needs their source).

Set ``REMNANT_OPENUNLEARNING_SRC`` to the ``src/`` folder of a locuslab/open-unlearning checkout (checked at
d3d7cf9) to run it; ou_crosscheck.py (TOFU) and ou_crosscheck_muse.py (MUSE) run both in a subprocess (their package needs import stubs and shadows
generic module names, so it never enters this test process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

OU_SRC = os.environ.get("REMNANT_OPENUNLEARNING_SRC")

#: min-k++ divides by √σ², which their float32 Σp(log p)² − μ² keeps to a few digits on a flat random model.
TOLERANCE = {"mia_min_k_plus_plus": 5e-4}


def _crosscheck(script_name: str, model_dir: Path, tmp_path: Path) -> dict[str, dict[str, float]]:
    """Run one cross-check script in a subprocess and return its report."""
    from fixtures_models import build_tiny_model  # type: ignore[import-not-found]

    ref = build_tiny_model("llama", tmp_path / "ref", seed=1)
    script = Path(__file__).with_name(script_name)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, str(script), str(OU_SRC), str(model_dir), str(ref)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("CROSSCHECK ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    report: dict[str, dict[str, float]] = json.loads(lines[0].removeprefix("CROSSCHECK "))
    return report


@pytest.mark.skipif(not OU_SRC, reason="REMNANT_OPENUNLEARNING_SRC (their src/ folder) is not set")
def test_every_metric_matches_their_code(tiny_llama_dir: Path, tmp_path: Path) -> None:
    report = _crosscheck("ou_crosscheck.py", tiny_llama_dir, tmp_path)
    assert len(report) == 18
    for name, row in report.items():
        assert row["max_diff"] <= TOLERANCE.get(name, 1e-5), (name, row)
        assert row["ours"] == pytest.approx(row["theirs"], abs=1e-5), (name, row)


@pytest.mark.skipif(not OU_SRC, reason="REMNANT_OPENUNLEARNING_SRC (their src/ folder) is not set")
def test_every_muse_metric_matches_their_data_path_and_code(tiny_llama_dir: Path, tmp_path: Path) -> None:
    """Their QADataset (few-shot, predict_with_generate) and CompletionDataset build their side's items; every
    ROUGE entry's texts must be identical (max_diff asserts string equality)."""
    report = _crosscheck("ou_crosscheck_muse.py", tiny_llama_dir, tmp_path)
    assert len(report) == 12
    for name, row in report.items():
        assert row["max_diff"] <= TOLERANCE.get(name, 1e-5), (name, row)
        assert row["ours"] == pytest.approx(row["theirs"], abs=1e-5), (name, row)
