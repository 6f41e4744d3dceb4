"""Hub ids (``hub = "org/name"``, optional ``revision``) in assessment configs (R2, R3, R14, R23).

The config names the control by hub id; it resolves through the one resolver
(:func:`remnant.models.load.hub_model`) to the snapshot folder of a temporary hub cache read offline
(``HF_HUB_OFFLINE=1``, fixtures_models.hub_cache). Pre-registration freezes the id and revision (R14), a changed
revision after freezing is refused, and the state records the snapshot's commit beside its weight digest, so a
snapshot that moves under the same id is seen: a new commit and a new digest (R23, R24).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from fixtures_models import HUB_REVISION, build_tiny_model, cache_as_hub
from remnant.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parent))
from assess_fixtures import tiny_pack, write_config, write_hub_config  # noqa: E402

HUB_ID = "tiny-org/tiny-llama"


def _hub_config(tmp_path: Path, control: str) -> Path:
    return write_hub_config(tmp_path / "config.toml", pack=tiny_pack(tmp_path / "pack"), control=control)


def test_a_hub_control_is_preregistered_preflighted_planned_and_pinned(
    tiny_llama_dir: Path, hub_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from remnant.assess.states import load_named_state, preflight, state_source
    from remnant.config import load_config

    snapshot = cache_as_hub(hub_cache, HUB_ID, tiny_llama_dir)
    config = _hub_config(tmp_path, f'hub = "{HUB_ID}"')
    run = tmp_path / "run"
    assert main(["preregister", str(config), "--out", str(run)]) == 0, capsys.readouterr().err
    frozen = json.loads((run / "prereg.json").read_text(encoding="utf-8"))["values"]
    assert frozen["models"] == {"control": {"hub": HUB_ID, "revision": None}}
    cfg = load_config(config)
    preflight(cfg)  # the check before anything trains: the snapshot holds a loadable safetensors model (R2)
    source = state_source(cfg, "control")
    assert source is not None and source.folder == snapshot and source.field == "models.control.hub"
    assert source.record == {"hub": HUB_ID, "revision": "main", "commit": HUB_REVISION}
    capsys.readouterr()
    assert main(["plan", str(config), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == HUB_ID
    before = load_named_state(cfg, "control")
    assert before.record["commit"] == HUB_REVISION and before.name == HUB_ID

    # the repo moves on under the same id: refs/main names a new commit holding other weights
    other = build_tiny_model("llama", tmp_path / "other", seed=1)
    moved = "f" * 40
    cache_as_hub(hub_cache, HUB_ID, other, revision=moved)
    after = load_named_state(cfg, "control")
    assert after.record["commit"] == moved
    assert after.identity.digest != before.identity.digest, "a moved snapshot is another identity (R23)"
    pinned = load_config(_hub_config(tmp_path / "pinned", f'hub = "{HUB_ID}"\nrevision = "{HUB_REVISION}"'))
    assert load_named_state(pinned, "control").identity.digest == before.identity.digest


def test_a_changed_revision_after_freezing_is_refused(
    tiny_llama_dir: Path, hub_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache_as_hub(hub_cache, HUB_ID, tiny_llama_dir)
    run = tmp_path / "run"
    config = _hub_config(tmp_path, f'hub = "{HUB_ID}"')
    assert main(["preregister", str(config), "--out", str(run)]) == 0
    shutil.copy(config, tmp_path / "first.toml")
    config = _hub_config(tmp_path, f'hub = "{HUB_ID}"\nrevision = "v2"')
    capsys.readouterr()
    assert main(["preregister", str(config), "--out", str(run)]) == 2
    err = capsys.readouterr().err
    assert "models.control.revision" in err and "R14" in err and "Traceback" not in err, err


def test_a_folder_config_freezes_no_models_entry(tiny_llama_dir: Path, tmp_path: Path) -> None:
    """Configs without a hub id keep the pre-registration digest they always had (R14)."""
    from remnant.config import load_config, preregistered

    config = write_config(tmp_path / "config.toml", pack=tiny_pack(tmp_path / "pack"), control=tiny_llama_dir)
    assert "models" not in preregistered(load_config(config))


@pytest.mark.parametrize(
    ("control", "message", "rule"),
    [
        ('hub = "tiny-org/tiny-llama"\nfolder = "x"', "exactly one of 'zoo', 'folder' or 'hub'", "R3"),
        ('folder = "x"\nrevision = "main"', "models.control.revision' only applies with 'hub'", "R2"),
        ('hub = "../escape"', "is not a hub id", "R2"),
        ('hub = "tiny-org/tiny-llama"\nrevision = "../x"', "is not a branch, tag or commit", "R2"),
    ],
)
def test_hub_fields_are_checked_when_the_config_is_read(
    control: str, message: str, rule: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _hub_config(tmp_path, control)
    assert main(["preregister", str(config), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert message in err and str(config) in err and f"({rule})" in err, err
    assert not (tmp_path / "run" / "prereg.json").exists()


def test_a_tiny_assessment_with_a_hub_control_runs_and_records_the_pin(
    tiny_llama_dir: Path, hub_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """End to end on the tiny model (about 20 s): the manifest's control is the hub id at its commit (R23, R24)."""
    cache_as_hub(hub_cache, HUB_ID, tiny_llama_dir)
    config = _hub_config(tmp_path, f'hub = "{HUB_ID}"')
    run = tmp_path / "run"
    assert main(["preregister", str(config), "--out", str(run)]) == 0
    assert main(["assess", str(config), "--out", str(run), "--quiet"]) == 0, capsys.readouterr().err
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    control = next(m for m in manifest["models"] if m["role"] == "control")
    assert control["name"] == HUB_ID
    assert control["source"] == f"hub:{HUB_ID}@main (commit {HUB_REVISION})"
    local = json.loads(_identify(tiny_llama_dir, capsys))
    assert control["identity"]["digest"] == local["digest"], "the snapshot's files are the folder's identity"
    records = (run / "records.jsonl").read_text(encoding="utf-8")
    assert f'"record":{{"commit":"{HUB_REVISION}","hub":"{HUB_ID}","revision":"main"}}' in records


def _identify(folder: Path, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["models", "identify", str(folder)]) == 0
    return capsys.readouterr().out
