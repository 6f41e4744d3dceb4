"""Hub ids in sweep specs (``base.hub``, ``models[i].hub``, optional ``revision``; R2, R23, R24).

The spec names the tiny Llama by hub id; it resolves offline from a temporary hub cache (fixtures_models.hub_cache)
through the one resolver. The pool is the folder's pool (same files, same digests, same checkpoint keys), and the
plan pins the id, the revision and the snapshot's commit; a repo that moves on under the same id is another base
digest, so other checkpoints.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sweep_fixtures import tiny_spec, write_spec

from fixtures_models import HUB_REVISION, build_tiny_model, cache_as_hub
from remnant.cli import main

HUB_ID = "tiny-org/tiny-llama"


def _hub_spec(tmp_path: Path, folder: Path, base: str) -> Path:
    text = tiny_spec(folder, tmp_path / "store").replace(f'model = "{folder}"', base)
    return write_spec(tmp_path / "hub", text)


def test_a_hub_base_plans_the_folders_pool_and_pins_the_snapshot(
    tiny_llama_dir: Path, hub_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from remnant.sweep.prepare import prepare

    snapshot = cache_as_hub(hub_cache, HUB_ID, tiny_llama_dir)
    spec = _hub_spec(tmp_path, tiny_llama_dir, f'hub = "{HUB_ID}"')
    assert main(["sweep", "plan", str(spec)]) == 0, capsys.readouterr().err
    assert "3 models (never_saw 1, target 1, unlearned 1)" in capsys.readouterr().out
    hub = prepare(spec)
    local = prepare(write_spec(tmp_path / "local", tiny_spec(tiny_llama_dir, tmp_path / "store")))
    assert hub.base_path == snapshot
    assert [m.state for m in hub.pool.models] == [m.state for m in local.pool.models]
    assert hub.plan_dict()["base_hub"] == {"hub": HUB_ID, "revision": "main", "commit": HUB_REVISION}
    assert "base_hub" not in local.plan_dict()

    moved = cache_as_hub(hub_cache, HUB_ID, build_tiny_model("llama", tmp_path / "other", seed=1), "e" * 40)
    after = prepare(spec)
    assert after.base_path == moved and after.plan_dict()["base_hub"]["commit"] == "e" * 40
    assert {m.state for m in after.pool.models}.isdisjoint(m.state for m in hub.pool.models)
    pinned = prepare(
        _hub_spec(tmp_path / "pin", tiny_llama_dir, f'hub = "{HUB_ID}"\nrevision = "{HUB_REVISION}"')
    )
    assert [m.state for m in pinned.pool.models] == [m.state for m in hub.pool.models]


def test_an_existing_pool_takes_hub_ids_with_their_commit_in_the_job(
    tiny_llama_dir: Path, hub_cache: Path, tmp_path: Path
) -> None:
    from remnant.sweep.prepare import prepare

    cache_as_hub(hub_cache, HUB_ID, tiny_llama_dir)
    spec = tmp_path / "pool.toml"
    spec.write_text(
        f"""
kind = "existing"
name = "hub"
[pack]
mint = {{ entities = 8, controls = 2, seed = 3, general = false, truth_ratio_options = true }}
[suite]
metrics = ["forget_Q_A_Prob"]
[resources]
store = "{tmp_path / "store"}"
[[models]]
hub = "{HUB_ID}"
pool = "unlearned"
[[models]]
path = "{tiny_llama_dir}"
id = "local"
pool = "base"
""",
        encoding="utf-8",
    )
    pool = prepare(spec).pool
    hub, local = pool.model("tiny-llama"), pool.model("local")
    assert hub.state == local.state, "the same files are one state"
    recipe = pool.jobs[hub.job].recipe
    assert recipe["hub"] == HUB_ID and recipe["commit"] == HUB_REVISION and recipe["revision"] == "main"
