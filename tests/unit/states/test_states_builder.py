"""The one states builder (R2, R23, C-H3a, C-H3b): every trained state from a copy of the origin, built
once per recipe, saved and loaded back by its recipe's digest."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from remnant import registry
from remnant.models.identity import identify_in_memory
from remnant.models.prompts import PromptFormat
from remnant.states.builder import LoadedState, Made, Origin, StateBuilder
from remnant.states.store import CheckpointStore
from remnant.train.data import removal_data, split_qa
from remnant.train.install import InstallSpec

sys.path.insert(0, str(Path(__file__).parents[1] / "train"))
from _train_tiny import fresh, pack, same, weights  # noqa: E402

ATTR = ("birth_year",)
SPEC = InstallSpec(target=1.0, max_epochs=1, lr=1e-3, batch_size=8)
GA = {"lr": 1e-3, "epochs": 1, "batch_size": 8, "grad_accum": 1, "warmup_epochs": 0.0}


def _builder(tiny_llama: Any, store: Path | None = None) -> StateBuilder:
    model, tok = fresh(tiny_llama), tiny_llama.tokenizer
    origin = LoadedState("control", "tiny", "tiny", model, tok, identify_in_memory(model, tok))

    def load(path: Path) -> tuple[Any, Any, Any]:
        from remnant.models import load_model

        state = load_model(path)
        return state.model, state.tokenizer, state.identity

    fmt = PromptFormat.for_tokenizer(tok)
    kept = CheckpointStore(store) if store else None
    return StateBuilder(Origin(origin, pack(), fmt, ATTR), kept, load if store else None)


def _installed(b: StateBuilder) -> LoadedState:
    def make() -> Made:
        model, result = b.install(split_qa(pack(), "install", ATTR), SPEC, seed=0)
        return Made(model, {"install": result.to_dict()}, "installed")

    return b.state(
        b.origin.recipe("install", {"seed": 0, "items": "install"}), "installed", "installed", make
    )


def _refuse() -> Made:
    raise AssertionError("a state with a known recipe was trained again")


def test_control_states_train_copies_of_the_origin(tiny_llama: Any) -> None:
    """C-H3a: the procedure control is the method applied to the never-installed origin; C-H3b: the twin installs
    the shuffled pack by the same recipe. Neither changes the origin."""
    b = _builder(tiny_llama)
    before = weights(b.origin.state.model)
    method = registry.create("method", "grad_ascent", GA)
    model, result = b.removal(method, None, removal_data(pack(), ATTR), seed=0)
    assert result.status == "completed" and not same(weights(model), before)
    twin = b.twin(SPEC, seed=0)
    assert str(twin.record["twin_pack_id"]).endswith("-shuffled")
    assert twin.record["install"]["n"] == len(split_qa(pack(), "install", ATTR))  # type: ignore[index]
    assert same(weights(b.origin.state.model), before)


def test_one_recipe_is_built_once_and_its_digest_names_its_parent(tiny_llama: Any) -> None:
    b = _builder(tiny_llama)
    first = _installed(b)
    assert b.state(b.origin.recipe("install", {"seed": 0, "items": "install"}), "x", "x", _refuse) is first
    method = registry.create("method", "grad_ascent", GA)
    params = {"method": method.spec.to_dict(), "seed": 0}
    on_installed = b.origin.recipe("removal", params, first)
    on_origin = b.origin.recipe("removal", params)
    assert on_installed.digest != on_origin.digest and on_installed.parent == first.digest
    # a state not kept is handed out, and made again when asked for again
    made: list[Made] = []

    def make() -> Made:
        made.append(Made(fresh(tiny_llama), {}, "x"))
        return made[-1]

    once = b.state(on_origin, "procedure_control", "p", make, keep=False)
    twice = b.state(on_origin, "procedure_control", "p", make, keep=False)
    assert on_origin.digest not in b.memo and len(made) == 2
    assert (once.model, twice.model) == (made[0].model, made[1].model)


def test_a_saved_state_loads_back_with_the_same_weights_and_identity(tiny_llama: Any, tmp_path: Path) -> None:
    """R23: a state kept whole in the store is read back (not retrained) by a new builder with the same recipe,
    with the weights and identity the first build recorded."""
    built = _installed(_builder(tiny_llama, tmp_path))
    again = _builder(tiny_llama, tmp_path)
    recipe = again.origin.recipe("install", {"seed": 0, "items": "install"})
    (meta,) = [json.loads(p.read_text()) for p in tmp_path.glob("ckpt/*/meta.json")]
    assert meta["key"] == recipe.digest and meta["format"] == "full" and meta["state"]["role"] == "installed"
    assert (
        meta["state"]["identity"] == built.identity.model_dump(mode="json") and meta["build"] == built.record
    )
    loaded = again.state(recipe, "installed", "y", _refuse)
    assert loaded.identity == built.identity and loaded.record == built.record and loaded.name == "installed"
    assert all(
        torch.equal(a, b) for a, b in zip(loaded.model.parameters(), built.model.parameters(), strict=True)
    )
    with pytest.raises(AssertionError, match="trained again"):  # another seed is another recipe
        again.state(
            again.origin.recipe("install", {"seed": 1, "items": "install"}), "installed", "y", _refuse
        )


def test_a_saved_state_changed_since_is_refused_naming_its_folder(tiny_llama: Any, tmp_path: Path) -> None:
    """R23: a state's files edited after it was saved, a meta that is not one, or a key the store holds as a
    sweep's delta are refused, never read as the state its recipe names."""
    from remnant.errors import IntegrityError, RecordError

    _installed(_builder(tiny_llama, tmp_path))
    (folder,) = tmp_path.glob("ckpt/*")
    weights = folder / "state" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # one bit of one weight
    weights.write_bytes(bytes(data))
    again = _builder(tiny_llama, tmp_path)
    recipe = again.origin.recipe("install", {"seed": 0, "items": "install"})
    with pytest.raises(
        IntegrityError, match=f"{folder.name}: the files loaded are not the state saved there"
    ):
        again.state(recipe, "installed", "y", _refuse)
    meta = json.loads((folder / "meta.json").read_text())
    (folder / "meta.json").write_text('{"role": "installed"}', encoding="utf-8")
    with pytest.raises(RecordError, match="meta.json: not a checkpoint meta"):
        _builder(tiny_llama, tmp_path).state(recipe, "installed", "y", _refuse)
    delta = {**meta, "format": "delta", "state": None}
    (folder / "meta.json").write_text(json.dumps(delta), encoding="utf-8")
    with pytest.raises(IntegrityError, match="meta.json: field 'format' is 'delta', not a whole saved state"):
        _builder(tiny_llama, tmp_path).state(recipe, "installed", "y", _refuse)


