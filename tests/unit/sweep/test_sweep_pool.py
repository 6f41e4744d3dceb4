"""A spec resolved into its pool: ids and labels, content keys shared across specs, existing folders."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from sweep_fixtures import tiny_spec

from remnant.errors import ConfigError
from remnant.sweep.pool import Pool, existing_pool, generated_pool, number_label, strength_label
from remnant.sweep.spec import parse_spec

GRID = """
[[removal.methods]]
name = "npo"
params = { epochs = 1 }
grid = { lr = [1e-4, 2e-5], alpha = [1.0, 3.0] }

[[removal.methods]]
name = "grad_ascent"
label = "ga-lora"
params = { lora_rank = 4 }
"""


def _pool(text: str, **kw: Any) -> Pool:
    spec = parse_spec(tomllib.loads(text), source="pool.toml")
    return generated_pool(spec, base_digest=kw.get("base", "b" * 64), pack_digest=kw.get("pack", "p" * 64))  # type: ignore[arg-type]


def _text(**kw: Any) -> str:
    return tiny_spec(Path("/m"), Path("/s"), **kw)


def test_ids_and_labels_follow_the_grid_and_references_come_first() -> None:
    text = _text(methods=GRID).replace("seeds = [0]", "seeds = [0, 1]\ncheckpoints = [0.5]")
    pool = _pool(text)
    ids = [m.id for m in pool.models]
    assert ids[:2] == ["target-full-s0", "never-retain-s0"]  # the audits' references
    assert (
        "npo-alpha1-lr0.0001-s1" in ids
        and "npo-alpha3-lr2e-5-s0-ep0.5" in ids
        and "ga-lora-default-s0" in ids
    )
    assert len(ids) == 2 + (4 + 1) * 2 * 2
    model = pool.model("npo-alpha3-lr2e-5-s0")
    assert (model.strength, model.seed, model.parent, model.method) == (
        "alpha=3,lr=2e-5",
        0,
        "target-full-s0",
        "npo",
    )
    assert model.hyperparameters["alpha"] == 3.0 and model.hyperparameters["beta"] == 0.1  # every parameter
    mark = pool.model("npo-alpha3-lr2e-5-s0-ep0.5")
    assert mark.job == model.job and mark.checkpoint == "epoch=0.5" and mark.state != model.state
    assert pool.references == {"full": "target-full-s0", "retain": "never-retain-s0"}
    assert Pool.from_dict(pool.to_dict()) == pool


def test_number_and_strength_labels() -> None:
    assert [number_label(v) for v in (2e-05, 1e-4, 0.5, 3, 1.0, "Mean")] == [
        "2e-5",
        "0.0001",
        "0.5",
        "3",
        "1",
        "mean",
    ]
    assert strength_label({"lr": 2e-5, "epochs": 2}) == "epochs=2,lr=2e-5"
    assert strength_label({}) == "default"


def test_a_checkpoint_key_is_the_digest_of_what_produces_it_and_is_shared_across_specs() -> None:
    one = _pool(_text(methods=GRID))
    other = _pool(
        _text(methods=GRID, name="other").replace(
            'metrics = ["forget_Q_A_Prob", "forget_truth_ratio"]', 'metrics = ["extraction_strength"]'
        )
    )
    assert {m.id: m.state for m in one.models} == {
        m.id: m.state for m in other.models
    }  # name and suite: no part
    lr = _pool(_text(methods=GRID).replace("lr = 1e-3", "lr = 2e-3"))
    assert lr.model("target-full-s0").state != one.model("target-full-s0").state
    assert (
        lr.model("npo-alpha1-lr0.0001-s0").state != one.model("npo-alpha1-lr0.0001-s0").state
    )  # its parent moved
    assert lr.model("never-retain-s0").state != one.model("never-retain-s0").state
    base = _pool(_text(methods=GRID), base="c" * 64)
    assert all(base.model(m.id).state != m.state for m in one.models)
    pack = _pool(_text(methods=GRID), pack="q" * 64)
    assert pack.model("target-full-s0").state != one.model("target-full-s0").state


def test_two_models_with_one_id_are_refused() -> None:
    twice = '[[removal.methods]]\nname = "npo"\ngrid = { lr = [1e-4, 0.0001] }\n'  # one point, written twice
    with pytest.raises(ConfigError, match="two models are named 'npo-lr0.0001-s0'.*R14"):
        _pool(_text(methods=twice))


def test_an_existing_pool_reads_folders_and_globs_with_their_labels(tmp_path: Path) -> None:
    for name in ("npo_lr1", "npo_lr2", "full", "retain"):
        (tmp_path / "ckpt" / name).mkdir(parents=True)
    text = f"""
kind = "existing"
name = "elsewhere"
[pack]
path = "pack"
[suite]
metrics = ["forget_Q_A_Prob"]
audits = ["uds"]
[references]
full = "full"
retain = "retain"
[[models]]
path = "ckpt/full"
pool = "target"
[[models]]
path = "{tmp_path / "ckpt" / "retain"}"
pool = "never_saw"
[[models]]
glob = "ckpt/npo_*"
pool = "unlearned"
method = "npo"
parent = "full"
"""
    spec = parse_spec(tomllib.loads(text), source="pool.toml")
    pool = existing_pool(spec, root=tmp_path, folder_digest=lambda f: f.name.ljust(64, "0"))  # type: ignore[arg-type]
    assert [m.id for m in pool.models] == ["full", "retain", "npo_lr1", "npo_lr2"]
    assert pool.model("npo_lr2").state == "folder:" + "npo_lr2".ljust(64, "0")
    assert (pool.model("npo_lr1").method, pool.model("npo_lr1").parent) == ("npo", "full")
    spec.references["full"] = "missing"
    with pytest.raises(ConfigError, match="names no model of the pool.*C-H7"):
        existing_pool(spec, root=tmp_path, folder_digest=lambda f: "0" * 64)  # type: ignore[arg-type]
    spec.models[2].glob = "ckpt/none_*"
    with pytest.raises(ConfigError, match="matches no folder"):
        existing_pool(spec, root=tmp_path, folder_digest=lambda f: "0" * 64)  # type: ignore[arg-type]
