"""``remnant eval`` as an engine client on the tiny model (R23, R24): one cell per metric in ``records.jsonl``; an
identical rerun into the same folder computes nothing (as OpenUnlearning skips metrics already in its log); a
changed parameter recomputes that metric's cell only; a killed run resumes; every fresh cell of a run comes from
one shared pass; the API's ``.summary`` equals the ``TOFU_SUMMARY.json`` the command writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from metrics_data import write_tofu_folder

import remnant
import remnant.metrics.evaluate as evaluate_module
from remnant.api import _command_defaults
from remnant.metrics.commands import add_commands, run_eval

#: Two teacher-forced metrics, one generation metric, and a metric with dependencies (truth ratio: para, pert).
METRICS = "forget_Q_A_Prob,forget_Q_A_ROUGE,forget_truth_ratio"


def _args(model: Path, data: Path, out: Path, *extra: str) -> Any:
    argv = ["eval", str(model), "--data", str(data), "--out", str(out), "--metrics", METRICS]
    args = _command_defaults(add_commands, [*argv, "--max-new-tokens", "3", "--no-progress", *extra])
    return args


def _lines(out: Path) -> int:
    return len((out / "records.jsonl").read_bytes().splitlines())


@pytest.fixture
def passes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """The metric names of every evaluate(...) call (each a teacher-forced pass over what it computes)."""
    calls: list[tuple[str, ...]] = []
    real = evaluate_module.evaluate

    def counted(target: Any, rows_of: Any, names: Any, **kw: Any) -> Any:
        calls.append(tuple(names))
        return real(target, rows_of, names, **kw)

    monkeypatch.setattr(evaluate_module, "evaluate", counted)
    return calls


def test_rerun_reuses_every_cell_and_a_changed_parameter_recomputes_one(
    tiny_llama_dir: Path, tmp_path: Path, passes: list[tuple[str, ...]]
) -> None:
    data, out = write_tofu_folder(tmp_path / "tofu"), tmp_path / "eval"
    first = run_eval(_args(tiny_llama_dir, data, out))
    computed = list(first.manifest["metrics"])  # requested and dependencies, one cell each
    assert len(computed) == 5 and first.manifest["cells"] == {"computed": 5, "reused": 0}
    assert len(passes) == 1  # a fresh run: one shared pass for every cell
    log, lines = (out / "TOFU_EVAL.json").read_bytes(), _lines(out)

    again = run_eval(_args(tiny_llama_dir, data, out))
    assert again.manifest["cells"] == {"computed": 0, "reused": 5} and len(passes) == 1
    assert (out / "TOFU_EVAL.json").read_bytes() == log and _lines(out) == lines  # nothing appended
    assert again.summary == first.summary

    longer = run_eval(_args(tiny_llama_dir, data, out, "--max-new-tokens", "4"))
    assert longer.manifest["cells"] == {"computed": 1, "reused": 4}
    # only the changed metric's cell ran, read from a pass over the whole suite (the batches of a fresh run)
    assert len(passes) == 2 and set(passes[-1]) == set(computed)
    changed = {
        m
        for m in computed
        if longer.manifest["metrics"][m]["cell_key"] != first.manifest["metrics"][m]["cell_key"]
    }
    assert changed == {"forget_Q_A_ROUGE"}
    rouge = json.loads((out / "TOFU_EVAL.json").read_text())["forget_Q_A_ROUGE"]
    assert longer.logs["forget_Q_A_ROUGE"] == rouge and _lines(out) > lines


def test_summary_equals_the_aggregates_in_the_log_and_the_api(tiny_llama_dir: Path, tmp_path: Path) -> None:
    data, out = write_tofu_folder(tmp_path / "tofu"), tmp_path / "eval"
    got = remnant.evaluate(tiny_llama_dir, data, metrics=METRICS, max_new_tokens=3, out=out)
    summary = json.loads((out / "TOFU_SUMMARY.json").read_text())
    log = json.loads((out / "TOFU_EVAL.json").read_text())
    assert list(summary) == sorted(METRICS.split(","))  # requested metrics only, sorted (their summarize)
    assert summary == {name: log[name]["agg_value"] for name in METRICS.split(",")}
    assert got.summary == summary
    # without out= the same cells run in a temporary folder: the same summary, nothing kept
    assert remnant.evaluate(tiny_llama_dir, data, metrics=METRICS, max_new_tokens=3).summary == summary


class Killed(Exception):
    """Raised before a cell, as a kill would stop the run there."""


def test_a_killed_run_resumes_and_computes_only_what_is_left(
    tiny_llama_dir: Path, tmp_path: Path, passes: list[tuple[str, ...]]
) -> None:
    data = write_tofu_folder(tmp_path / "tofu")
    clean = run_eval(_args(tiny_llama_dir, data, tmp_path / "clean"))
    out = tmp_path / "eval"
    seen: list[str] = []

    def kill_third(label: str) -> None:
        seen.append(label)
        if len(seen) == 3:
            raise Killed(label)

    with pytest.raises(Killed):
        run_eval(_args(tiny_llama_dir, data, out), before_cell=kill_third)
    assert len(json.loads((out / "TOFU_EVAL.json").read_text())) == 2  # the finished cells are logged
    passes.clear()
    resumed = run_eval(_args(tiny_llama_dir, data, out))
    assert resumed.manifest["cells"] == {"computed": 3, "reused": 2}
    assert len(passes) == 1 and len(passes[0]) == 5  # what was left, read from one pass over the suite
    assert resumed.summary == clean.summary
    assert (out / "TOFU_EVAL.json").read_bytes() == (tmp_path / "clean" / "TOFU_EVAL.json").read_bytes()


def test_a_log_entry_that_differs_from_its_record_is_computed_again(
    tiny_llama_dir: Path, tmp_path: Path
) -> None:
    """The records say a cell is done, the log says what it gave: an entry edited or lost is recomputed (R23)."""
    data, out = write_tofu_folder(tmp_path / "tofu"), tmp_path / "eval"
    first = run_eval(_args(tiny_llama_dir, data, out))
    path = out / "TOFU_EVAL.json"
    log = json.loads(path.read_text())
    log["forget_Q_A_Prob"]["agg_value"] = 0.99
    del log["forget_Q_A_ROUGE"]
    path.write_text(json.dumps(log))
    again = run_eval(_args(tiny_llama_dir, data, out))
    assert again.manifest["cells"] == {"computed": 2, "reused": 3}
    # recomputed from a pass over all five metrics, as the first run's: the same batches, the same bits
    assert again.summary == first.summary
    assert json.loads(path.read_text())["forget_Q_A_Prob"]["agg_value"] != 0.99
