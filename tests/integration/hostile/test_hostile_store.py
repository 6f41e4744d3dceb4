"""Hostile checkpoint stores (R23): the store is a cache, and sweep records — never its ``meta.json`` — say what a
checkpoint holds (remnant.sweep.pins).

Every case starts from a fresh copy of one tiny sweep (``tmp/sweep``, its records pinning every checkpoint) and
its store (``tmp/store``), and tampers with the store the way someone who can write it could: a delta rewritten
with the meta's digest recomputed to match, a delta rewritten alone, a meta naming an unknown format or a LoRA
rank that is no whole number or a field nobody writes, a delta or adapter tensor of the wrong shape, a delta that
is no safetensors file, records that pin nothing. Each is given to ``remnant sweep export`` (which reads the
checkpoint) and, for the forged ones, to a fresh sweep reusing the store and to a rerun of the sweep itself: a
mismatch with the pin is a failed check (exit 1), a malformed file bad input (exit 2); the file is named, R23
cited, and nothing is exported or measured.

Beside the cases: a fresh sweep over a store another sweep built adopts that sweep's pins without building, a
store entry nothing pins is built again (to the same weights), and an existing pool's weights rewritten in place
with their modification time put back get a new identity, so the old results do not stand for them.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from harness import Hostile, check, ids
from safetensors.torch import load_file, save_file

from remnant.cli import main
from remnant.records import RECORDS_FILE, Event, RecordStore

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "sweep"))
from sweep_fixtures import TINY_METHODS, tiny_spec  # noqa: E402

NPO, LORA, INSTALL = "npo-lr0.001-s0", "ga-lora-default-s0", "target-full-s0"
METHODS = (
    TINY_METHODS
    + """
[[removal.methods]]
name = "grad_ascent"
label = "ga-lora"
params = { epochs = 1, batch_size = 4, grad_accum = 1, warmup_epochs = 0.0, lora_rank = 4 }
"""
)
Build = Callable[[Path], tuple[list[str], str]]


def _spec_text(model_dir: Path, store: Path) -> str:
    """The tiny pool, measured as little as a store test needs: one metric, κ and utility, no NF4, no audits."""
    text = tiny_spec(model_dir, store, methods=METHODS)
    text = text.replace("nf4 = true", "nf4 = false").replace('audits = ["uds"]', "audits = []")
    return text.replace(
        'metrics = ["forget_Q_A_Prob", "forget_truth_ratio"]', 'metrics = ["forget_Q_A_Prob"]'
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, tiny_llama_dir: Path) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("store-sweep")
    spec = root / "spec.toml"
    spec.write_text(_spec_text(tiny_llama_dir, root / "store"))
    assert main(["sweep", "run", str(spec), "--out", str(root / "sweep"), "--quiet"]) == 0
    yield {"root": root, "model_dir": tiny_llama_dir}


def _given(built: dict[str, Any], tmp: Path) -> None:
    """A private copy of the sweep and its store under ``tmp``: ``tmp/spec.toml`` names ``tmp/store``, and so do
    the copied sweep's spec and plan (so a rerun of ``tmp/sweep`` is the same spec)."""
    root = built["root"]
    shutil.copytree(root / "store", tmp / "store")
    shutil.copytree(root / "sweep", tmp / "sweep")
    text = _spec_text(built["model_dir"], tmp / "store")
    (tmp / "spec.toml").write_text(text)
    (tmp / "sweep" / "spec.toml").write_text(text)
    plan = json.loads((tmp / "sweep" / "plan.json").read_text())
    plan["store"] = str(tmp / "store")
    (tmp / "sweep" / "plan.json").write_text(json.dumps(plan))


def _plan(tmp: Path) -> dict[str, Any]:
    return dict(json.loads((tmp / "sweep" / "plan.json").read_text()))


def _folder(tmp: Path, model_id: str) -> Path:
    state = next(m["state"] for m in _plan(tmp)["pool"]["models"] if m["id"] == model_id)
    return tmp / "store" / "ckpt" / str(state)


