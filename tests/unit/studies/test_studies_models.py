"""The model-side studies on the tiny random Llama: the readmission study (C-H9) built on latent-probe's states,
and the Goodhart arm (the J-Access paper, Test 3), which is a study and never a registered removal method (C-H6)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from remnant import registry
from remnant.cli import main
from remnant.studies.config import GoodhartConfig, ReadmissionConfig
from remnant.studies.goodhart_core import GoodhartResult
from remnant.studies.goodhart_objective import AuditPenalty
from remnant.studies.readmission import Cells, ReadmissionResult, decide


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: threads are overhead (tests/unit/latent/conftest.py)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture(scope="module")
def uds_study(tiny_llama_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("readmission")
    argv = [
        "study",
        "readmission",
        "uds",
        "--model",
        str(tiny_llama_dir),
        "--preset",
        "tiny",
        "--out",
        str(out),
    ]
    assert main([*argv, "--quiet"]) == 0
    return out


def test_readmission_of_uds_on_the_tiny_model(uds_study: Path) -> None:
    result = ReadmissionResult.model_validate_json((uds_study / "readmission.json").read_text())
    cells = result.cells
    assert result.adjudicating is False and result.estimator == "uds"
    assert {c.method for c in cells.cells} == {"npo", "task_vector"}
    assert {c.setting for c in cells.cells} == {"tau=0.03", "tau=0.05", "tau=0.1"}
    assert {c.layer for c in cells.cells} == {0, 1} and {c.position for c in cells.cells} == {"entity span"}
    for c in cells.cells:
        if c.evaluable:
            assert c.procedure is not None and c.content is not None
            assert c.procedure.ci95[0] <= c.procedure.value <= c.procedure.ci95[1]
    # UDS reads one position and the tiny model two layers: C-H4's coverage is out of reach, so the rule can only
    # demote (a failed null) or say "not evaluable"
    assert not result.coverage.complete
    assert result.decision in ("demote", "not evaluable")
    assert json.loads((uds_study / "prereg.json").read_text())["values"]["estimator"] == "uds"


def test_the_decision_is_recomputed_from_the_cells_alone(
    uds_study: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original = ReadmissionResult.model_validate_json((uds_study / "readmission.json").read_text())
    cells = uds_study / "readmission-cells.json"
    again = uds_study.parent / "again"
    assert main(["study", "readmission", "uds", "--cells", str(cells), "--out", str(again)]) == 0
    redone = ReadmissionResult.model_validate_json((again / "readmission.json").read_text())
    assert redone.model_dump(exclude={"registration", "config"}) == original.model_dump(
        exclude={"registration", "config"}
    )
    assert f"uds: {original.decision}" in capsys.readouterr().out


def test_a_rerun_reads_its_records_and_trains_only_the_runs_not_recorded(
    uds_study: Path, tiny_llama_dir: Path, tmp_path: Path, training_calls: list[str]
) -> None:
    """Each run is one engine cell (R23): a rerun into the study's folder trains no state, and a study killed
    after its first run trains only the second run's states (the seed's install and twin, then its two
    removals); both give the uninterrupted run's cells byte for byte."""
    import shutil

    folder = tmp_path / "study"
    shutil.copytree(uds_study, folder)
    argv = ["study", "readmission", "uds", "--model", str(tiny_llama_dir), "--preset", "tiny"]
    argv += ["--out", str(folder), "--quiet"]
    original = (uds_study / "readmission-cells.json").read_bytes()
    assert main(argv) == 0
    assert training_calls == [] and (folder / "readmission-cells.json").read_bytes() == original

    records = folder / "records.jsonl"
    lines = records.read_text().splitlines(keepends=True)
    keys = list(dict.fromkeys(json.loads(line)["cell_key"] for line in lines))
    assert len(keys) == 2  # npo and task_vector on seed 0
    records.write_text("".join(line for line in lines if json.loads(line)["cell_key"] == keys[0]))
    assert main(argv) == 0
    assert training_calls == ["install", "install", "removal", "removal"]
    assert (folder / "readmission-cells.json").read_bytes() == original
    assert len(records.read_text().splitlines()) == len(lines)


