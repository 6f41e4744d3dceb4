"""`remnant study latent-probe` on the tiny model (Annex B design; C-H3a/b nulls as equivalence, B.4, C-H6, C-H9).

The CLI runs end to end in about a minute of CPU with ``--preset tiny``; its JSON table must be what the B.4 rule gives on its
own cells, and every cell must equal a direct call of the direction-survival audit on the same states.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from remnant.cli import main
from remnant.errors import ConfigError
from remnant.latent.direction import direction_survival
from remnant.studies import latent_probe as study
from remnant.studies.latent_probe import (
    MethodRow,
    StudyResult,
    decide,
    direction_config,
    method_table,
    resolve_config,
    run_study,
)
from remnant.studies.readmission import tally


@pytest.fixture(scope="module")
def study_run(tiny_llama_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One CLI run; the states it built are kept (run_study wrapped) so a test can call the audit directly."""
    out = tmp_path_factory.mktemp("latent-probe")
    kept: list[Any] = []

    def keeping(cfg: Any, **kw: Any) -> Any:
        result, states = run_study(cfg, **{**kw, "keep_states": True})
        kept.extend(states)
        return result, states

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(study, "run_study", keeping)
            argv = ["study", "latent-probe", "--model", str(tiny_llama_dir), "--preset", "tiny"]
            rc = main([*argv, "--out", str(out), "--quiet"])
    finally:
        torch.set_num_threads(before)
    return {"rc": rc, "out": out, "json": json.loads((out / "latent-probe.json").read_text()), "states": kept}


def test_cli_writes_the_annex_shaped_table(study_run: dict[str, Any]) -> None:
    assert study_run["rc"] == 0
    result = StudyResult.model_validate(study_run["json"])
    assert result.adjudicating is False  # C-H6
    assert [r.method for r in result.table] == ["npo", "task_vector"]
    assert len(result.runs) == 2 and {r.seed for r in result.runs} == {0}
    for run in result.runs:
        assert len(run.cells) == 4  # 2 layers x 2 positions of the tiny model
        assert run.kappa_p["installed"] > run.kappa_p["control"]  # the install left the target (R2)
        assert run.direction.controls_run  # both C-H3 control states measured (C-H7c)
    # the table is the B.4 rule applied to the cells it reports, nothing else
    assert [r.model_dump() for r in method_table(result.runs, result.config)] == [
        r.model_dump() for r in result.table
    ]
    for row in result.table:
        cells = [c for run in result.runs if run.method == row.method for c in run.cells if c.evaluable]
        assert row.evaluable_cells == len(cells)
        assert row.content_held == sum(c.content.held for c in cells)
        assert row.content_null == tally(row.content_held, row.evaluable_cells, 0.8)
    assert result.decision == decide(result.table, result.rho, result.config)
    md = (study_run["out"] / "latent-probe.md").read_text()
    assert "| | Evaluable cells | Content null held | Procedure null held |" in md
    assert f"Content null: **{result.content_null}**" in md and "non-adjudicating" in md


def test_equivalence_reading_uses_the_margin(study_run: dict[str, Any]) -> None:
    result = StudyResult.model_validate(study_run["json"])
    for run in result.runs:
        for c in run.cells:
            for null in (c.procedure, c.content):
                assert null.held == (null.ci95[0] > -0.10 and null.ci95[1] < 0.10)
            assert c.evaluable == (all(run.gates.values()) and c.signature > c.floor)


def test_cells_equal_a_direct_call_of_the_audit(study_run: dict[str, Any]) -> None:
    """Calling direction_survival directly on the run's states gives the numbers the table was built from."""
    result = StudyResult.model_validate(study_run["json"])
    s = next(st for st in study_run["states"] if st.method == "task_vector")
    cfg = result.config
    direct = direction_survival(
        s.control,
        s.installed,
        {"a": s.removed, "b": s.procedure, "c": s.content},
        {"a": "removed", "b": "procedure_control", "c": "content_control"},
        s.prompts,
        direction_config(cfg, s.seed),
    )
    run = next(r for r in result.runs if r.method == "task_vector")
    by_role = {(f.role, f.layer, f.position): f for f in direct.figures}
    for c in run.cells:
        assert c.survival_removed == pytest.approx(
            by_role[("removed", c.layer, c.position)].survival, abs=1e-9
        )
        assert c.procedure.survival == pytest.approx(
            by_role[("procedure_control", c.layer, c.position)].survival, abs=1e-9
        )
        assert c.content.survival == pytest.approx(
            by_role[("content_control", c.layer, c.position)].survival, abs=1e-9
        )
        assert c.content.ci95 == pytest.approx(
            by_role[("content_control", c.layer, c.position)].ci95, abs=1e-9
        )
    assert direct.reference == run.model_digest