def _edit_meta(tmp: Path, model_id: str, edit: Callable[[dict[str, Any]], object]) -> Path:
    path = _folder(tmp, model_id) / "meta.json"
    meta = json.loads(path.read_text())
    edit(meta)
    path.write_text(json.dumps(meta))
    return path


def _rewrite(tmp: Path, model_id: str, name: str, edit: Callable[[dict[str, torch.Tensor]], object]) -> Path:
    path = _folder(tmp, model_id) / name
    tensors = load_file(path)
    edit(tensors)
    save_file(tensors, path)
    return path


def _nudge(tensors: dict[str, torch.Tensor]) -> None:
    name = sorted(tensors)[0]
    tensors[name] = tensors[name] + 0.01


def _grow(tensors: dict[str, torch.Tensor]) -> None:
    name = sorted(tensors)[0]
    tensors[name] = torch.zeros(tensors[name].shape[0] + 1, *tensors[name].shape[1:])


def _forged_digest(tmp: Path, model_id: str) -> str:
    """The digest a forger recomputes for a rewritten delta: the base model with the chain's deltas applied."""
    from remnant.models import load_model
    from remnant.models.identity import weights_digest_of

    model = load_model(Path(_plan(tmp)["base_path"])).model
    chain, current = [], _folder(tmp, model_id)
    while True:
        chain.append(current)
        parent = json.loads((current / "meta.json").read_text())["parent"]
        if parent is None:
            break
        current = tmp / "store" / "ckpt" / parent
    for folder in reversed(chain):
        model.load_state_dict(load_file(folder / "delta.safetensors"), strict=False)
    return weights_digest_of(model)


def _forge(tmp: Path) -> Path:
    """NPO's delta rewritten and its meta's weights digest recomputed to match: the store vouches for itself."""
    _rewrite(tmp, NPO, "delta.safetensors", _nudge)
    digest = _forged_digest(tmp, NPO)
    _edit_meta(tmp, NPO, lambda m: m.update(weights_digest=digest))
    return _folder(tmp, NPO)


def _export(model_id: str) -> list[str]:
    return ["sweep", "export", "{tmp}/sweep", model_id, "--out", "{tmp}/exported"]


def _fresh_sweep() -> list[str]:
    return ["sweep", "run", "{tmp}/spec.toml", "--out", "{tmp}/fresh", "--quiet"]


def _rerun() -> list[str]:
    return ["sweep", "run", "{tmp}/spec.toml", "--out", "{tmp}/sweep", "--quiet"]


def _case(tamper: Callable[[Path], Path], argv: list[str], suffix: str = "") -> Build:
    """Tamper with the copy in ``tmp`` (the fixture's copy is made by the test) and give ``argv`` the result;
    the output must name what ``tamper`` returns (plus ``suffix``)."""

    def build(tmp: Path) -> tuple[list[str], str]:
        named = tamper(tmp)
        return [a.replace("{tmp}", str(tmp)) for a in argv], str(named) + suffix

    return build


def _meta_case(model_id: str, edit: Callable[[dict[str, Any]], object]) -> Callable[[Path], Path]:
    return lambda tmp: _edit_meta(tmp, model_id, edit)


def _unpinned(tmp: Path) -> Path:
    (tmp / "sweep" / RECORDS_FILE).unlink()
    return _folder(tmp, NPO)


def _garbage_delta(tmp: Path) -> Path:
    path = _folder(tmp, NPO) / "delta.safetensors"
    path.write_bytes(b"\xff" * 64)
    return path


def _lora_rank(value: Any) -> Callable[[dict[str, Any]], object]:
    return lambda m: m["lora"].update(rank=value)


