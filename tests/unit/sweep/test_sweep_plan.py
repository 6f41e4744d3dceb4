"""``remnant sweep plan``: models, cells, time and disk before anything runs; the disk budget checked up front."""

from __future__ import annotations

from pathlib import Path

import pytest
from sweep_fixtures import TINY_METHODS, tiny_spec, write_spec

from remnant.cli import main
from remnant.errors import ConfigError

LORA = (
    TINY_METHODS
    + """
[[removal.methods]]
name = "grad_ascent"
label = "ga-lora"
params = { epochs = 1, lora_rank = 4 }
"""
)


def test_plan_prints_models_cells_time_and_disk_and_writes_nothing(
    tmp_path: Path, tiny_llama_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_spec(tmp_path, tiny_spec(tiny_llama_dir, tmp_path / "store", relearn=True, methods=LORA))
    assert main(["sweep", "plan", str(spec)]) == 0
    text = capsys.readouterr().out
    first = text.splitlines()[0]
    assert "4 models (never_saw 1, target 1, unlearned 2)" in first and "none, nf4, relearn" in first
    assert "7 measurements each -> 84 cells" in first  # one cell per field metric (and its dependencies)
    assert "checkpoints: 4 to build" in text and "GFLOP/s" in text and "a GPU" in text
    rows = {
        line.split(" | ")[0].strip("| "): line
        for line in text.splitlines()
        if line.startswith("| ") and "---" not in line
    }
    assert set(rows) == {"model", "target-full-s0", "never-retain-s0", "npo-lr0.001-s0", "ga-lora-default-s0"}
    assert not (tmp_path / "store").exists()
    from remnant.sweep.estimate import estimate
    from remnant.sweep.prepare import prepare

    disk = {m.model: m.disk for m in estimate(prepare(spec), rate=1e10)[0]}
    assert 0 < disk["ga-lora-default-s0"] < disk["npo-lr0.001-s0"] / 5  # an adapter, not a copy
    assert disk["target-full-s0"] == disk["npo-lr0.001-s0"]  # both train every parameter: a full delta


def test_estimates_grow_with_the_work_declared(tmp_path: Path, tiny_llama_dir: Path) -> None:
    from remnant.sweep.estimate import estimate
    from remnant.sweep.prepare import prepare

    def totals(text: str, name: str) -> dict[str, tuple[float, float]]:
        prepared = prepare(write_spec(tmp_path, text, name))
        models, _ = estimate(prepared, rate=1e10)
        return {m.model: (m.cpu_build, m.cpu_measure) for m in models}

    one = totals(tiny_spec(tiny_llama_dir, tmp_path / "s"), "one.toml")
    more = totals(
        tiny_spec(tiny_llama_dir, tmp_path / "s").replace("max_epochs = 1", "max_epochs = 4"), "more.toml"
    )
    relearn = totals(tiny_spec(tiny_llama_dir, tmp_path / "s", relearn=True), "relearn.toml")
    assert more["target-full-s0"][0] == pytest.approx(4 * one["target-full-s0"][0])
    assert more["npo-lr0.001-s0"][0] == pytest.approx(one["npo-lr0.001-s0"][0])  # the removal did not change
    assert relearn["npo-lr0.001-s0"][1] > one["npo-lr0.001-s0"][1]  # a third perturbation to measure


def test_a_disk_budget_the_new_checkpoints_exceed_is_refused_before_anything_trains(
    tmp_path: Path, tiny_llama_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = tiny_spec(tiny_llama_dir, tmp_path / "store", extra="disk_budget_gb = 0.0001")
    spec = write_spec(tmp_path, text)
    assert main(["sweep", "run", str(spec), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "over the declared disk_budget_gb = 0.0001" in err and "(R14)" in err
    assert not (tmp_path / "store" / "ckpt").exists()


def test_a_sweep_folder_answers_to_one_spec(tmp_path: Path, tiny_llama_dir: Path) -> None:
    from remnant.sweep.prepare import prepare

    spec = write_spec(tmp_path, tiny_spec(tiny_llama_dir, tmp_path / "store"))
    prepare(spec, out=tmp_path / "out")
    assert (tmp_path / "out" / "spec.toml").read_bytes() == spec.read_bytes()
    assert (tmp_path / "out" / "pack" / "pack.json").is_file() and (tmp_path / "out" / "plan.json").is_file()
    spec.write_text(spec.read_text().replace("lr = 1e-3", "lr = 2e-3"))
    with pytest.raises(ConfigError, match=r"spec\.toml: this sweep folder was run with another spec.*R14"):
        prepare(spec, out=tmp_path / "out")
