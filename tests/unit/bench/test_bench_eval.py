"""benchmarks/bench_eval.py's remnant side on the tiny model, without their code: the log it compares is written
and holds every metric of the full suite, so the benchmark cannot break unseen when the evaluator's result
changes shape (it did once: ``EvalResult.logs`` became objects and the script stopped at its first write)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "metrics"))  # ou_crosscheck, as main() adds it
import bench_eval  # noqa: E402


def test_the_remnant_side_writes_a_log_with_every_metric_of_the_full_suite(
    tiny_llama: Any, tmp_path: Path
) -> None:
    from remnant.metrics.catalogue import ALIASES
    from remnant.metrics.encoding import OpenUnlearningPrompt

    data = bench_eval.make_data(tmp_path)
    prompt = OpenUnlearningPrompt.for_tokenizer(tiny_llama.tokenizer)
    opts = {"batch_size": 8, "max_new_tokens": 4}
    run = bench_eval.remnant_runner(tiny_llama, prompt, data, bench_eval.SUITES["all"], tmp_path, opts)
    log = json.loads(Path(run()["logs"]).read_text())
    expected = {ALIASES.get(n, n) for n in bench_eval.SUITES["all"]}
    assert expected <= set(log)
    # forget_quality compares with a retain model's log, which the benchmark gives neither side: None in both
    missing = {n: log[n]["agg_value"] for n in expected if not isinstance(log[n]["agg_value"], float)}
    assert missing == {"forget_quality": None}
    agreement = bench_eval.agreement(log, log)  # the comparison the benchmark makes, on itself
    assert agreement.within == agreement.entries and agreement.largest == 0.0 and not agreement.problems
