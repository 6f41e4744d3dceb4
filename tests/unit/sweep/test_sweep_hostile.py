"""Hostile inputs to ``remnant sweep plan|run|report`` (the harness of tests/integration/hostile): each is one
line and exit 2, naming the file at fault and the requirement it breaks; nothing is trained or written."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from sweep_fixtures import tiny_spec

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "integration" / "hostile"))
from harness import Hostile, check, ids  # noqa: E402

MODEL = Path("/nonexistent/tiny")  # the plan is refused before any model is looked at, unless a case needs it


def _spec(transform: Callable[[str], str], command: str = "plan") -> Callable[[Path], tuple[list[str], str]]:
    def build(tmp: Path) -> tuple[list[str], str]:
        path = tmp / "pool.toml"
        path.write_text(transform(tiny_spec(MODEL, tmp / "store")))
        argv = ["sweep", command, str(path)] + (["--out", str(tmp / "out")] if command == "run" else [])
        return argv, str(path)

    return build


def _report(write: Callable[[Path], None], named: str) -> Callable[[Path], tuple[list[str], str]]:
    def build(tmp: Path) -> tuple[list[str], str]:
        (tmp / "sweep").mkdir()
        write(tmp / "sweep")
        return ["sweep", "report", str(tmp / "sweep")], named

    return build


def _out_is_a_file(tmp: Path) -> tuple[list[str], str]:
    path = tmp / "pool.toml"
    path.write_text(tiny_spec(MODEL, tmp / "store"))
    (tmp / "out").write_text("not a folder")
    return ["sweep", "run", str(path), "--out", str(tmp / "out")], str(tmp / "out")


CASES = [
    Hostile("unknown-key", _spec(lambda t: "color = 'blue'\n" + t), "R14"),
    Hostile(
        "duplicate-key", _spec(lambda t: t.replace('name = "tiny"', 'name = "tiny"\nname = "other"')), "R14"
    ),
    Hostile("nan-learning-rate", _spec(lambda t: t.replace("lr = 1e-3", "lr = nan")), "R14"),
    Hostile("huge-epochs", _spec(lambda t: t.replace("max_epochs = 1", "max_epochs = 100000000000")), "R14"),
    Hostile("quoted-number", _spec(lambda t: t.replace("max_epochs = 1", 'max_epochs = "1"')), "R14"),
    Hostile("unregistered-method", _spec(lambda t: t.replace('name = "npo"', 'name = "forget_it"')), "R23"),
    Hostile("unknown-method-parameter", _spec(lambda t: t.replace("epochs = 1,", "epochz = 1,")), "R23"),
    Hostile("unknown-audit", _spec(lambda t: t.replace('audits = ["uds"]', 'audits = ["oracle"]')), "C-H7"),
    Hostile(  # its class declares the never-modified control as a reference: a pool has full and retain only
        "audit-reference-the-pool-lacks",
        _spec(lambda t: t.replace('audits = ["uds"]', 'audits = ["direction_survival"]')),
        "C-H7",
    ),
    Hostile(  # family jaccess: the suite builds the UDS family's inputs only
        "audit-family-the-suite-cannot-feed",
        _spec(lambda t: t.replace('audits = ["uds"]', 'audits = ["j_access"]')),
        "C-H7",
    ),
    Hostile("deep-nesting", _spec(lambda t: t + "x = " + "[" * 80 + "]" * 80 + "\n"), "R14"),
    Hostile("missing-base-model", _spec(lambda t: t, "run"), "R2"),
    Hostile("out-is-a-file", _out_is_a_file, "R14"),
    Hostile("report-without-plan", _report(lambda d: None, "plan.json"), "R23"),
    Hostile(
        "report-plan-duplicate-key",
        _report(lambda d: (d / "plan.json").write_text('{"pool": {}, "pool": {}}'), "plan.json"),
        "R23",
    ),
    Hostile(
        "report-plan-not-a-plan",
        _report(lambda d: (d / "plan.json").write_text('{"pool": {}}'), "plan.json"),
        "R23",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_hostile_sweep_input(case: Hostile, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = check(case, tmp_path, capsys)
    assert len(text.strip().splitlines()) == 1, text  # one line
    assert not (tmp_path / "store" / "ckpt").exists()


def test_a_pack_that_cannot_feed_the_metrics_is_refused_naming_the_spec(
    tmp_path: Path, tiny_llama_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from remnant.cli import main

    path = tmp_path / "pool.toml"
    path.write_text(
        tiny_spec(tiny_llama_dir, tmp_path / "store").replace(
            "truth_ratio_options = true", "truth_ratio_options = false"
        )
    )
    assert main(["sweep", "plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert (
        f"{path}: field 'suite'" in err
        and "forget_perturbed" in err
        and "truth_ratio_options = true" in err
        and "(R2)" in err
    )
