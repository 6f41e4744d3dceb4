"""`remnant methods list|show` print every registered method and every default (R23, R24)."""

from __future__ import annotations

import json

import pytest

from remnant.cli import main
from remnant.train.methods.base import COMMON_DEFAULTS


def test_methods_list_and_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["methods", "list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert {"grad_ascent", "grad_diff", "npo", "simnpo", "task_vector", "retrain"} <= set(rows)
    assert rows["task_vector"]["kind"] == rows["retrain"]["kind"] == "procedure"
    assert main(["methods", "show", "npo", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["defaults"]["beta"] == 0.1 and info["needs_reference"] is True
    assert set(COMMON_DEFAULTS) <= set(info["defaults"])
    assert main(["methods", "show", "simnpo"]) == 0
    text = capsys.readouterr().out
    assert "beta = 4.5" in text and "gamma = 0.125" in text and "lr = 1e-05" in text
    assert main(["methods", "show", "no-such-method"]) == 2


def test_a_flag_that_depends_on_the_parameters_is_shown_at_the_defaults(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """IdkNLL needs the frozen reference only with a KL retain loss; its default is NLL (R23)."""
    assert main(["methods", "show", "idk_nll", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["defaults"]["retain_loss_type"] == "NLL" and info["needs_reference"] is False
