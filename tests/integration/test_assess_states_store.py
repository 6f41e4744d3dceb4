"""``remnant assess --states STORE``: the states a run trains are kept in one content-addressed store outside the
run folder, and a second run of the same recipe (another run folder, another process) loads them instead of
training them again, checked against the files saved (R2, R23)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from assess_fixtures import tiny_pack, write_config

from fixtures_s3 import _moto_server, s3  # noqa: F401 - fixtures
from remnant.cli import main


def _assess(config: Path, run: Path, store: Path | str) -> dict[str, Any]:
    assert main(["preregister", str(config), "--out", str(run)]) == 0
    assert main(["assess", str(config), "--out", str(run), "--states", str(store), "--quiet"]) == 0
    statement = json.loads((run / "statement.json").read_text(encoding="utf-8"))
    assert isinstance(statement, dict)
    return statement


def test_a_second_run_loads_the_states_the_first_kept_in_the_store(
    tmp_path: Path, tiny_llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(tmp_path / "config.toml", pack=tiny_pack(tmp_path / "pack"), control=tiny_llama_dir)
    store = tmp_path / "store"
    first = _assess(config, tmp_path / "a", store)
    assert not (tmp_path / "a" / "states" / "ckpt").exists()  # kept in the store, not in the run folder
    metas = [json.loads(p.read_text()) for p in store.glob("ckpt/*/meta.json")]
    assert sorted(m["state"]["role"] for m in metas) == ["post_removal", "pre_removal"]

    from remnant.states import builder

    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("a state kept in the store was trained again")

    monkeypatch.setattr(builder, "train_install", refuse)
    monkeypatch.setattr(builder, "train_removal", refuse)
    import remnant  # the second through the public API: its ``states`` is the command's --states

    assert main(["preregister", str(config), "--out", str(tmp_path / "b")]) == 0
    remnant.assess(config, tmp_path / "b", states=store)
    second = json.loads((tmp_path / "b" / "statement.json").read_text(encoding="utf-8"))
    assert second["model"] == first["model"]  # the same states: their identities are their files' (R23)
    assert (second["verdict"], second["facts"]) == (first["verdict"], first["facts"])


def test_states_in_a_model_folder_or_a_file_are_refused(tmp_path: Path, tiny_llama_dir: Path) -> None:
    config = write_config(tmp_path / "config.toml", pack=tiny_pack(tmp_path / "pack"), control=tiny_llama_dir)
    assert main(["preregister", str(config), "--out", str(tmp_path / "run")]) == 0
    (tmp_path / "file").write_text("x", encoding="utf-8")
    for bad in (tmp_path / "file", tiny_llama_dir):
        args = ["assess", str(config), "--out", str(tmp_path / "run"), "--states", str(bad), "--quiet"]
        assert main(args) == 2
    assert not (tmp_path / "run" / "states").exists()  # refused before anything was built


def test_a_store_on_object_storage_serves_a_run_on_another_machine(
    tmp_path: Path,
    tiny_llama_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    s3: Any,  # noqa: F811
) -> None:
    """The same on S3: a run with another ``REMNANT_HOME`` (another machine's cache) loads the states the first
    run uploaded, each file checked against the seal and the saved identity (R23)."""
    from fixtures_s3 import BUCKET

    config = write_config(tmp_path / "config.toml", pack=tiny_pack(tmp_path / "pack"), control=tiny_llama_dir)
    uri = f"s3://{BUCKET}/states"
    monkeypatch.setenv("REMNANT_HOME", str(tmp_path / "home-a"))
    first = _assess(config, tmp_path / "a", uri)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]]
    assert sum(k.endswith("/state/model.safetensors") for k in keys) == 2

    from remnant.states import builder

    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("a state kept in the store was trained again")

    monkeypatch.setattr(builder, "train_install", refuse)
    monkeypatch.setattr(builder, "train_removal", refuse)
    monkeypatch.setenv("REMNANT_HOME", str(tmp_path / "home-b"))
    second = _assess(config, tmp_path / "b", uri)
    assert second["model"] == first["model"] and second["verdict"] == first["verdict"]
