"""benchmarks/gpu_check.py on its CPU path: the tiny model on the CPU against the CPU reference (fp32 equal by
construction, bf16 not), so the script a CUDA machine runs is known to work before one is lent (R24, R25)."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
import gpu_check  # noqa: E402


def test_compare_flags_a_number_outside_tolerance_and_counts_identical_generations() -> None:
    tol = gpu_check.Tolerance(rtol=1e-4, atol=1e-6, generations=0.9)
    cpu = {"m": {"value_by_index": {"0": {"avg_loss": 2.0, "generation": "a"}, "1": {"generation": "b"}}}}
    near = {"m": {"value_by_index": {"0": {"avg_loss": 2.0001, "generation": "a"}, "1": {"generation": "b"}}}}
    far = {"m": {"value_by_index": {"0": {"avg_loss": 2.001, "generation": "a"}, "1": {"generation": "c"}}}}
    held = gpu_check.compare(near, cpu, tol)
    assert held["ok"] and held["numbers"] == 1 and held["generations_identical"] == 1.0
    # 2e-4 ≤ 1e-6 + 1e-4·2 holds; 1e-3 does not, and one of two generations differs (50 % < 90 %)
    missed = gpu_check.compare(far, cpu, tol)
    assert not missed["ok"]
    assert missed["outside_first"] == ["/m/value_by_index/0/avg_loss"]
    assert missed["generations_identical"] == 0.5
    assert math.isclose(missed["largest_abs"], 1e-3, rel_tol=1e-6)
    assert not gpu_check.compare({"m": {}}, cpu, tol)["ok"]  # a number the device run lacks fails


def _run(folder: Path, *extra: str) -> dict[str, Any]:
    out = folder / "report.json"
    argv = ["--device", "cpu", "--tiny", "--out", str(out), "--max-new-tokens", "8", "--peak-size", "128"]
    code = gpu_check.main([*argv, "--uds-examples", "4", "--threads", "1", *extra])
    data: dict[str, Any] = json.loads(out.read_text())
    data["exit"] = code
    return data


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """eval and UDS in both dtypes; the sweep (it trains: the slowest part) in fp32 only."""
    data = _run(tmp_path_factory.mktemp("gpu-check"), "--parts", "eval,uds")
    sweep = _run(tmp_path_factory.mktemp("gpu-check-sweep"), "--parts", "sweep", "--dtypes", "fp32")
    data["parts"].update(sweep["parts"])
    data["exit"] = max(data["exit"], sweep["exit"])
    data["ok"] = data["ok"] and sweep["ok"]
    return data


def test_the_cpu_path_runs_every_part_and_its_fp32_run_equals_the_reference(report: dict[str, Any]) -> None:
    assert report["exit"] == 0 and report["ok"], report["printed"]
    assert set(report["parts"]) == {"eval", "uds", "sweep"}
    for part, runs in report["parts"].items():
        bf16 = set() if part == "sweep" else {"cpu bf16"}
        assert set(runs) == {"cpu fp32 (reference)", "cpu fp32", *bf16}, part
        same = runs["cpu fp32"]["agreement"]
        assert same["ok"] and same["numbers"] > 0 and same["largest_abs"] == 0.0, part
    eval_fp32 = report["parts"]["eval"]["cpu fp32"]["agreement"]
    # the full suite's log: hundreds of numbers, and ROUGE's generations compared as texts
    assert eval_fp32["numbers"] > 300 and eval_fp32["generations"] == 25
    assert eval_fp32["generations_identical"] == 1.0


def test_bf16_is_compared_not_waved_through(report: dict[str, Any]) -> None:
    """bf16 on the CPU differs from fp32: the comparison sees a difference, inside the stated bf16 tolerance."""
    for part in ("eval", "uds"):
        agree = report["parts"][part]["cpu bf16"]["agreement"]
        assert agree["ok"] and agree["largest_abs"] > 0.0, part
        assert agree["tolerance"] == dataclasses.asdict(gpu_check.TOLERANCES[part]["bf16"])


def test_throughput_and_peak_are_measured_and_everything_printed_is_in_the_json(
    report: dict[str, Any],
) -> None:
    assert set(report["peak_flops"]) == {"bf16", "fp32"}
    assert all(v > 0 for v in report["peak_flops"].values())
    phases = report["parts"]["eval"]["cpu fp32"]["throughput"]
    assert set(phases) == {"teacher-forced", "generation", "gradient norms"}
    assert all(p["tokens"] > 0 and p["tokens_per_s"] > 0 and p["share_of_peak"] > 0 for p in phases.values())
    assert report["printed"][-1] == "all checks hold"
    assert any(line.startswith("matmul peak on cpu") for line in report["printed"])
