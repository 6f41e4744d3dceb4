"""Bad input to `remnant assess` ends with exit 2, a clear message and no statement (R14, R15).

None of these cases reaches a model: each is refused before any state is built, and the run folder is left
as it was before the call (no statement, no manifest, no states; at most the config's verbatim copy).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from remnant.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parent))
from assess_fixtures import tiny_pack, write_config  # noqa: E402

#: Builds the bad input in ``tmp_path`` for the run folder ``tmp_path / "run"``; returns the config to assess.
Setup = Callable[[Path, Path, Path], Path]


@pytest.fixture()
def pack(tmp_path: Path) -> Path:
    return tiny_pack(tmp_path / "pack")


@pytest.fixture()
def control(tiny_llama_dir: Path) -> Path:
    return tiny_llama_dir


def _preregistered(config: Path, tmp_path: Path) -> Path:
    assert main(["preregister", str(config), "--out", str(tmp_path / "run")]) == 0
    return config


def _tau_as_string(tmp_path: Path, pack: Path, control: Path) -> Path:
    return write_config(tmp_path / "c.toml", pack=pack, control=control, **{"tau = 0.5": 'tau = "0.5"'})


def _not_toml(tmp_path: Path, pack: Path, control: Path) -> Path:
    broken = tmp_path / "broken.toml"
    broken.write_text("class = \n")
    return broken


def _not_preregistered(tmp_path: Path, pack: Path, control: Path) -> Path:
    return write_config(tmp_path / "c.toml", pack=pack, control=control)


def _changed_after_preregistration(tmp_path: Path, pack: Path, control: Path) -> Path:
    config = _preregistered(write_config(tmp_path / "c.toml", pack=pack, control=control), tmp_path)
    return write_config(config, pack=pack, control=control, **{"tau = 0.5": "tau = 0.3"})


def _pack_removed(tmp_path: Path, pack: Path, control: Path) -> Path:
    config = _preregistered(write_config(tmp_path / "c.toml", pack=pack, control=control), tmp_path)
    shutil.rmtree(pack)
    return config


def _pickled_claimant(tmp_path: Path, pack: Path, control: Path) -> Path:
    claimant = tmp_path / "claimant"  # the default removal is a method; this case swaps in a claimant folder
    claimant.mkdir()
    (claimant / "config.json").write_text("{}")
    (claimant / "pytorch_model.bin").write_bytes(b"\x80\x04not really a pickle")
    config = write_config(tmp_path / "c.toml", pack=pack, control=control, post=f'folder = "{claimant}"')
    return _preregistered(config, tmp_path)


def _unknown_attack_parameter(tmp_path: Path, pack: Path, control: Path) -> Path:
    from remnant.config import load_config
    from remnant.prereg import freeze

    replace = {"shots = 2, max_new_tokens = 8": "shotz = 2"}
    config = write_config(tmp_path / "c.toml", pack=pack, control=control, **replace)
    # `remnant preregister` refuses it too (R14); frozen through the API so assess's own check is what runs
    freeze(load_config(config), tmp_path / "run")
    return config


CASES = [
    pytest.param(_tau_as_string, ("field 'tau'",), id="malformed-field"),
    pytest.param(_not_toml, ("not valid TOML",), id="not-toml"),
    pytest.param(_not_preregistered, ("R14", "remnant preregister"), id="missing-prereg-r14"),
    pytest.param(
        _changed_after_preregistration, ("'tau' changed from 0.5 to 0.3", "R15"), id="prereg-mismatch"
    ),
    pytest.param(_pack_removed, ("pack.json", "missing"), id="missing-pack"),
    pytest.param(
        _pickled_claimant, ("pytorch_model.bin", "pickled weights are refused"), id="pickled-weights"
    ),
    pytest.param(_unknown_attack_parameter, ("attacks.many_shot.params", "shotz"), id="unknown-attack-param"),
]


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(("setup", "expected"), CASES)
def test_bad_input_exits_2_and_leaves_the_run_untouched(
    setup: Setup,
    expected: tuple[str, ...],
    tmp_path: Path,
    pack: Path,
    control: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = setup(tmp_path, pack, control)
    run = tmp_path / "run"
    before = _tree(run) if run.exists() else None
    capsys.readouterr()
    code = main(["assess", str(config), "--out", str(run), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert all(text in err for text in expected), err
    after = _tree(run) if run.exists() else None
    assert after == before  # not even the config copy (R24): it is written once every input has been checked
    assert not (run / "statement.json").exists() and not (run / "manifest.json").exists()
    assert not (run / "states").exists()  # refused before any model state is built
