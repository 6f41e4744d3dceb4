"""docs/extending.md's metric recipes, followed exactly, run in ``remnant eval`` on the tiny model: the derived
metric (``prob_gap``, over other metrics' logs) and the per-item metric (``min_token_logprob``, over the shared
teacher-forced pass) each log values, never ``null`` with exit 0; a metric that returns nothing is exit 2 naming it
(R23, K4)."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from test_contract_extending_docs import run_example

from remnant import registry
from remnant.cli import main
from remnant.metrics.catalogue import TOFU_METRICS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "metrics"))
from metrics_data import SPLITS, write_tofu_folder  # type: ignore[import-not-found]  # noqa: E402
from ou_naive import ou_instance  # type: ignore[import-not-found]  # noqa: E402

#: OpenUnlearning's prompt as ``remnant eval`` uses it by default (the tiny tokenizer has a chat template).
CHAT = {"apply_chat_template": True, "system_prompt": "You are a helpful assistant."}
IGNORE = -100


@pytest.fixture
def recipe(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Runs a recipe in a private copy of the registry and adds its named metric to ``_tofu()``'s list, as the
    page says; both are gone after the test (the built-in metrics registered first, into the real registry)."""
    importlib.import_module(registry.KIND_PACKAGES["metric"])
    monkeypatch.setattr(registry, "_ENTRIES", dict(registry._ENTRIES))

    def add(example: str, named: str) -> dict[str, Any]:
        ns = run_example(example)
        monkeypatch.setitem(TOFU_METRICS, ns[named].name, ns[named])
        return ns

    return add


def _eval(
    model: Path, tmp: Path, metric: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str, Path]:
    """``remnant eval`` of ``metric``: exit code, stdout, stderr and the log's path."""
    data = write_tofu_folder(tmp / "tofu")
    out = tmp / "eval" / "TOFU_EVAL.json"
    argv = [
        "eval",
        str(model),
        "--data",
        str(data),
        "--out",
        str(out.parent),
        "--metrics",
        metric,
        "--no-progress",
    ]
    code = main([*argv, "--batch-size", "3"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err, out


def test_the_derived_recipe_logs_forget_minus_retain(
    recipe: Any, tiny_llama_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe("metric", "PROB_GAP")
    code, stdout, stderr, out = _eval(tiny_llama_dir, tmp_path, "forget_retain_Prob_gap", capsys)
    assert code == 0, stderr
    log = json.loads(out.read_text())
    gap = log["forget_retain_Prob_gap"]["agg_value"]
    forget, retain = log["forget_Q_A_Prob"]["agg_value"], log["retain_Q_A_Prob"]["agg_value"]
    assert gap is not None and gap == pytest.approx(forget - retain, abs=1e-12) and forget != retain
    assert json.loads(stdout) == {"forget_retain_Prob_gap": gap}


def _naive_min_logprob(model: Any, tokenizer: Any, question: str, answer: str) -> float:
    """The lowest log p of a labelled token (EOS included), from one forward pass written out here."""
    ids, labels = ou_instance(tokenizer, CHAT, question, answer)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    logp = torch.log_softmax(logits[:-1], dim=-1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0]
    kept = [float(v) for v, lab in zip(logp, labels[1:], strict=True) if lab != IGNORE]
    return min(kept)


def test_the_per_item_recipe_logs_each_row_min_logprob(
    recipe: Any, tiny_llama_dir: Path, tiny_llama: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe("metric_per_item", "MIN_LOGPROB")
    code, _, stderr, out = _eval(tiny_llama_dir, tmp_path, "forget_Q_A_min_logprob", capsys)
    assert code == 0, stderr
    entry = json.loads(out.read_text())["forget_Q_A_min_logprob"]
    rows = SPLITS["forget10_perturbed"]
    naive = [_naive_min_logprob(tiny_llama.model, tiny_llama.tokenizer, r.question, r.answer) for r in rows]
    got = [entry["value_by_index"][str(i)]["score"] for i in range(len(rows))]
    assert got == pytest.approx(naive, abs=1e-4) and all(v < 0 for v in got)
    assert entry["agg_value"] == pytest.approx(sum(got) / len(got), abs=1e-12)
    manifest = json.loads((out.parent / "manifest.json").read_text())
    assert manifest["metrics"]["forget_Q_A_min_logprob"]["component"]["name"] == "min_token_logprob"


EMPTY = """
from remnant.metrics.base import Metric, Readings, Reads
from remnant.metrics.catalogue import FORGET, MetricDef, Source
from remnant.metrics.evallog import MetricLog
from remnant.registry import register


@register("metric", "says_nothing", "1")
class SaysNothing(Metric):
    reads = frozenset({Reads.TEACHER_FORCED})

    def compute(self, readings: Readings) -> MetricLog:
        return RESULT


NAMED = MetricDef("forget_nothing", "says_nothing", source=Source(FORGET, "answer"))
"""


@pytest.mark.parametrize(
    ("result", "says"),
    [("MetricLog(agg_value=None)", "no value and no per-item values"), ("None", "returned NoneType")],
)
def test_a_metric_that_returns_nothing_is_exit_2_naming_it(
    result: str, says: str, tiny_llama_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    importlib.import_module(registry.KIND_PACKAGES["metric"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(registry, "_ENTRIES", dict(registry._ENTRIES))
        ns: dict[str, Any] = {"__name__": "says_nothing_metric"}
        exec(EMPTY.replace("RESULT", result), ns)
        mp.setitem(TOFU_METRICS, "forget_nothing", ns["NAMED"])
        code, _, text, out = _eval(tiny_llama_dir, tmp_path, "forget_nothing", capsys)
    assert code == 2 and "'forget_nothing' (says_nothing)" in text and says in text and "R23" in text
    assert "Traceback" not in text and not out.exists()
