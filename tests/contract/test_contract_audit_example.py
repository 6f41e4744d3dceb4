"""docs/extending.md's example audit, followed exactly, runs in ``remnant assess`` and in ``remnant sweep run``
with no other edit (C-H6, C-H7): routing reads its class's declarations (family ``uds``, references ``full`` and
``retain``), never its name. Both write its figures as readings through the one ``AuditMeasurement``, never as
cell records (C-H6), and name the references each figure was computed against (C-H7b)."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest
from assess_fixtures import tiny_pack, write_config
from test_contract_extending_docs import run_example

from remnant import registry
from remnant.cli import main
from remnant.records import CellRecord, Reading, RecordStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "sweep"))
from sweep_fixtures import tiny_spec, write_spec  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture
def example_audit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's example registered in a private copy of the registry (gone after the test). Every built-in is
    registered first: a package first imported inside the copy would register into it alone."""
    for kind in registry.KIND_PACKAGES:
        registry.names(kind)
    monkeypatch.setattr(registry, "_ENTRIES", dict(registry._ENTRIES))
    run_example("audit")
    assert registry.get("audit", "uds_strict").family == "uds"


def _readings(records: Path) -> list[Reading]:
    return [r for r in RecordStore(records).read() if isinstance(r, Reading)]


def _no_latent_cell(records: Path) -> None:
    """C-H6: no cell record holds a latent figure."""
    cells = [r for r in RecordStore(records).read() if isinstance(r, CellRecord) and r.surface == "latent"]
    assert all(c.value is None for c in cells), cells


@pytest.mark.usefixtures("example_audit")
def test_the_example_audit_runs_in_an_assessment(tmp_path: Path, tiny_llama_dir: Path) -> None:
    table = '\n[audits.uds]\nimplementation = "uds_strict"\nmax_items = 4\n\n[seeds]'
    config = write_config(
        tmp_path / "config.toml",
        pack=tiny_pack(tmp_path / "pack"),
        control=tiny_llama_dir,
        **{"[seeds]": table},
    )
    run = tmp_path / "run"
    assert main(["preregister", str(config), "--out", str(run)]) == 0
    assert main(["assess", str(config), "--out", str(run), "--quiet"]) == 0
    readings = _readings(run / "records.jsonl")
    assert [(r.measurement, r.audit, r.model_state, r.role) for r in readings] == [
        ("uds_strict", "uds", "post_removal", "removed")
    ]
    only = readings[0]
    assert only.component["name"] == "uds_strict" and only.component["params"]["tau"] == 0.2
    assert only.status == "run" and only.details["tau"] == 0.2 and not only.adjudicating
    # C-H7b: the figure (or the reason it has none) names the model with the target and the one that never saw it
    assert only.states[1:] == ["pre_removal", "control"]
    assert only.value is not None or "no figure" in str(only.reason)
    _no_latent_cell(run / "records.jsonl")


@pytest.mark.usefixtures("example_audit")
def test_the_example_audit_runs_in_a_sweep(tmp_path: Path, tiny_llama_dir: Path) -> None:
    text = tiny_spec(tiny_llama_dir, tmp_path / "store").replace(
        'audits = ["uds"]', 'audits = ["uds_strict"]'
    )
    spec = write_spec(tmp_path, text.replace("nf4 = true", "nf4 = false"))
    out = tmp_path / "out"
    assert main(["sweep", "run", str(spec), "--out", str(out), "--quiet"]) == 0
    readings = _readings(out / "records.jsonl")
    # one audit cell per model (target, never-saw, NPO), each one reading of the example, against both references
    assert len(readings) == 3 and {r.measurement for r in readings} == {"uds_strict"}
    assert all(r.status == "run" and r.component["params"]["tau"] == 0.2 for r in readings)
    assert all(r.details["tau"] == 0.2 and r.states[1:] == ["full", "retain"] for r in readings)
    _no_latent_cell(out / "records.jsonl")
    assert main(["sweep", "report", str(out)]) == 0  # the tables, rebuilt from the records alone
    with (out / "results.csv").open() as handle:
        rows = {r["model"]: r for r in csv.DictReader(handle)}
    assert set(rows) == {"target-full-s0", "never-retain-s0", "npo-lr0.001-s0"}
    assert all(r["status"] == "ok" for r in rows.values())
    # the table's column is each model's reading: patching the full model into itself leaves nothing to recover,
    # patching in the model that never saw the target recovers all of it (UDS = 1)
    column = {m: float(r["uds_strict"]) for m, r in rows.items()}
    assert sorted(column.values()) == sorted(r.value for r in readings if r.value is not None)
    assert abs(column["target-full-s0"]) < 1e-3 and column["never-retain-s0"] == pytest.approx(1.0)
