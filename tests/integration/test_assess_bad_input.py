"""Bad input to `remnant assess` ends with exit 2, a clear message and no statement (issue 6, R14, R15).

None of these cases reaches a model: each is refused before any state is built.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from remnant.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parent))
from assess_fixtures import GRAD_ASCENT, tiny_pack, write_config  # noqa: E402


@pytest.fixture()
def pack(tmp_path: Path) -> Path:
    return tiny_pack(tmp_path / "pack")


@pytest.fixture()
def control(tiny_llama_dir: Path) -> Path:
    return tiny_llama_dir


def _assess(config: Path, run: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["assess", str(config), "--out", str(run), "--quiet"])
    return code, capsys.readouterr().err


def _no_statement(run: Path) -> None:
    assert not (run / "statement.json").exists()
    assert not (run / "manifest.json").exists()


def test_malformed_config(
    tmp_path: Path, pack: Path, control: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path / "c.toml", pack=pack, control=control, **{"tau = 0.5": 'tau = "0.5"'})
    code, err = _assess(config, tmp_path / "run", capsys)
    assert code == 2 and "field 'tau'" in err
    _no_statement(tmp_path / "run")
    broken = tmp_path / "broken.toml"
    broken.write_text("class = \n")
    code, err = _assess(broken, tmp_path / "run", capsys)
    assert code == 2 and "not valid TOML" in err


def test_missing_prereg_names_r14(
    tmp_path: Path, pack: Path, control: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path / "c.toml", pack=pack, control=control)
    code, err = _assess(config, tmp_path / "run", capsys)
    assert code == 2 and "R14" in err and "remnant preregister" in err
    _no_statement(tmp_path / "run")


def test_prereg_mismatch_is_refused(
    tmp_path: Path, pack: Path, control: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path / "c.toml", pack=pack, control=control)
    run = tmp_path / "run"
    assert main(["preregister", str(config), "--out", str(run)]) == 0
    write_config(config, pack=pack, control=control, **{"tau = 0.5": "tau = 0.3"})
    code, err = _assess(config, run, capsys)
    assert code == 2 and "'tau' changed from 0.5 to 0.3" in err and "R15" in err
    _no_statement(run)


def test_missing_pack(tmp_path: Path, pack: Path, control: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path / "c.toml", pack=pack, control=control)
    run = tmp_path / "run"
    assert main(["preregister", str(config), "--out", str(run)]) == 0
    shutil.rmtree(pack)
    code, err = _assess(config, run, capsys)
    assert code == 2 and "pack.json" in err and "missing" in err
    _no_statement(run)


def test_pickled_weights_are_refused(
    tmp_path: Path, pack: Path, control: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    claimant = tmp_path / "claimant"
    claimant.mkdir()
    (claimant / "config.json").write_text("{}")
    (claimant / "pytorch_model.bin").write_bytes(b"\x80\x04not really a pickle")
    config = write_config(tmp_path / "c.toml", pack=pack, control=control, post=f'folder = "{claimant}"')
    run = tmp_path / "run"
    assert main(["preregister", str(config), "--out", str(run)]) == 0
    code, err = _assess(config, run, capsys)
    assert code == 2 and "pytorch_model.bin" in err and "pickled weights are refused" in err
    _no_statement(run)
    assert GRAD_ASCENT  # the default removal is a method; this case swaps in a claimant folder


def test_unknown_attack_parameter_is_refused_before_training(
    tmp_path: Path, pack: Path, control: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(
        tmp_path / "c.toml", pack=pack, control=control, **{"shots = 2, max_new_tokens = 8": "shotz = 2"}
    )
    run = tmp_path / "run"
    assert main(["preregister", str(config), "--out", str(run)]) == 0
    code, err = _assess(config, run, capsys)
    assert code == 2 and "attacks.many_shot.params" in err and "shotz" in err
    _no_statement(run)
    assert not (run / "states").exists()
