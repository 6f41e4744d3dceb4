"""Hostile hub ids in assessment configs and sweep specs (R2): one line, exit 2, the file and field named.

A config's ``hub`` (``[models.control]``, ``[models.pre_removal]``, ``[models.post_removal]``) and a sweep spec's
``base.hub`` or ``models[i].hub`` resolve offline from a temporary hub cache (fixtures_models.hub_cache, which the
test points huggingface_hub at, ``HF_HUB_OFFLINE=1``). Each case names a repo the cache does not hold, a revision
it does not hold, or a snapshot publishing only pickled weights (``pytorch_model.bin``): each is refused before
anything loads or trains, naming the config or spec and the field.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from harness import Hostile, check, ids

from fixtures_models import cache_as_hub
from remnant.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from assess_fixtures import tiny_pack, write_hub_config  # noqa: E402

GOOD = "tiny-org/tiny-llama"
PICKLED = "tiny-org/pickled"
Build = Callable[[Path], tuple[Sequence[str], str]]


def _cache(tmp: Path) -> Path:
    """The test's hub cache (the fixture's folder) holding GOOD and PICKLED, a ``.bin``-only snapshot."""
    cache = tmp / "hf" / "hub"
    cache_as_hub(cache, GOOD, tmp / "model")
    pickled = tmp / "pickled"
    shutil.copytree(tmp / "model", pickled)
    os.replace(pickled / "model.safetensors", pickled / "pytorch_model.bin")
    cache_as_hub(cache, PICKLED, pickled)
    return cache


def _assess(control: str) -> Build:
    """``remnant assess`` on a pre-registered config whose control is ``control``."""

    def build(tmp: Path) -> tuple[Sequence[str], str]:
        _cache(tmp)
        config = write_hub_config(tmp / "config.toml", pack=tiny_pack(tmp / "pack"), control=control)
        # preregister reads no model: the id and revision are frozen as written (R14), resolved by assess
        assert main(["preregister", str(config), "--out", str(tmp / "run")]) == 0
        return ["assess", str(config), "--out", str(tmp / "run")], str(config)

    return build


def _spec(text: str) -> Build:
    """``remnant sweep plan`` on a spec whose model table is ``text``."""

    def build(tmp: Path) -> tuple[Sequence[str], str]:
        _cache(tmp)
        spec = tmp / "spec.toml"
        spec.write_text(text.format(store=tmp / "store"), encoding="utf-8")
        return ["sweep", "plan", str(spec)], str(spec)

    return build


GENERATED = """
kind = "generated"
name = "hub"
include_base = false
[base]
hub = "{hub}"
[pack]
mint = {{{{ entities = 8, controls = 2, seed = 3, general = false, truth_ratio_options = true }}}}
[install]
max_epochs = 1
lr = 1e-3
batch_size = 8
[suite]
metrics = ["forget_Q_A_Prob"]
[resources]
store = "{{store}}"
"""

EXISTING = """
kind = "existing"
name = "hub"
[pack]
mint = {{{{ entities = 8, controls = 2, seed = 3, general = false, truth_ratio_options = true }}}}
[suite]
metrics = ["forget_Q_A_Prob"]
[resources]
store = "{{store}}"
[[models]]
hub = "{hub}"
pool = "unlearned"
"""

CASES = [
    Hostile("control-not-cached", _assess('hub = "tiny-org/not-cached"'), requirement="R2"),
    Hostile("control-revision-not-cached", _assess(f'hub = "{GOOD}"\nrevision = "v9"'), requirement="R2"),
    Hostile("control-pickles-only", _assess(f'hub = "{PICKLED}"'), requirement="R2"),
    Hostile("sweep-base-not-cached", _spec(GENERATED.format(hub="tiny-org/not-cached")), requirement="R2"),
    Hostile("sweep-base-pickles-only", _spec(GENERATED.format(hub=PICKLED)), requirement="R2"),
    Hostile("sweep-pool-not-cached", _spec(EXISTING.format(hub="tiny-org/not-cached")), requirement="R2"),
    Hostile("sweep-pool-pickles-only", _spec(EXISTING.format(hub=PICKLED)), requirement="R2"),
]

#: The field each case's message must name.
FIELDS = {
    "control": "models.control.hub",
    "sweep-base": "base.hub",
    "sweep-pool": "models[0].hub",
}


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_hostile_hub_id_is_refused(
    case: Hostile,
    tmp_path: Path,
    tiny_llama_dir: Path,
    hub_cache: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shutil.copytree(tiny_llama_dir, tmp_path / "model")
    assert hub_cache == tmp_path / "hf" / "hub"
    text = check(case, tmp_path, capsys)
    field = next(f for prefix, f in FIELDS.items() if case.id.startswith(prefix))
    assert f"field '{field}'" in text, text
    errors = [line for line in text.splitlines() if ": error: " in line]
    assert len(errors) == 1, text
    if "pickles" in case.id:
        assert "pytorch_model.bin" in text, text
    else:
        assert "not in the local Hugging Face cache" in text, text
    assert not (tmp_path / "run" / "records.jsonl").exists()


def test_the_cached_safetensors_snapshot_is_accepted(
    tmp_path: Path, tiny_llama_dir: Path, hub_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cases fail because of what they name, not because a hub id cannot be planned at all."""
    shutil.copytree(tiny_llama_dir, tmp_path / "model")
    for text, model in ((GENERATED, "target-full-s0"), (EXISTING, "tiny-llama")):
        argv, _ = _spec(text.format(hub=GOOD))(tmp_path)
        assert main(list(argv)) == 0, capsys.readouterr().err
        assert f"| {model} |" in capsys.readouterr().out  # a hub model's id defaults to the repo's name
        for made in ("hf", "pickled"):
            shutil.rmtree(tmp_path / made)
