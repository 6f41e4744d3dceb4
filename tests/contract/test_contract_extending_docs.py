"""docs/extending.md's examples run: each is executed in a private copy of the registry, then put through the
contract checks the page promises (contract_checks.py), on the tiny model."""

from __future__ import annotations

import copy
import importlib
import re
from pathlib import Path
from typing import Any

import pytest
from contract_cases import (
    KEY_GAPS,
    Case,
    FirstRuns,
    World,
    attack_case,
    audit_case,
    kind_of,
    metric_case,
)
from contract_checks import check_identical_key, check_records, check_resume, check_variant, first_run

from remnant import registry
from remnant.records import CellRecord, Observation, Reading, RecordStore

DOC = Path(__file__).resolve().parents[2] / "docs" / "extending.md"
EXAMPLE = re.compile(r"<!-- example: (\w+) -->\n```python\n(.*?)```", re.S)


def examples() -> dict[str, str]:
    return dict(EXAMPLE.findall(DOC.read_text(encoding="utf-8")))


@pytest.fixture
def sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    """A private copy of the registry: what an example registers is gone after the test. The built-ins are
    imported first: a module an example imports registers once, and must not register into the copy only."""
    for package in registry.KIND_PACKAGES.values():
        importlib.import_module(package)
    monkeypatch.setattr(registry, "_ENTRIES", dict(registry._ENTRIES))


def run_example(name: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": f"extending_{name}"}
    exec(compile(examples()[name], f"{DOC}:{name}", "exec"), namespace)
    return namespace


def run_contract(case: Case, world: World, tmp_path: Path) -> Path:
    """The four contract checks on ``case`` (every variant whose gap is not a known one); its records' path."""
    path, cells = first_run(case, world, FirstRuns(), tmp_path)
    check_records(case, world, path, cells)
    check_identical_key(case, world)
    for variant in case.variants:
        if (kind_of(case.id), variant) not in KEY_GAPS:
            check_variant(case, world, variant)
    check_resume(case, world, path, cells, tmp_path / "resume")
    return path


def test_every_kind_on_the_page_has_an_example() -> None:
    assert set(examples()) == {"attack", "method", "metric", "metric_per_item", "audit", "kind"}
    text = DOC.read_text(encoding="utf-8")
    for name in ("attack", "method", "metric", "metric_per_item", "audit", "kind"):
        assert f"<!-- example: {name} -->" in text


@pytest.mark.usefixtures("sandbox")
def test_attack_example(world: World, tmp_path: Path) -> None:
    ns = run_example("attack")
    assert "answer_opener" in registry.names("attack")
    attack = registry.create("attack", "answer_opener", {})
    assert attack.spec.params == {"text": "The answer is"} and isinstance(attack, ns["AnswerOpener"])
    assert attack.applicable("multiple_choice") is not None  # C-Q2: a format it does not declare
    path = run_contract(attack_case("answer_opener"), world, tmp_path)
    scored = [r for r in RecordStore(path).read() if isinstance(r, Observation)]
    assert [o.item_id for o in scored] == [p.item_id for p in world.probes]


@pytest.mark.usefixtures("sandbox")
def test_method_example(world: World) -> None:
    from remnant.train.methods.base import COMMON_DEFAULTS, QA, RemovalData
    from remnant.train.removal import apply_removal

    run_example("method")
    assert set(COMMON_DEFAULTS) | {"alpha"} <= set(registry.defaults("method", "scaled_ascent"))
    fast = {"alpha": 0.25, "lr": 1e-3, "epochs": 1, "batch_size": 2, "grad_accum": 1, "warmup_epochs": 0.0}
    method = registry.create("method", "scaled_ascent", fast)
    forget = tuple(QA(p.question, p.answer) for p in world.probes[:2])
    model, result = apply_removal(
        method, copy.deepcopy(world.state.model), world.state.tokenizer, RemovalData(forget=forget), seed=1
    )
    assert result.status == "completed" and result.outcome.steps == 1
    assert result.to_dict()["method"]["params"]["alpha"] == 0.25
    assert model is not world.state.model


@pytest.mark.usefixtures("sandbox")
def test_metric_example(world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from remnant.engine.runner import CellRunner
    from remnant.metrics.catalogue import TOFU_METRICS
    from remnant.metrics.measurement import MetricMeasurement, readings_from_records, run_metrics

    ns = run_example("metric")
    monkeypatch.setitem(TOFU_METRICS, ns["PROB_GAP"].name, ns["PROB_GAP"])
    case = metric_case("prob_gap")
    run_contract(case, world, tmp_path)  # the contract on the metric's own cell
    cell = case.build(world, None)
    assert isinstance(cell, MetricMeasurement)
    store = RecordStore(tmp_path / "suite.jsonl")  # its cell and its dependencies' cells, one pass
    run_metrics(CellRunner(store, "suite"), cell.suite, world.state)
    got = readings_from_records(store.read())["post_removal"]
    gap = got["forget_retain_Prob_gap"].value
    forget, retain = got["forget_Q_A_Prob"].value, got["retain_Q_A_Prob"].value
    assert gap is not None and forget is not None and retain is not None and gap == forget - retain


@pytest.mark.usefixtures("sandbox")
def test_audit_example(world: World, tmp_path: Path) -> None:
    run_example("audit")
    assert registry.create("audit", "uds_strict", {}).spec.params["tau"] == 0.2
    path = run_contract(audit_case("uds_strict"), world, tmp_path)
    readings = [r for r in RecordStore(path).read() if isinstance(r, Reading)]
    assert readings and all(r.component["name"] == "uds_strict" and not r.adjudicating for r in readings)


def test_kind_example(world: World, tmp_path: Path) -> None:
    ns = run_example("kind")
    kind = ns["AnswerLikelihood"]

    def build(w: World, variant: str | None) -> Any:
        probes = w.probes[:-1] if variant == "items" else w.probes
        return kind(probes, w.fmt, -4.0 if variant == "threshold" else -6.0, dict(w.shared))

    case = Case("answer_likelihood:answer_likelihood", build, ("items", "threshold"))
    path = run_contract(case, world, tmp_path)
    records = RecordStore(path).read()
    scores = [r.score for r in records if isinstance(r, Observation)]
    cell = records[-1]
    assert isinstance(cell, CellRecord) and cell.metric == "answer_likely"
    assert len(scores) == len(world.probes) and all(s is not None and s < 0 for s in scores)
    assert (cell.k, cell.n) == (sum(s > -6.0 for s in scores if s is not None), len(world.probes))
