"""``remnant packs import|export``: the command line over tofu_to_pack, muse_to_pack and pack_to_tofu."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from formats_data import PER, write_muse, write_tofu

from remnant.cli import main
from remnant.formats import muse_to_pack, read_tofu, tofu_to_pack
from remnant.packs import load_pack


def test_import_export_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_tofu(tmp_path / "tofu")
    argv = [
        "packs",
        "import",
        "--format",
        "tofu",
        str(src),
        "--out",
        str(tmp_path / "pack"),
        "--rows-per-entity",
        str(PER),
    ]
    assert main(argv) == 0
    pack = load_pack(tmp_path / "pack")
    assert pack.digest == tofu_to_pack(src, rows_per_entity=PER).digest
    assert f"digest {pack.digest}" in capsys.readouterr().out
    names = ["--forget", "forget10", "--retain", "retain90", "--holdout", "holdout10"]
    assert (
        main(
            [
                "packs",
                "export",
                "--format",
                "tofu",
                str(tmp_path / "pack"),
                "--out",
                str(tmp_path / "out"),
                *names,
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "forget10_perturbed.json: 8 rows" in out
    assert len(read_tofu(tmp_path / "out").rows("forget10")) == 16
    assert (
        main(
            [
                *argv[:4],
                str(tmp_path / "out"),
                "--out",
                str(tmp_path / "again"),
                "--rows-per-entity",
                str(PER),
            ]
        )
        == 0
    )
    assert load_pack(tmp_path / "again").items == pack.items
    assert main(["packs", "show", str(tmp_path / "again")]) == 0


def test_import_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_tofu(tmp_path / "tofu")
    argv = [
        "packs",
        "import",
        "--format",
        "tofu",
        str(src),
        "--rows-per-entity",
        str(PER),
        "--holdout",
        "none",
    ]
    argv += [
        "--retain-eval",
        "none",
        "--general",
        "--relearn-fraction",
        "0.25",
        "--id",
        "mine",
        "--out",
        str(tmp_path / "p"),
    ]
    assert main(argv) == 0
    pack = load_pack(tmp_path / "p")
    assert pack.manifest.id == "mine"
    counts = {k: len(v) for k, v in pack.manifest.splits.items()}
    assert counts["controls"] == counts["retain"] == counts["general"] == 0 and counts["relearn"] == PER
    capsys.readouterr()


def test_import_muse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_muse(tmp_path / "muse")
    assert main(["packs", "import", "--format", "muse", str(src), "--out", str(tmp_path / "p")]) == 0
    assert load_pack(tmp_path / "p").digest == muse_to_pack(src).digest
    assert (
        main(
            ["packs", "import", "--format", "muse", str(src), "--out", str(tmp_path / "q"), "--holdout", "x"]
        )
        == 2
    )
    assert "--holdout names a TOFU split" in capsys.readouterr().err


def test_the_formats_import_no_torch() -> None:
    code = "import sys, remnant.formats, remnant.formats.commands\nprint('torch' in sys.modules)\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(result.stdout.strip().lower()) is False
