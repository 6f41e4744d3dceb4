"""The local executor end to end on a tiny pool: records, the results table, reruns, LoRA and delta checkpoints,
a diverged removal, a failing task, and a driver killed in the middle of a cell."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sweep_fixtures import TINY_METHODS, comparable, tiny_spec, write_spec

from remnant.cli import main
from remnant.records import RECORDS_FILE, CellRecord, Event, Reading, RecordStore

#: Four removals: NPO (a delta of the full install), grad ascent through LoRA (an adapter), an NPO at lr 1
#: whose loss passes 1.01 × its first (a diverged run, Annex B.6), and a task vector taken from the install
#: (installed − never-modified: the sweep must hand it the control).
METHODS = (
    TINY_METHODS
    + """
[[removal.methods]]
name = "grad_ascent"
label = "ga-lora"
params = { epochs = 1, batch_size = 4, grad_accum = 1, warmup_epochs = 0.0, lora_rank = 4 }

[[removal.methods]]
name = "npo"
label = "npo-div"
params = { epochs = 2, batch_size = 4, grad_accum = 1, warmup_epochs = 0.0, divergence_factor = 1.01 }
grid = { lr = [1.0] }

[[removal.methods]]
name = "task_vector"
params = { scale = 0.5 }
"""
)
MODELS = (
    "target-full-s0",
    "never-retain-s0",
    "npo-lr0.001-s0",
    "ga-lora-default-s0",
    "npo-div-lr1-s0",
    "task_vector-default-s0",
)


def _run(spec: Path, out: Path, *extra: str) -> dict[str, Any]:
    code = main(["sweep", "run", str(spec), "--out", str(out), "--quiet", *extra])
    assert code == 0
    return {}


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory, tiny_llama_dir: Path) -> Iterator[dict[str, Path]]:
    root = tmp_path_factory.mktemp("sweep")
    spec = write_spec(root, tiny_spec(tiny_llama_dir, root / "store", relearn=True, methods=METHODS))
    out = root / "out"
    stage1_made: list[int] = []
    with pytest.MonkeyPatch.context() as patch:
        import remnant.latent as latent

        real = latent.stage1
        patch.setattr(latent, "stage1", lambda *a, **k: stage1_made.append(1) or real(*a, **k))
        assert main(["sweep", "run", str(spec), "--out", str(out), "--quiet"]) == 0
    assert main(["sweep", "report", str(out)]) == 0
    yield {"root": root, "spec": spec, "out": out, "store": root / "store", "stage1_made": len(stage1_made)}


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as handle:
        return list(csv.DictReader(handle))


def test_the_results_table_has_a_row_per_model_and_perturbation_with_labels_and_metrics(
    swept: dict[str, Path],
) -> None:
    rows = _rows(swept["out"] / "results.csv")
    assert [(r["model"], r["perturbation"]) for r in rows] == [
        (m, p) for m in MODELS for p in ("none", "nf4", "relearn")
    ]
    columns = list(rows[0])
    assert columns[:11] == [
        "model",
        "pool",
        "method",
        "strength",
        "seed",
        "hyperparameters",
        "parent",
        "perturbation",
        "status",
        "error",
        "utility",
    ]
    assert columns[11:] == ["forget_Q_A_Prob", "forget_truth_ratio", "kappa", "w", "uds"]
    by = {(r["model"], r["perturbation"]): r for r in rows}
    full, never = by[("target-full-s0", "none")], by[("never-retain-s0", "none")]
    # UDS patches the audited model into the full model: the full model itself reads 0, the retain model 1
    assert abs(float(full["uds"])) < 1e-3 and float(never["uds"]) == pytest.approx(1.0)
    assert (full["pool"], never["pool"], by[("npo-lr0.001-s0", "none")]["pool"]) == (
        "target",
        "never_saw",
        "unlearned",
    )
    npo = by[("npo-lr0.001-s0", "none")]
    assert (npo["method"], npo["strength"], npo["seed"], npo["parent"]) == (
        "npo",
        "lr=0.001",
        "0",
        "target-full-s0",
    )
    assert (
        json.loads(npo["hyperparameters"])["lr"] == 1e-3 and json.loads(npo["hyperparameters"])["beta"] == 0.1
    )
    assert all(0.0 < float(r["forget_Q_A_Prob"]) < 1.0 for r in rows if r["status"] == "ok")
    assert by[("npo-lr0.001-s0", "nf4")]["forget_Q_A_Prob"] != npo["forget_Q_A_Prob"]  # NF4 moved the weights
    assert {r["status"] for r in rows if r["model"] != "npo-div-lr1-s0"} == {"ok"}


def test_the_worker_makes_uds_stage_one_once_for_the_whole_pool(swept: dict[str, Any]) -> None:
    """Every UDS cell of the pool (each model, each perturbation) reads one stage 1, made once by this process's
    worker and kept (its figures and the full model's prefixes), not once per model."""
    readings = [r for r in RecordStore(swept["out"] / RECORDS_FILE).read() if isinstance(r, Reading)]
    uds = [r for r in readings if r.audit == "uds" and r.status == "run"]
    assert len(uds) >= 4 and swept["stage1_made"] == 1


def test_a_diverged_removal_is_a_recorded_outcome_in_the_table(swept: dict[str, Path]) -> None:
    rows = [r for r in _rows(swept["out"] / "results.csv") if r["model"] == "npo-div-lr1-s0"]
    assert [r["status"] for r in rows] == ["diverged"] * 3
    assert all("factor × initial" in r["error"] and r["kappa"] == "" for r in rows)
    events = [r for r in RecordStore(swept["out"] / RECORDS_FILE).read() if isinstance(r, Event)]
    # one stage_finished per build (two installs, NPO, LoRA GA, the task vector), one diverged
    assert sorted(e.kind for e in events) == ["diverged", *["stage_finished"] * 5]


def test_the_items_table_and_the_page(swept: dict[str, Path]) -> None:
    items = _rows(swept["out"] / "items.csv")
    metrics = {r["metric"] for r in items}
    assert {"forget_Q_A_Prob", "forget_Q_A_PARA_Prob", "forget_Q_A_PERT_Prob", "kappa"} <= metrics
    assert "uds" not in metrics  # an audit writes readings, one figure per model (C-H6), no per-example items
    probs = [
        float(r["value"])
        for r in items
        if r["metric"] == "forget_Q_A_Prob" and r["model"] == "target-full-s0" and r["perturbation"] == "none"
    ]
    table = {r["model"]: r for r in _rows(swept["out"] / "results.csv") if r["perturbation"] == "none"}
    assert sum(probs) / len(probs) == pytest.approx(float(table["target-full-s0"]["forget_Q_A_Prob"]))
    page = (swept["out"] / "report.html").read_text()
    assert page.count("<svg") >= 6 and "Leaderboard" in page and "npo-lr0.001-s0" in page
    import pyarrow.parquet as pq

    parquet = pq.read_table(swept["out"] / "results.parquet")
    assert (
        parquet.num_rows == 3 * len(MODELS)
        and parquet.schema.field("uds").type == "double"
        and parquet.schema.field("seed").type == "int64"
    )
    assert pq.read_table(swept["out"] / "items.parquet").num_rows == len(items)


def test_a_rerun_skips_every_finished_cell(
    swept: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    before = (swept["out"] / RECORDS_FILE).read_bytes()
    capsys.readouterr()
    assert main(["sweep", "run", str(swept["spec"]), "--out", str(swept["out"]), "--quiet"]) == 0
    summary = json.loads(capsys.readouterr().out)
    # per model, 3 perturbations x (one cell per field metric: forget_Q_A_Prob, forget_truth_ratio and its two
    # dependencies; kappa; retain kappa; uds)
    per_model = 3 * (4 + 3)
    assert (summary["computed"], summary["builds"], summary["done_before"]) == (0, 0, per_model * len(MODELS))
    assert (swept["out"] / RECORDS_FILE).read_bytes() == before


def test_lora_removals_are_stored_as_adapters_and_load_to_the_built_weights(swept: dict[str, Path]) -> None:
    import shutil

    from remnant.errors import IntegrityError
    from remnant.models import load_model
    from remnant.states.store import ADAPTER, DELTA, CheckpointStore
    from remnant.sweep.pins import read_pins
    from remnant.sweep.pool import Pool
    from remnant.sweep.weights import load_chain

    plan = json.loads((swept["out"] / "plan.json").read_text())
    pool = Pool.from_dict(plan["pool"])
    store = CheckpointStore(swept["store"])
    pins = read_pins(swept["out"] / RECORDS_FILE)
    lora, delta = pool.model("ga-lora-default-s0"), pool.model("npo-lr0.001-s0")
    assert (store.folder(lora.state) / ADAPTER).is_file() and not (store.folder(lora.state) / DELTA).exists()
    assert store.meta(lora.state).parent == pool.model("target-full-s0").state
    adapter_bytes = (store.folder(lora.state) / ADAPTER).stat().st_size
    assert adapter_bytes * 5 < (store.folder(delta.state) / DELTA).stat().st_size
    assert store.meta(pool.model("npo-div-lr1-s0").state).status == "diverged"
    assert pins[pool.model("npo-div-lr1-s0").state].status == "diverged"  # outcomes are pinned too
    base = Path(plan["base_path"])
    pinned = pins[lora.state].weights_digest
    model = load_chain(store, lora.state, lambda: load_model(base).model, expected=pinned)
    assert model is not None
    copy = CheckpointStore(swept["root"] / "tampered")
    shutil.copytree(swept["store"] / "ckpt", copy.root / "ckpt")
    weights = copy.folder(delta.state) / DELTA
    data = bytearray(weights.read_bytes())
    data[-3] ^= 0x55
    weights.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match="store was changed after the build"):
        load_chain(
            copy, delta.state, lambda: load_model(base).model, expected=pins[delta.state].weights_digest
        )


def test_export_writes_a_model_folder_that_loads_to_the_stored_weights(
    swept: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A LoRA removal (adapter over a delta over the base) exported as a plain safetensors folder loads, through
    the hostile-input loader, to exactly the chain's weights; an unknown model id is exit 2 naming the plan."""
    from remnant.models import load_model
    from remnant.models.identity import weights_digest_of as weights_digest
    from remnant.states.store import CheckpointStore
    from remnant.sweep.pins import read_pins
    from remnant.sweep.pool import Pool
    from remnant.sweep.weights import load_chain

    plan = json.loads((swept["out"] / "plan.json").read_text())
    lora = Pool.from_dict(plan["pool"]).model("ga-lora-default-s0")
    pinned = read_pins(swept["out"] / RECORDS_FILE)[lora.state].weights_digest
    folder = tmp_path / "ga-lora"
    assert main(["sweep", "export", str(swept["out"]), "ga-lora-default-s0", "--out", str(folder)]) == 0
    assert (folder / "model.safetensors").is_file() and not list(folder.glob("*.bin"))
    exported = load_model(folder).model
    built = load_chain(
        CheckpointStore(swept["store"]),
        lora.state,
        lambda: load_model(Path(plan["base_path"])).model,
        expected=pinned,
    )
    assert weights_digest(exported) == weights_digest(built)
    capsys.readouterr()
    assert main(["sweep", "export", str(swept["out"]), "no-such-model", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "plan.json" in err and "no model 'no-such-model'" in err and "R23" in err
    assert not (tmp_path / "x").exists()


def test_the_studies_read_the_tables_a_sweep_reports(
    swept: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The sweep/study contract end to end: `remnant study meta-eval` and `recovery` run on a real sweep's
    report (no hand-written table), and read every measurement column the sweep wrote."""
    assert main(["study", "meta-eval", str(swept["out"]), "--out", str(tmp_path / "meta")]) == 0
    meta = json.loads((tmp_path / "meta" / "meta-eval.json").read_text())
    text = json.dumps(meta)
    for column in ("forget_Q_A_Prob", "forget_truth_ratio", "kappa", "uds"):
        assert f'"{column}"' in text, column
    assert main(["study", "recovery", str(swept["out"]), "--out", str(tmp_path / "recovery")]) == 0
    assert (tmp_path / "recovery" / "recovery.md").is_file()
    capsys.readouterr()


def _small(root: Path, model_dir: Path, store: Path, **kw: Any) -> Path:
    return write_spec(root, tiny_spec(model_dir, store, name="small", **kw))


def test_a_failing_task_is_recorded_as_failed_and_the_sweep_goes_on(
    tmp_path: Path, swept: dict[str, Path], tiny_llama_dir: Path
) -> None:
    from remnant.sweep.driver import run_sweep
    from remnant.sweep.executors import LocalExecutor
    from remnant.sweep.prepare import prepare

    spec = _small(tmp_path, tiny_llama_dir, swept["store"], retries=0)
    out = tmp_path / "out"
    prepared = prepare(spec, out=out)
    fault = f"raise:{tmp_path / 'fired'}:npo-lr0.001-s0 [nf4] kappa"
    summary = run_sweep(prepared, out, LocalExecutor(0, threads=1), say=lambda m: None, fault=fault)
    assert summary.failed_tasks == ["npo-lr0.001-s0"] and summary.computed == len(prepared.cells)
    assert main(["sweep", "report", str(out)]) == 0
    rows = {(r["model"], r["perturbation"]): r for r in _rows(out / "results.csv")}
    assert rows[("npo-lr0.001-s0", "none")]["status"] == "ok"  # recorded before the task crashed
    failed = rows[("npo-lr0.001-s0", "nf4")]
    assert failed["status"] == "failed" and "RuntimeError: injected fault" in failed["error"]
    assert {r["status"] for (m, _), r in rows.items() if m != "npo-lr0.001-s0"} == {"ok"}
    # A plain rerun keeps the failure (a recorded outcome); --retry-failed runs exactly the failed cells again,
    # appends after the old records, and the table reads the retry.
    before = (out / RECORDS_FILE).read_bytes()
    assert run_sweep(prepared, out, LocalExecutor(0, threads=1), say=lambda m: None).computed == 0
    failed_keys = {
        r.cell_key
        for r in RecordStore(out / RECORDS_FILE).read()
        if isinstance(r, CellRecord | Reading) and r.status == "failed"
    }
    audit_keys = {c.key for c in prepared.cells if c.entry == "uds"}
    assert (
        failed_keys & audit_keys
    )  # the crashed task's audit cells wrote failed readings, and are retried too
    retried = run_sweep(prepared, out, LocalExecutor(0, threads=1), say=lambda m: None, retry_failed=True)
    assert retried.computed == len(failed_keys) and not retried.failed_tasks
    last = {r.cell_key: r.status for r in RecordStore(out / RECORDS_FILE).read() if isinstance(r, Reading)}
    assert {last[k] for k in failed_keys & audit_keys} == {"run"}
    assert (out / RECORDS_FILE).read_bytes().startswith(before)
    assert main(["sweep", "report", str(out)]) == 0
    again = {(r["model"], r["perturbation"]): r for r in _rows(out / "results.csv")}
    assert {r["status"] for r in again.values()} == {"ok"}
    assert again[("npo-lr0.001-s0", "none")] == rows[("npo-lr0.001-s0", "none")]


def test_retry_failed_reruns_an_audit_cell_whose_readings_failed(
    tmp_path: Path, swept: dict[str, Path], tiny_llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An audit that raised inside its cell writes failed readings and no cell record (C-H6); ``--retry-failed``
    computes those cells again like any failed cell, and the retry's readings follow the failed ones."""
    from remnant.latent import UDSAudit
    from remnant.sweep.driver import run_sweep
    from remnant.sweep.executors import LocalExecutor
    from remnant.sweep.prepare import prepare

    def broken(self: Any, *args: Any) -> Any:
        raise RuntimeError("audit broke")

    spec = _small(tmp_path, tiny_llama_dir, swept["store"])
    out = tmp_path / "out"
    prepared = prepare(spec, out=out)
    with monkeypatch.context() as patch:
        patch.setattr(UDSAudit, "read", broken)
        assert not run_sweep(prepared, out, LocalExecutor(0, threads=1), say=lambda m: None).failed_tasks
    audit_keys = {c.key for c in prepared.cells if c.entry == "uds"}
    readings = [r for r in RecordStore(out / RECORDS_FILE).read() if isinstance(r, Reading)]
    assert {r.cell_key for r in readings} == audit_keys and {r.status for r in readings} == {"failed"}
    assert main(["sweep", "report", str(out)]) == 0
    assert run_sweep(prepared, out, LocalExecutor(0, threads=1), say=lambda m: None).computed == 0
    retried = run_sweep(prepared, out, LocalExecutor(0, threads=1), say=lambda m: None, retry_failed=True)
    assert retried.computed == len(audit_keys) > 0
    last = {r.cell_key: r.status for r in RecordStore(out / RECORDS_FILE).read() if isinstance(r, Reading)}
    assert set(last.values()) == {"run"}


def test_the_local_executor_retries_a_crashed_task(monkeypatch: pytest.MonkeyPatch) -> None:
    from remnant.sweep import measure
    from remnant.sweep.executors import LocalExecutor, TaskFailed

    calls: list[frozenset[str]] = []

    def flaky(ws: Any, model_id: str, done: frozenset[str]) -> Iterator[Any]:
        calls.append(done)
        yield measure.CellOutput("k1", "first", model_id, ())
        if len(calls) == 1:
            raise MemoryError("out of memory")
        yield measure.CellOutput("k2", "second", model_id, ())

    monkeypatch.setattr(measure, "measure_model", flaky)
    monkeypatch.setattr(LocalExecutor, "workspace", lambda self, ws: ws)
    items = [item for _, item in LocalExecutor(1, threads=1).run(None, [("m", frozenset())])]  # type: ignore[arg-type]
    assert [getattr(i, "key", None) for i in items] == ["k1", "k1", "k2"]
    assert calls == [frozenset(), frozenset({"k1"})]  # the retry skips the cell already delivered
    calls.clear()
    items = [item for _, item in LocalExecutor(0, threads=1).run(None, [("m", frozenset())])]  # type: ignore[arg-type]
    assert isinstance(items[-1], TaskFailed) and items[-1].error.startswith("MemoryError: out of memory")


KILL = """
import sys
from pathlib import Path
from remnant.sweep.driver import run_sweep
from remnant.sweep.executors import LocalExecutor
from remnant.sweep.prepare import prepare
spec, out, fault = sys.argv[1:4]
prepared = prepare(spec, out=Path(out))
run_sweep(prepared, Path(out), LocalExecutor(0, threads=1), say=lambda m: None, fault=fault)
"""


def test_killing_the_driver_mid_sweep_loses_at_most_the_cell_in_flight(
    tmp_path: Path, swept: dict[str, Path], tiny_llama_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _small(tmp_path, tiny_llama_dir, swept["store"])
    out, clean = tmp_path / "killed", tmp_path / "clean"
    label = "never-retain-s0 [nf4] metrics/forget_Q_A_Prob"  # one cell per field metric
    fault = f"exit:{tmp_path / 'fired'}:{label}"
    done = subprocess.run(
        [sys.executable, "-c", KILL, str(spec), str(out), fault], capture_output=True, text=True
    )
    assert done.returncode == 3, done.stderr[-2000:]
    plan = json.loads((out / "plan.json").read_text())
    order = [c["key"] for c in plan["cells"]]
    killed_at = next(
        i
        for i, c in enumerate(plan["cells"])
        if (c["model"], c["perturbation"], c["entry"])
        == ("never-retain-s0", "nf4", "metrics/forget_Q_A_Prob")
    )
    store = RecordStore(out / RECORDS_FILE).read()
    recorded = [r.cell_key for r in store if isinstance(r, CellRecord | Reading)]  # an audit: readings (C-H6)
    assert list(dict.fromkeys(recorded)) == order[:killed_at]  # every cell before the one in flight, whole
    before = (out / RECORDS_FILE).read_bytes()
    capsys.readouterr()
    assert main(["sweep", "run", str(spec), "--out", str(out), "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["computed"] == len(order) - killed_at
    assert (out / RECORDS_FILE).read_bytes().startswith(before)
    assert main(["sweep", "run", str(spec), "--out", str(clean), "--quiet"]) == 0
    assert comparable(out / RECORDS_FILE) == comparable(clean / RECORDS_FILE)