def test_a_study_record_that_is_not_a_runs_is_refused(uds_study: Path, tmp_path: Path) -> None:
    """The study's records are read back as hostile input: a reading whose details were rewritten is refused
    with the file and the cell named, not a traceback."""
    from remnant.errors import RecordError
    from remnant.records import RecordStore, chained_lines
    from remnant.studies.run_cells import cells_from_readings

    readings = RecordStore(uds_study / "records.jsonl").read()
    cells, runs = cells_from_readings(readings, "records.jsonl")  # type: ignore[arg-type]
    assert len(runs) == 2 and len(cells) == 12
    bad = [readings[0].model_copy(update={"details": {"run": {"gates": 1}}}), *readings[1:]]
    (tmp_path / "records.jsonl").write_bytes(b"".join(chained_lines(bad)))
    with pytest.raises(RecordError, match="records.jsonl: reading 'run' of cell"):
        cells_from_readings(RecordStore(tmp_path / "records.jsonl").read(), "records.jsonl")  # type: ignore[arg-type]
    # a study's per-run result (latent-probe, Goodhart, auditors) that is not what it wrote: refused, not raised raw
    from remnant.studies.latent_probe import RunResult
    from remnant.studies.run_cells import run_results

    for result in (None, "not json", '{"model": 1}'):
        forged = readings[0].model_copy(update={"details": {"result": result}})
        with pytest.raises(RecordError, match="records.jsonl: reading 'run' of cell"):
            run_results([forged], "records.jsonl", RunResult.model_validate_json)  # type: ignore[list-item]


def test_readmission_of_j_access_reads_jocc_per_layer_position_and_k(tiny_llama_dir: Path) -> None:
    from remnant.studies.readmission_run import run_cells

    cfg = ReadmissionConfig(
        estimator="j_access",
        preset="tiny",
        design={
            "models": [str(tiny_llama_dir)],
            "methods": ["npo"],
            "attributes": ["home_town"],
            "utility_floor": 0.3,
        },
        estimator_params={"ks": [10, 20], "positions": [1, 4]},
    )
    data: Cells = run_cells(cfg)
    assert {(c.layer, c.position, c.setting) for c in data.cells} == {
        (layer, f"last {p}", f"k={k}") for layer in (0, 1) for p in (1, 4) for k in (10, 20)
    }
    assert data.fitted_hyperparameters == ["k"] and len(data.runs) == 1
    read = [c for c in data.cells if c.removed is not None]
    assert read and all(c.content is not None for c in read)
    result = decide(data, cfg)
    assert result.decision in ("demote", "not evaluable", "retain (admissible, non-predictive)")


def test_the_goodhart_objective_is_never_a_registered_method() -> None:
    """C-H6: a latent audit is never a removal criterion, so its suppression objective is not offered as one."""
    for kind in ("method", "audit", "attack", "metric"):
        for name in registry.names(kind):
            cls = registry.get(kind, name)
            assert not (isinstance(cls, type) and issubclass(cls, AuditPenalty)), (kind, name)
            assert "goodhart" not in name
    base = registry.create("method", "npo", {})
    penalty = AuditPenalty(base, 5.0, lambda model, idx: torch.zeros(()), "uds")
    assert penalty.spec.kind == "study_objective" and penalty.spec.to_dict()["params"]["weight"] == 5.0