def test_two_builders_asking_for_one_recipe_at_once_build_it_once(tiny_llama: Any, tmp_path: Path) -> None:
    """Two processes sharing a store (an assessment's ``states/``, a study's ``--states``) build a recipe once:
    the second waits on the store's lock and loads what the first kept (R23)."""
    import threading
    import time

    made: list[int] = []

    def make() -> Made:
        made.append(1)
        time.sleep(0.5)  # long enough for the other thread to ask meanwhile
        return Made(fresh(tiny_llama), {"n": len(made)}, "made")

    builders = [_builder(tiny_llama, tmp_path) for _ in range(2)]
    recipe = builders[0].origin.recipe("install", {"seed": 0, "items": "install"})
    got: list[LoadedState] = []
    threads = [
        threading.Thread(target=lambda b=b: got.append(b.state(recipe, "installed", "x", make)))
        for b in builders
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1 and len(got) == 2
    assert got[0].identity == got[1].identity and got[0].record == got[1].record == {"n": 1}


def test_a_state_kept_on_object_storage_loads_back_through_another_cache(
    tiny_llama: Any,
    s3: Any,
    tmp_path: Path,
) -> None:
    """The one store on S3 keeps whole states too: a builder on another machine (another cache) loads the state
    its recipe names, checked against the seal and the saved identity; an object changed since is refused (R23)."""
    from fixtures_s3 import BUCKET
    from remnant.errors import IntegrityError

    uri = f"s3://{BUCKET}/states"

    def builder(cache: str) -> StateBuilder:
        b = _builder(tiny_llama, tmp_path)  # a local store, replaced by the S3 one with its own cache
        b.store = CheckpointStore(uri, cache=tmp_path / cache)
        return b

    built = _installed(builder("writer"))
    objects = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]]
    assert any(k.endswith("/state/model.safetensors") for k in objects)
    assert any(k.endswith("/seal.json") for k in objects)
    again = builder("reader")
    recipe = again.origin.recipe("install", {"seed": 0, "items": "install"})
    loaded = again.state(recipe, "installed", "y", _refuse)
    assert loaded.identity == built.identity and loaded.record == built.record
    (weights,) = [k for k in objects if k.endswith("/state/config.json")]
    s3.put_object(Bucket=BUCKET, Key=weights, Body=b"{}")
    with pytest.raises(IntegrityError, match=r"state/config\.json: its bytes are not the ones its seal"):
        builder("third").state(recipe, "installed", "y", _refuse)