CASES = [
    # forged: the store says what the forger wants, the records still pin the built weights (exit 1)
    Hostile("export-delta-rewritten-meta-recomputed", _case(_forge, _export(NPO)), "R23", 1),
    Hostile("fresh-sweep-delta-rewritten-meta-recomputed", _case(_forge, _fresh_sweep()), "R23", 1),
    Hostile("rerun-delta-rewritten-meta-recomputed", _case(_forge, _rerun()), "R23", 1),
    Hostile(
        "export-delta-rewritten",
        _case(lambda t: (_rewrite(t, NPO, "delta.safetensors", _nudge), _folder(t, NPO))[1], _export(NPO)),
        "R23",
        1,
    ),
    Hostile(
        "export-lora-adapter-rewritten",
        _case(
            lambda t: (_rewrite(t, LORA, "adapter.safetensors", _nudge), _folder(t, LORA))[1], _export(LORA)
        ),
        "R23",
        1,
    ),
    Hostile("export-pinned-by-no-record", _case(_unpinned, _export(NPO)), "R23", 1),
    # malformed: bad input, refused before any tensor is applied (exit 2)
    Hostile(
        "export-meta-unknown-format",
        _case(_meta_case(NPO, lambda m: m.update(format="zip")), _export(NPO)),
        "R23",
    ),
    Hostile(
        "fresh-sweep-meta-unknown-format",
        _case(_meta_case(NPO, lambda m: m.update(format="zip")), _fresh_sweep()),
        "R23",
    ),
    Hostile("export-lora-rank-not-integer", _case(_meta_case(LORA, _lora_rank(2.5)), _export(LORA)), "R23"),
    Hostile("export-lora-rank-a-string", _case(_meta_case(LORA, _lora_rank("4")), _export(LORA)), "R23"),
    Hostile(
        "export-meta-unknown-field",
        _case(_meta_case(INSTALL, lambda m: m.update(trusted=True)), _export(NPO)),
        "R23",
    ),
    Hostile(
        "export-delta-wrong-shape",
        _case(lambda t: _rewrite(t, NPO, "delta.safetensors", _grow), _export(NPO)),
        "R23",
    ),
    Hostile(
        "export-lora-tensor-wrong-shape",
        _case(lambda t: _rewrite(t, LORA, "adapter.safetensors", _grow), _export(LORA)),
        "R23",
    ),
    Hostile(
        "export-delta-not-safetensors",
        _case(_garbage_delta, _export(NPO)),
        "R23",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_hostile_store(
    case: Hostile, built: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _given(built, tmp_path)
    records = (tmp_path / "sweep" / RECORDS_FILE).read_bytes() if "rerun" in case.id else None
    check(case, tmp_path, capsys)
    assert not (tmp_path / "exported").exists()  # nothing exported
    if records is not None:  # a refused rerun appends nothing
        assert (tmp_path / "sweep" / RECORDS_FILE).read_bytes() == records
    if (tmp_path / "fresh" / RECORDS_FILE).exists():  # a refused fresh sweep measured nothing
        assert not [
            r for r in RecordStore(tmp_path / "fresh" / RECORDS_FILE).read() if not isinstance(r, Event)
        ]


def _summary(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(argv) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_a_fresh_sweep_adopts_the_pins_of_the_sweep_that_built_the_store(
    built: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No rebuild: the fresh sweep's records pin what the building sweep's records pinned, naming them, and its
    export reads the checkpoints through those pins."""
    from remnant.sweep.pins import read_pins

    root = built["root"]
    spec = tmp_path / "spec.toml"
    spec.write_text((root / "spec.toml").read_text())
    summary = _summary(capsys, ["sweep", "run", str(spec), "--out", str(tmp_path / "b"), "--quiet"])
    assert summary["builds"] == 0 and summary["computed"] > 0
    theirs = read_pins(root / "sweep" / RECORDS_FILE)
    assert read_pins(tmp_path / "b" / RECORDS_FILE) == theirs and len(theirs) == 4
    (note,) = [r for r in RecordStore(tmp_path / "b" / RECORDS_FILE).read() if isinstance(r, Event)]
    assert set(note.data["pinned_by"].values()) == {str((root / "sweep" / RECORDS_FILE).resolve())}
    out = tmp_path / "npo"
    assert main(["sweep", "export", str(tmp_path / "b"), NPO, "--out", str(out)]) == 0
    assert (out / "model.safetensors").is_file()


def test_a_store_entry_nothing_pins_is_built_again_to_the_pinned_weights(
    built: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The sweep that built the store is gone (its metas name records that no longer exist): a fresh sweep does
    not take the store's word, it builds every checkpoint again — on this CPU to the very weights the first
    build pinned — and pins them in its own records."""
    from remnant.states.store import CheckpointStore
    from remnant.sweep.pins import read_pins

    _given(built, tmp_path)
    shutil.rmtree(tmp_path / "sweep")  # the building sweep, with its records
    for meta in (tmp_path / "store" / "ckpt").glob("*/meta.json"):  # the copied metas name it
        data = json.loads(meta.read_text())
        data["built_by"]["records"] = str(tmp_path / "sweep" / RECORDS_FILE)
        meta.write_text(json.dumps(data))
    (tmp_path / "spec.toml").write_text(_spec_text(built["model_dir"], tmp_path / "store"))
    summary = _summary(
        capsys, ["sweep", "run", str(tmp_path / "spec.toml"), "--out", str(tmp_path / "c"), "--quiet"]
    )
    assert summary["builds"] >= 3  # both installs and both removals (NPO's parent built inside its task)
    pins = read_pins(tmp_path / "c" / RECORDS_FILE)
    assert pins == read_pins(built["root"] / "sweep" / RECORDS_FILE)
    store = CheckpointStore(tmp_path / "store")
    for key in pins:
        by = store.meta(key).built_by
        assert by is not None and by.records == str((tmp_path / "c" / RECORDS_FILE).resolve())


EXISTING = """
kind = "existing"
name = "elsewhere"
[pack]
mint = {{ entities = 8, controls = 2, seed = 3, general = false, truth_ratio_options = true }}
attributes = ["home_town"]
[suite]
metrics = ["forget_Q_A_Prob"]
[resources]
store = "{store}"
[[models]]
path = "m"
id = "m"
pool = "target"
"""


def test_existing_pool_weights_rewritten_in_place_with_mtime_restored_get_a_new_identity(
    tmp_path: Path, tiny_llama_dir: Path
) -> None:
    """Size, path and modification time put back by hand (``os.utime``) no longer keep a rewritten file's cached
    hash: the model's state — every cell key — changes, so the old results do not stand for the new weights."""
    from remnant.sweep.prepare import prepare

    shutil.copytree(tiny_llama_dir, tmp_path / "m")
    spec = tmp_path / "pool.toml"
    spec.write_text(EXISTING.format(store=tmp_path / "store"))
    first = prepare(spec, out=tmp_path / "out")
    weights = tmp_path / "m" / "model.safetensors"
    stat = weights.stat()
    data = bytearray(weights.read_bytes())
    data[-5] ^= 0x01
    time.sleep(0.02)
    with weights.open("r+b") as handle:
        handle.write(bytes(data))
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (weights.stat().st_size, weights.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    second = prepare(spec, out=tmp_path / "out")
    assert first.pool.model("m").state != second.pool.model("m").state
    assert {c.key for c in first.cells}.isdisjoint(c.key for c in second.cells)


def _bad_uri(uri: str) -> Hostile:
    def build(tmp: Path) -> tuple[list[str], str]:
        spec = tmp / "spec.toml"
        spec.write_text(tiny_spec(tmp / "no-model", tmp / "store").replace(str(tmp / "store"), uri))
        return ["sweep", "plan", str(spec)], str(spec)

    return Hostile(f"store-uri-{uri.replace('/', '_')}", build, "R23")


URI_CASES = [_bad_uri("s3://"), _bad_uri("s3:///prefix"), _bad_uri("gs://")]


@pytest.mark.parametrize("case", URI_CASES, ids=ids(URI_CASES))
def test_hostile_store_uri(case: Hostile, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A store URI naming no bucket is refused before anything is read, naming the spec and its field."""
    text = check(case, tmp_path, capsys)
    assert "field 'resources.store'" in text