def test_goodhart_study_on_the_tiny_model(
    tiny_llama_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["study", "goodhart", "--model", str(tiny_llama_dir), "--preset", "tiny", "--audit", "uds"]
    assert main([*argv, "--weights", "0", "10", "--seeds", "0", "--out", str(tmp_path), "--quiet"]) == 0
    result = GoodhartResult.model_validate_json((tmp_path / "goodhart.json").read_text())
    assert [(r.weight, r.seed) for r in result.rows] == [(0.0, 0), (10.0, 0)]
    base, penalised = result.rows
    assert base.status == penalised.status == "completed"
    assert base.audit is not None and penalised.audit is not None and base.recovery is not None
    # the penalty did its job on what it optimises: the patched entity log-prob fell
    assert penalised.surrogate_final is not None and base.surrogate_final is not None
    assert penalised.surrogate_final < base.surrogate_final
    assert result.audit_direction == "higher" and result.goodhart in (True, False)
    assert result.finding in capsys.readouterr().out
    assert "never offered" in (tmp_path / "goodhart.md").read_text()

    # each (λ, seed) run is one engine cell (R23): the same command again installs and trains nothing
    from remnant.states import builder

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a recorded run was trained again")

    first = (tmp_path / "goodhart.json").read_text()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(builder, "train_install", refuse)
        mp.setattr(builder, "train_removal", refuse)
        assert main([*argv, "--weights", "0", "10", "--seeds", "0", "--out", str(tmp_path), "--quiet"]) == 0
    again = GoodhartResult.model_validate_json((tmp_path / "goodhart.json").read_text())
    assert again.model_dump(exclude={"registration"}) == result.model_dump(exclude={"registration"})
    assert json.loads(first)["rows"] == json.loads((tmp_path / "goodhart.json").read_text())["rows"]


def test_goodhart_j_access_penalty_lowers_its_surrogate(tiny_llama_dir: Path) -> None:
    from remnant.studies.goodhart import run_goodhart

    cfg = GoodhartConfig(
        audit="j_access", preset="tiny", weights=[0.0, 10.0], seeds=[0], design={"attributes": ["home_town"]}
    )
    result = run_goodhart(cfg, str(tiny_llama_dir))
    base, penalised = result.rows
    assert penalised.surrogate_final is not None and base.surrogate_final is not None
    assert penalised.surrogate_final < base.surrogate_final - 0.5
    assert "soft maximum" in result.surrogate and result.audit_direction == "lower"
    summary: dict[str, Any] = result.model_dump()
    assert len(summary["by_weight"]) == 2


def test_a_second_estimator_on_kept_states_trains_nothing(
    uds_study: Path,
    tiny_llama_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--states``: the direction study keeps every trained state; the UDS study on the same design then loads
    them all (any training refused here) and reads the same cells as the UDS study that trained its own (R23)."""
    from remnant.states import builder

    states = tmp_path / "states"

    def study(estimator: str) -> list[str]:
        return ["study", "readmission", estimator, "--model", str(tiny_llama_dir), "--preset", "tiny",
                "--states", str(states), "--out", str(tmp_path / estimator), "--quiet"]  # fmt: skip

    assert main(study("direction")) == 0
    metas = [json.loads(p.read_text()) for p in states.glob("ckpt/*/meta.json")]
    kept = sorted(m["state"]["role"] for m in metas if m["format"] == "full")
    # per seed the install and its content twin; per seed and method the removal and the procedure control
    assert set(kept) == {"installed", "content_control", "removed", "procedure_control"}
    assert kept.count("removed") == kept.count("procedure_control") == 2 * kept.count("installed")

    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("a kept state was trained again")

    monkeypatch.setattr(builder, "train_install", refuse)
    monkeypatch.setattr(builder, "train_removal", refuse)
    assert main(study("uds")) == 0
    fresh = Cells.model_validate_json((uds_study / "readmission-cells.json").read_text())
    reused = Cells.model_validate_json((tmp_path / "uds" / "readmission-cells.json").read_text())
    assert reused.cells == fresh.cells and reused.runs == fresh.runs
    # the study's output folder is no place for its states, nor a model folder (nothing written)
    bad = [*study("uds")[:-5], "--states", str(tmp_path / "uds" / "states"), "--out", str(tmp_path / "uds")]
    capsys.readouterr()
    assert main([*bad, "--quiet"]) == 2
    assert "--states" in (err := capsys.readouterr().err) and "is the study's output folder" in err
