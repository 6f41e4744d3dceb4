"""Deviations: a changed pre-registered field is refused unless recorded with reason and stage (R14, R15)."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any

import pytest

from remnant.cli import main
from remnant.config import AssessmentConfig, load_config, parse_config
from remnant.errors import PreregError
from remnant.prereg import (
    PREREG_FILE,
    check_against,
    deviations_for_statement,
    diff_values,
    freeze,
    load_deviations,
    record_deviation,
    require_prereg,
)
from remnant.records import Deviation

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
CLASS_D = EXAMPLES / "classd-smollm2-npo.toml"


def cfg_with(mutate: Any) -> AssessmentConfig:
    raw = copy.deepcopy(tomllib.loads(CLASS_D.read_text(encoding="utf-8")))
    mutate(raw)
    return parse_config(raw, source="changed.toml", base_dir=EXAMPLES)


def tau(value: float) -> Any:
    return lambda r: r.__setitem__("tau", value)


def dev(field: str, old: Any, new: Any) -> Deviation:
    return Deviation(
        field=field, old=old, new=new, reason="control reached tau in one epoch", stage="relearning"
    )


@pytest.fixture
def run(tmp_path: Path) -> Path:
    freeze(load_config(CLASS_D), tmp_path)
    return tmp_path


def test_unchanged_config_passes_with_no_deviations(run: Path) -> None:
    prereg, used = require_prereg(load_config(CLASS_D), run)
    assert used == [] and prereg.values["tau"] == 0.5


def test_changed_field_without_deviation_is_refused(run: Path) -> None:
    prereg, _ = require_prereg(load_config(CLASS_D), run)
    with pytest.raises(PreregError) as info:
        check_against(cfg_with(tau(0.6)), prereg, [])
    message = str(info.value)
    assert message.startswith("changed.toml: pre-registered field 'tau' changed from 0.5 to 0.6")
    assert "(R14)" in message and message.endswith("(R15)") and info.value.requirement == "R15"


def test_recorded_deviation_is_accepted_and_returned(run: Path) -> None:
    prereg, _ = require_prereg(load_config(CLASS_D), run)
    d = dev("tau", 0.5, 0.6)
    assert check_against(cfg_with(tau(0.6)), prereg, [d]) == [d]


@pytest.mark.parametrize(
    "deviation",
    [dev("tau", 0.4, 0.6), dev("tau", 0.5, 0.7), dev("phi", 0.5, 0.6), dev("utility.phi", 0.9, 0.8)],
    ids=["wrong-old", "wrong-new", "wrong-field", "other-field"],
)
def test_deviation_that_does_not_match_is_refused(run: Path, deviation: Deviation) -> None:
    prereg, _ = require_prereg(load_config(CLASS_D), run)
    with pytest.raises(PreregError, match="'tau' changed from 0.5 to 0.6"):
        check_against(cfg_with(tau(0.6)), prereg, [deviation])


def test_chain_of_deviations_and_nested_fields(run: Path) -> None:
    prereg, _ = require_prereg(load_config(CLASS_D), run)

    def change(r: dict[str, Any]) -> None:
        r["tau"] = 0.7
        r["attacks"]["relearning"]["budgets"] = [8, 16, 32]

    chain = [
        dev("tau", 0.5, 0.6),
        dev("attacks.relearning.budgets", [8, 16], [8, 16, 32]),
        dev("tau", 0.6, 0.7),
    ]
    assert check_against(cfg_with(change), prereg, chain) == chain
    with pytest.raises(PreregError, match="'tau' changed from 0.5 to 0.7"):
        check_against(cfg_with(change), prereg, chain[:2])


def test_added_attack_needs_a_deviation(run: Path) -> None:
    prereg, _ = require_prereg(load_config(CLASS_D), run)
    added = cfg_with(lambda r: r["attacks"].__setitem__("gcg", {"params": {"steps": 10}}))
    with pytest.raises(PreregError, match="'attacks.gcg' changed from <absent> to"):
        check_against(added, prereg, [])
    new = {"enabled": True, "reason": None, "params": {"steps": 10}}
    assert len(check_against(added, prereg, [dev("attacks.gcg", None, new)])) == 1


def test_pack_digest_change_is_a_deviation_too(run: Path) -> None:
    prereg, _ = require_prereg(load_config(CLASS_D), run)
    cfg = load_config(CLASS_D)
    assert check_against(cfg, prereg, [], pack_digest=None) == []
    with pytest.raises(PreregError, match="'pack_digest' changed from null to \"sha256:1\""):
        check_against(cfg, prereg, [], pack_digest="sha256:1")
    check_against(cfg, prereg, [dev("pack_digest", None, "sha256:1")], pack_digest="sha256:1")


def test_record_deviation_appends_and_require_prereg_uses_it(run: Path) -> None:
    with pytest.raises(PreregError, match="'tau' changed"):
        require_prereg(cfg_with(tau(0.6)), run)
    first = record_deviation(run, "tau", 0.5, 0.6, "control reached tau within one epoch (D.4)", "relearning")
    assert (run / "deviations.jsonl").read_bytes().count(b"\n") == 1
    prereg, used = require_prereg(cfg_with(tau(0.6)), run)
    assert used == [first] and load_deviations(run) == [first]
    assert deviations_for_statement(used) == [
        {
            "field": "tau",
            "old": 0.5,
            "new": 0.6,
            "reason": "control reached tau within one epoch (D.4)",
            "stage": "relearning",
        }
    ]


def test_record_deviation_checks_field_reason_and_stage(run: Path) -> None:
    with pytest.raises(PreregError, match="'models.device' is not a pre-registered field"):
        record_deviation(run, "models.device", "auto", "cpu", "r", "s")
    with pytest.raises(PreregError, match="deviation of 'tau'.*\\(R15\\)"):
        record_deviation(run, "tau", 0.5, 0.6, "   ", "relearning")
    with pytest.raises(PreregError, match="missing; run `remnant preregister"):
        record_deviation(run / "elsewhere", "tau", 0.5, 0.6, "r", "s")
    assert load_deviations(run) == []


def test_diff_values_descends_dicts_and_compares_json_numbers() -> None:
    assert diff_values({"a": 1, "b": {"c": [1, 2]}}, {"a": 1.0, "b": {"c": [1, 2]}}) == []
    changes = diff_values({"a": 1, "b": {"c": [1, 2]}}, {"a": 2, "b": {"c": [2]}, "d": None})
    assert [c[0] for c in changes] == ["a", "b.c"]  # an added null equals absent


def test_cli_preregister(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preregister", str(CLASS_D), "--out", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out.split()
    assert out[0].startswith("sha256:") and out[1] == str(tmp_path / "run" / PREREG_FILE)
    bad = tmp_path / "bad.toml"
    bad.write_text(
        CLASS_D.read_text(encoding="utf-8").replace('process = "', 'processes = "'), encoding="utf-8"
    )
    assert main(["preregister", str(bad), "--out", str(tmp_path / "run2")]) == 2
    err = capsys.readouterr().err
    assert "bad.toml" in err and "field 'claim.process' missing (R1c)" in err
    assert not (tmp_path / "run2" / PREREG_FILE).exists()
