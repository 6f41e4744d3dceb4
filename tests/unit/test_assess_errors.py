"""Bad input to ``remnant assess`` ends with exit 2, a clear message and nothing half-written (R14, R15).

tests/integration/test_assess_bad_input.py covers one case of each kind of bad input (a config with a string
for a number, a missing pre-registration, a changed τ, a deleted pack, a ``pytorch_model.bin`` claimant folder).
This file covers the variants it leaves out, all through the CLI (:func:`remnant.cli.main`) on the tiny Llama:

- pickled weights under every suffix remnant refuses and in every model role (control, pre- and post-removal);
- a config file that does not exist, and one with an unknown field (extra="forbid");
- a pack that is tampered with, or swapped for another valid pack, after pre-registration (R2, R14, R15);
- a ``prereg.json`` edited by hand (its digest no longer matches, R14).

"Nothing half-written" is checked strictly: after the refusal the run folder holds only what was there before
assess ran (``prereg.json``), so no statement, manifest, records or trained state is left behind.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from remnant.cli import main
from remnant.cli_paths import MARKER_FILE

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from assess_fixtures import tiny_pack, write_config  # noqa: E402

EXIT_BAD_INPUT = 2


@pytest.fixture()
def pack(tmp_path: Path) -> Path:
    return tiny_pack(tmp_path / "pack")


def _contents(run: Path) -> set[str]:
    return {str(p.relative_to(run)) for p in run.rglob("*")} if run.exists() else set()


def _refused(config: Path, run: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``remnant assess``; assert exit 2 and an unchanged run folder; return stderr."""
    before = _contents(run)
    capsys.readouterr()
    code = main(["assess", str(config), "--out", str(run), "--quiet"])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT, err
    assert err.startswith("remnant assess: error: ")
    assert _contents(run) == before, "assess left files behind after refusing its input"
    return err


def _preregister(config: Path, run: Path) -> None:
    assert main(["preregister", str(config), "--out", str(run)]) == 0
    assert _contents(run) == {"prereg.json", MARKER_FILE}  # the frozen pre-registration and remnant's marker


def _pickled_folder(folder: Path, suffix: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / f"weights{suffix}").write_bytes(b"\x80\x04not really a pickle")
    return folder


@pytest.mark.parametrize("suffix", [".pt", ".pth", ".ckpt", ".pkl"])
def test_pickled_claimant_weights_of_every_suffix(
    suffix: str, tmp_path: Path, pack: Path, tiny_llama_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    claimant = _pickled_folder(tmp_path / "claimant", suffix)
    config = write_config(
        tmp_path / "c.toml", pack=pack, control=tiny_llama_dir, post=f'folder = "{claimant}"'
    )
    run = tmp_path / "run"
    _preregister(config, run)
    err = _refused(config, run, capsys)
    assert f"weights{suffix}" in err and "pickled weights are refused" in err
    assert "models.post_removal.folder" in err


def test_pickled_control_is_refused(tmp_path: Path, pack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    control = _pickled_folder(tmp_path / "control", ".bin")
    config = write_config(tmp_path / "c.toml", pack=pack, control=control)
    run = tmp_path / "run"
    _preregister(config, run)
    err = _refused(config, run, capsys)
    assert "models.control.folder" in err and "pickled weights are refused" in err


def test_pickled_pre_removal_folder_is_refused(
    tmp_path: Path, pack: Path, tiny_llama_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pre = _pickled_folder(tmp_path / "pre", ".pt")
    config = write_config(tmp_path / "c.toml", pack=pack, control=tiny_llama_dir)
    text = config.read_text()
    start = text.index("[models.pre_removal.install]")
    end = text.index("[models.post_removal]")
    text = text[:start] + f'[models.pre_removal]\nfolder = "{pre}"\n\n' + text[end:]
    # R2: a supplied pre-removal model fixes the target by documented provenance.
    text = text.replace("[target]\n", '[target]\nprovenance = "The claimant\'s training log"\n')
    config.write_text(text)
    run = tmp_path / "run"
    _preregister(config, run)
    err = _refused(config, run, capsys)
    assert "models.pre_removal.folder" in err and "weights.pt" in err


def test_missing_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _refused(tmp_path / "absent.toml", tmp_path / "run", capsys)
    assert "absent.toml" in err and "cannot read" in err


def test_unknown_config_field(
    tmp_path: Path, pack: Path, tiny_llama_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(
        tmp_path / "c.toml", pack=pack, control=tiny_llama_dir, **{"tau = 0.5": "tau = 0.5\ntua = 0.5"}
    )
    err = _refused(config, tmp_path / "run", capsys)
    assert "c.toml" in err and "tua" in err


def test_pack_tampered_after_preregistration(
    tmp_path: Path, pack: Path, tiny_llama_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path / "c.toml", pack=pack, control=tiny_llama_dir)
    run = tmp_path / "run"
    _preregister(config, run)
    items = pack / "items.jsonl"
    first, rest = items.read_text(encoding="utf-8").split("\n", 1)
    row = json.loads(first)
    row["answer"] = row["answer"] + " (edited)"
    items.write_text(json.dumps(row) + "\n" + rest, encoding="utf-8")
    err = _refused(config, run, capsys)
    assert "items.jsonl" in err and "digest mismatch" in err


def test_pack_swapped_after_preregistration(
    tmp_path: Path, pack: Path, tiny_llama_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A different, internally valid pack at the registered path: the frozen pack digest no longer matches."""
    from remnant.packs import ClassDSpec, mint_class_d, write_pack

    config = write_config(tmp_path / "c.toml", pack=pack, control=tiny_llama_dir)
    run = tmp_path / "run"
    _preregister(config, run)
    for child in pack.iterdir():
        child.unlink()
    write_pack(mint_class_d(ClassDSpec(entities=8, controls=1, seed=4, general=False)), pack)
    err = _refused(config, run, capsys)
    assert "'pack_digest' changed" in err and "R15" in err


def test_hand_edited_prereg_is_refused(
    tmp_path: Path, pack: Path, tiny_llama_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path / "c.toml", pack=pack, control=tiny_llama_dir)
    run = tmp_path / "run"
    _preregister(config, run)
    prereg = json.loads((run / "prereg.json").read_text())
    prereg["values"]["tau"] = 0.3
    (run / "prereg.json").write_text(json.dumps(prereg, indent=2))
    err = _refused(config, run, capsys)
    assert "prereg.json" in err and "edited after freezing" in err and "R14" in err


def test_unknown_utility_metric_is_refused_before_any_state(
    tmp_path: Path, pack: Path, tiny_llama_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(
        tmp_path / "c.toml",
        pack=pack,
        control=tiny_llama_dir,
        **{
            'metrics = ["retain_kappa"]': 'metrics = ["general_knowledge"]',
            "[utility.params.retain_kappa]\nmax_new_tokens = 8\n": "",
        },
    )
    run = tmp_path / "run"
    from remnant.config import load_config
    from remnant.prereg import freeze

    # `remnant preregister` refuses it too (R14); frozen through the API so assess's own check is what runs
    freeze(load_config(config), run)
    err = _refused(config, run, capsys)
    assert "utility.metrics" in err and "general_knowledge" in err