def test_a_rerun_into_the_study_folder_reads_its_records_and_trains_nothing(
    study_run: dict[str, Any], tiny_llama_dir: Path, tmp_path: Path, training_calls: list[str]
) -> None:
    """Each run is one engine cell whose readings carry the run's result (R23): the same command into the same
    folder trains no state and writes the same latent-probe.json, byte for byte."""
    import shutil

    folder = tmp_path / "again"
    shutil.copytree(study_run["out"], folder)
    argv = ["study", "latent-probe", "--model", str(tiny_llama_dir), "--preset", "tiny"]
    assert main([*argv, "--out", str(folder), "--quiet"]) == 0
    assert training_calls == []
    original = (study_run["out"] / "latent-probe.json").read_bytes()
    assert (folder / "latent-probe.json").read_bytes() == original


def test_a_method_added_to_a_study_trains_only_its_own_runs(
    study_run: dict[str, Any], tiny_llama_dir: Path, tmp_path: Path, training_calls: list[str]
) -> None:
    """A run's key hashes the design as it applies to that run, not the list of methods: the study run with NPO
    alone, then with both methods into the same folder, trains the task-vector run only (the seed's install and
    twin, then its removal and procedure control) and gives the NPO run the two-method study gave it."""
    folder = tmp_path / "grown"
    argv = ["study", "latent-probe", "--model", str(tiny_llama_dir), "--preset", "tiny", "--out", str(folder)]
    assert main([*argv, "--methods", "npo", "--quiet"]) == 0
    del training_calls[:]  # count the second study only
    assert main([*argv, "--methods", "npo", "task_vector", "--quiet"]) == 0
    assert training_calls == ["install", "install", "removal", "removal"]
    grown = json.loads((folder / "latent-probe.json").read_text())
    assert [r["method"] for r in grown["runs"]] == ["npo", "task_vector"]
    assert grown["runs"] == study_run["json"]["runs"]


def _row(method: str, n: int, content: int, procedure: int, stable: bool = True) -> MethodRow:
    return MethodRow(
        method=method,
        evaluable_cells=n,
        content_held=content,
        procedure_held=procedure,
        content_null=tally(content, n, 0.8),
        procedure_null=tally(procedure, n, 0.8),
        design_stable=stable,
    )


def test_b4_decision_rule() -> None:
    cfg = resolve_config(["m"])
    assert (
        tally(8, 10, 0.8) == "held" and tally(7, 10, 0.8) == "failed" and tally(0, 0, 0.8) == "not evaluable"
    )
    # Annex B.6's outcome: NPO 10 cells 0/0, task-vector 8 cells 0/0 -> demote
    assert decide([_row("npo", 10, 0, 0), _row("task_vector", 8, 0, 0)], None, cfg) == "demote"
    assert decide([_row("npo", 10, 10, 9)], 0.7, cfg) == "promote"
    assert decide([_row("npo", 10, 10, 9)], 0.1, cfg) == "retain (admissible, non-predictive)"
    assert decide([_row("npo", 10, 10, 9, stable=False)], 0.9, cfg) == "demote"  # design-sensitive (C-H4)
    assert decide([_row("npo", 0, 0, 0)], None, cfg) == "not evaluable"


def test_bad_input_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no model"):
        resolve_config([])
    with pytest.raises(ConfigError, match="preset"):
        resolve_config(["m"], preset="huge")
    bad = tmp_path / "c.toml"
    bad.write_text("models = ['m']\nmargn = 0.1\n")
    assert main(["study", "latent-probe", str(bad), "--out", str(tmp_path / "o")]) == 2


def test_per_model_settings_apply_to_their_model_only(tmp_path: Path) -> None:
    """B.2 asks for ≥ 2 families, whose block indices differ: a per_model entry overrides the study-wide
    trainable blocks, layers and method parameters (merged per parameter) for its model alone."""
    cfg = resolve_config(["smollm2-135m-instruct", "gemma3-270m"], preset="cpu")
    smol, gemma = cfg.for_model("smollm2-135m-instruct"), cfg.for_model("gemma3-270m")
    assert smol == cfg and smol.layers == [18, 22, 26]
    assert gemma.layers == [11, 13, 15] and gemma.trainable == [r"model\.layers\.(9|1[0-7])\."]
    assert gemma.method_params["npo"] == {**cfg.method_params["npo"], "lr": 4e-4}  # merged, per parameter
    assert gemma.method_params["task_vector"] == cfg.method_params["task_vector"]
    merged = resolve_config(
        ["a", "b"], overrides={"per_model": {"b": {"method_params": {"npo": {"lr": 1e-3}}, "layers": [1]}}}
    ).for_model("b")
    assert merged.method_params["npo"] == {**study.DEFAULT_METHOD_PARAMS["npo"], "lr": 1e-3}
    assert merged.layers == [1] and merged.trainable is None
    # a preset's entry for a family this study does not run is dropped; a config's own must name a model it runs
    assert resolve_config(["smollm2-135m-instruct"], preset="cpu").per_model == {}
    with pytest.raises(ConfigError, match="per_model names"):
        resolve_config(["a"], overrides={"per_model": {"typo": {"layers": [1]}}})
    bad = tmp_path / "c.toml"
    bad.write_text("models = ['a']\n[per_model.a]\nlayer = [1]\n")
    assert main(["study", "latent-probe", str(bad), "--out", str(tmp_path / "o")]) == 2
