"""Hostile plugins (entry point ``remnant.metrics``): a plugin is third-party code, so what it declares is checked
like a claimant's file. A named metric reusing a built-in log key would make a log ambiguous: ``remnant eval`` ends
in one line naming the plugin's distribution and entry point, R23, exit 2, before any model is loaded."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from harness import Hostile, check, ids

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from plugin_fixtures import isolated_registry, write_dist  # noqa: E402

__all__ = ["isolated_registry"]  # a fixture, imported for use here

CLASH = """from remnant.metrics.base import Metric
from remnant.metrics.catalogue import MetricDef
from remnant.registry import register


@register("metric", "clash_metric", "1")
class Clash(Metric):
    named_metrics = {"tofu": (MetricDef("{name}", "clash_metric"),)}

    def compute(self, readings):
        raise AssertionError("never run")
"""


def _eval(metric: str, asked: str) -> Hostile:
    def build(tmp: Path) -> tuple[Sequence[str], str]:
        site = tmp / "site"
        site.mkdir()
        (site / "clash_plugin.py").write_text(CLASH.replace("{name}", metric))
        write_dist(site, "clash-dist", "1.0", {"remnant.metrics": ["m = clash_plugin"]})
        sys.path.insert(0, str(site))  # taken off again by the test
        (tmp / "data").mkdir()
        argv = ["eval", str(tmp / "no-model"), "--data", str(tmp / "data"), "--out", str(tmp / "o.json")]
        return [*argv, "--metrics", asked], "'clash-dist' (entry point 'm = clash_plugin')"

    return Hostile(f"plugin-metric-named-{metric}", build, "R23")


CASES = [
    _eval("forget_Q_A_Prob", "forget_Q_A_Prob"),  # the built-in's own name, asked for
    _eval("privleak", "forget_truth_ratio"),  # another built-in's name, not even asked for
]


@pytest.mark.usefixtures("isolated_registry")
@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_hostile_plugin(case: Hostile, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = list(sys.path)
    try:
        text = check(case, tmp_path, capsys)
    finally:
        sys.path[:] = before
    assert "already has" in text and not (tmp_path / "o.json").exists()
