"""The contract applies to a plugin's components as to built-ins (K4): with the example plugin installed
(examples/plugin, entry point ``remnant.metrics``), the registry's names include its metric, so the contract's
case list does, and that case passes the four checks test_contract_measurements.py runs on every built-in."""

from __future__ import annotations

from pathlib import Path

from contract_cases import World, all_cases, metric_case, metric_name_for
from test_contract_extending_docs import run_contract

from plugin_fixtures import example_plugin, isolated_registry
from remnant.metrics.measurement import readings_from_records
from remnant.records import RecordStore

__all__ = ["example_plugin", "isolated_registry"]  # fixtures, imported for use here


def test_the_example_plugin_metric_is_a_case_and_passes_the_contract(
    example_plugin: Path, world: World, tmp_path: Path
) -> None:
    assert "metric:example_mean_answer_nll" in {c.id for c in all_cases()}
    assert metric_name_for("example_mean_answer_nll") == "example_mean_answer_nll"
    path = run_contract(metric_case("example_mean_answer_nll"), world, tmp_path)
    got = readings_from_records(RecordStore(path).read())["post_removal"]
    value = got["example_mean_answer_nll"].value
    assert value is not None and value > 0  # a mean NLL in nats: positive on the untrained tiny model
