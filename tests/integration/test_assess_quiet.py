"""``remnant assess --quiet`` prints no progress bar: not the training bars, and not transformers' "Loading
weights" or "Writing model shards" bars while the states are loaded and saved (the records are the output; stderr
carries the progress lines the user asked for)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from remnant.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parent))
from assess_fixtures import tiny_pack, write_config  # noqa: E402

BARS = ("Loading weights", "Writing model shards", "it/s]")


def test_a_quiet_assessment_shows_no_bar(
    tiny_llama_dir: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path / "config.toml", pack=tiny_pack(tmp_path / "pack"), control=tiny_llama_dir)
    run = tmp_path / "run"
    assert main(["preregister", str(config), "--out", str(run)]) == 0
    capfd.readouterr()
    assert main(["assess", str(config), "--out", str(run), "--quiet"]) == 0
    err = capfd.readouterr().err
    assert "pre-removal model: installing the pack" in err  # the progress lines stay
    assert [bar for bar in BARS if bar in err] == []
