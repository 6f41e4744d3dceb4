"""What a load may read (R2): files outside the folder, partial checkpoints, custom code, hostile templates.

Each refusal is checked on a tampered copy of the tiny Llama. The shard-escape and partial-checkpoint cases are
ones the loader used to accept: it loaded the weights an index pointed to outside the folder while the identity
hashed a decoy ``*.safetensors`` beside it, and it filled missing parameters with random values.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from tamper import WEIGHTS, copy_model, edit_tensors, index_to, move_outside, set_json, shard, write_index

from remnant.errors import ModelError
from remnant.models import load as load_module
from remnant.models import load_model
from remnant.models.files import model_files
from remnant.models.prompts import PromptFormat, render_prompt_ids


@pytest.fixture
def model(tmp_path: Path, tiny_llama_dir: Path) -> Path:
    return copy_model(tiny_llama_dir, tmp_path / "model")


def _refused(folder: Path | str, *needles: str) -> str:
    with pytest.raises(ModelError) as info:
        load_model(folder)
    text = str(info.value)
    assert info.value.requirement == "R2", text
    for needle in needles:
        assert needle in text, text
    return text


# ---- files resolving outside the folder -------------------------------------------------------------------


def test_index_shard_outside_the_folder_is_refused_not_a_decoy_hashed(model: Path, tmp_path: Path) -> None:
    outside = tmp_path / "other"
    outside.mkdir()
    shutil.move(model / WEIGHTS, outside / WEIGHTS)
    shutil.copy(outside / WEIGHTS, model / "decoy.safetensors")
    edit_tensors(model, lambda t: [v.zero_() for v in t.values()], "decoy.safetensors")
    index_to_outside = {k: "../other/model.safetensors" for k in _keys(outside / WEIGHTS)}
    write_index(model, index_to_outside)
    _refused(model, "'../other/model.safetensors' points outside the model folder")


def test_index_shard_by_absolute_path_is_refused(model: Path, tmp_path: Path) -> None:
    target = move_outside(model, WEIGHTS, tmp_path / "elsewhere")
    (model / WEIGHTS).unlink()
    shutil.copy(target, model / "decoy.safetensors")  # the old loader hashed this and loaded the target
    index_to_abs = {k: str(target) for k in _keys(target)}
    write_index(model, index_to_abs)
    _refused(model, str(target), "points outside the model folder")


def test_symlinked_shard_pointing_outside_is_refused(model: Path, tmp_path: Path) -> None:
    shard(model)
    target = move_outside(model, "model-00002-of-00002.safetensors", tmp_path / "elsewhere")
    text = _refused(model, "model-00002-of-00002.safetensors", "outside the model folder")
    assert str(target) in text


@pytest.mark.parametrize(
    "name",
    ["model.safetensors", "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"]
    + ["chat_template.jinja"],
)
def test_any_file_read_that_links_outside_is_refused(model: Path, tmp_path: Path, name: str) -> None:
    move_outside(model, name, tmp_path / "elsewhere")
    _refused(model, f"{model / name}", "outside the model folder")


def test_a_link_inside_the_folder_is_fine(model: Path) -> None:
    (model / "blobs").mkdir()
    shutil.move(model / WEIGHTS, model / "blobs" / "w")
    (model / WEIGHTS).symlink_to(model / "blobs" / "w")
    assert load_model(model).identity.weights == load_model(model).identity.weights


def test_hub_cache_snapshot_links_into_its_own_blobs_only(tmp_path: Path, tiny_llama_dir: Path) -> None:
    repo = tmp_path / "models--org--tiny"
    snapshot = repo / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir()
    for i, src in enumerate(sorted(tiny_llama_dir.iterdir())):
        blob = repo / "blobs" / f"blob{i}"
        shutil.copy(src, blob)
        (snapshot / src.name).symlink_to(Path("../../blobs") / blob.name)
    assert set(load_model(snapshot).identity.weights) == {WEIGHTS}
    stray = tmp_path / "stray"
    stray.mkdir()
    (snapshot / "tokenizer.json").unlink()
    shutil.copy(tiny_llama_dir / "tokenizer.json", stray / "tokenizer.json")
    (snapshot / "tokenizer.json").symlink_to(stray / "tokenizer.json")
    _refused(snapshot, "tokenizer.json", "outside the model folder")


def _keys(path: Path) -> list[str]:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        return list(f.keys())


# ---- the shards the index names, and only those -----------------------------------------------------------


def test_sharded_folder_loads_every_shard_it_names_and_ignores_strays(
    model: Path, tiny_llama_dir: Path
) -> None:
    shard(model)
    shutil.copy(tiny_llama_dir / WEIGHTS, model / "consolidated.safetensors")
    edit_tensors(model, lambda t: [v.fill_(7.0) for v in t.values()], "consolidated.safetensors")
    state = load_model(model)
    assert list(state.identity.weights) == [
        "model.safetensors.index.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ]
    reference = load_model(tiny_llama_dir).model.state_dict()
    for name, tensor in state.model.state_dict().items():
        assert torch.equal(tensor, reference[name]), name


def test_index_naming_one_of_two_shards_is_a_partial_checkpoint(model: Path) -> None:
    weight_map = shard(model)
    first = {k: v for k, v in weight_map.items() if v.startswith("model-00001")}
    write_index(model, first)
    _refused(model, "missing", f"{len(weight_map) - len(first)} parameter(s) missing")


@pytest.mark.parametrize(
    ("shard_name", "needle"),
    [
        ("sub/../model.safetensors", "points outside the model folder"),
        ("./model.safetensors", "not a plain relative path"),
        ("~/model.safetensors", "points outside the model folder"),
        ("pytorch_model.bin", "not a .safetensors file"),
        ("", "not a shard file name"),
    ],
)
def test_malformed_index_shard_names_are_refused(model: Path, shard_name: str, needle: str) -> None:
    index_to(model, shard_name)
    _refused(model, "model.safetensors.index.json", needle)


# ---- partial, padded and misshapen checkpoints ------------------------------------------------------------


def test_missing_parameter_is_refused_not_initialised_at_random(model: Path) -> None:
    edit_tensors(model, lambda t: t.pop("model.layers.0.mlp.up_proj.weight"))
    _refused(model, "1 parameter(s) missing", "model.layers.0.mlp.up_proj.weight")


def test_many_missing_parameters_are_listed_first_ten_and_counted(model: Path) -> None:
    edit_tensors(model, lambda t: [t.pop(k) for k in sorted(t)[:13]])
    text = _refused(model, "13 parameter(s) missing", "and 3 more")
    assert text.count("model.") + text.count("lm_head") >= 10


def test_unexpected_parameter_is_refused(model: Path) -> None:
    edit_tensors(model, lambda t: t.__setitem__("model.layers.0.hidden_payload", torch.zeros(4)))
    _refused(model, "1 parameter(s) unexpected", "model.layers.0.hidden_payload")


def test_wrong_shape_is_refused(model: Path) -> None:
    edit_tensors(model, lambda t: t.__setitem__("model.norm.weight", torch.ones(10)))
    _refused(model, "wrong shape", "model.norm.weight")


def test_tied_output_embedding_is_not_missing(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, LlamaConfig

    from fixtures_models import build_tokenizer  # type: ignore[import-not-found]
    from remnant.models import save_model

    tok = build_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    )
    model = AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]
    folder = save_model(model, tok, tmp_path / "tied")
    assert "lm_head.weight" not in _keys(folder / WEIGHTS)
    state = load_model(folder)
    assert state.model.lm_head.weight.data_ptr() == state.model.model.embed_tokens.weight.data_ptr()


# ---- custom code -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["config.json", "tokenizer_config.json"])
def test_auto_map_is_refused_without_pointing_at_remote_code(model: Path, name: str) -> None:
    set_json(model, name, auto_map={"AutoModelForCausalLM": "modeling_x.X", "AutoTokenizer": ["t.T", None]})
    text = _refused(model, f"{model / name}", "auto_map")
    assert "trust_remote_code" not in text


@pytest.mark.parametrize("where", ["modeling_llama.py", "sub/package/__init__.py"])
def test_python_files_in_the_folder_are_refused(model: Path, where: str) -> None:
    (model / where).parent.mkdir(parents=True, exist_ok=True)
    (model / where).write_text("import os\n")
    text = _refused(model, where, "Python code")
    assert "trust_remote_code" not in text


def test_pickled_weights_only_are_refused_naming_the_file(model: Path) -> None:
    (model / WEIGHTS).unlink()
    (model / "pytorch_model.bin").write_bytes(b"\x80\x04not loaded")
    _refused(model, "pytorch_model.bin", "pickled weights are refused")


# ---- chat templates ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "template",
    [
        "{{ ''.__class__.__mro__ }}",
        "{{ cycler.__init__.__globals__.os }}",
        "{% for m in messages %}{{ m.content.__len__() }}{% endfor %}",
        "{% if %}",
        "{{ raise_exception('no user turns') }}",
    ],
)
def test_a_template_that_cannot_render_refuses_the_model(model: Path, template: str) -> None:
    (model / "chat_template.jinja").write_text(template)
    _refused(model, str(model), "chat template cannot be rendered")


def test_legacy_template_in_tokenizer_config_is_checked_too(model: Path) -> None:
    (model / "chat_template.jinja").unlink()
    set_json(model, "tokenizer_config.json", chat_template="{{ ''.__class__.__mro__ }}")
    _refused(model, "SecurityError")


def test_a_template_failing_later_is_a_model_error_not_a_traceback(model: Path) -> None:
    (model / "chat_template.jinja").write_text(
        "{% for m in messages %}{% if m.role == 'system' %}{{ m.__class__ }}{{ m.x.y }}{% endif %}"
        "{{ m.content }}{% endfor %}"
    )
    state = load_model(model)  # renders the one-user-turn check
    with pytest.raises(ModelError, match="chat template cannot be rendered"):
        render_prompt_ids(state.tokenizer, "q", PromptFormat(style="chat", system_prompt="s"))


# ---- folders, files and hub ids ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["./org/name", "org/name/x", "~/nowhere-remnant/x", "org/name.gguf", "lonely"]
)
def test_missing_paths_are_missing_folders_never_hub_ids(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    def no_hub(hub_id: str, revision: str | None = None) -> Path:
        raise AssertionError(f"{hub_id} went to the hub")

    monkeypatch.setattr(load_module, "hub_model", no_hub)
    _refused(name, "no such model folder")
    _refused(tmp_path / "org" / "name", "no such model folder")


def test_a_path_object_is_never_a_hub_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(
        load_module, "hub_model", lambda hub_id, revision=None: pytest.fail(f"{hub_id} went to the hub")
    )
    _refused(Path("org/name"), "no such model folder")


def test_hub_id_shape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_module.is_hub_id("HuggingFaceTB/SmolLM2-135M-Instruct")
    for name in ("./a/b", "/a/b", "~/a", "a/b/c", "a", "../a", "a/..", "a/b.safetensors", ".a/b", "a//b"):
        assert not load_module.is_hub_id(name), name
    (tmp_path / "org" / "name").mkdir(parents=True)
    assert not load_module.is_hub_id("org/name"), "an existing path is a path"


def test_an_existing_relative_org_name_folder_loads_as_a_folder(
    tmp_path: Path, tiny_llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy_model(tiny_llama_dir, tmp_path / "org" / "name")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(
        load_module, "hub_model", lambda hub_id, revision=None: pytest.fail(f"{hub_id} went to the hub")
    )
    assert load_model("org/name").identity.architecture == "LlamaForCausalLM"


def test_preflight_checks_what_a_load_reads(model: Path, tmp_path: Path) -> None:
    from remnant.assess.states import check_model_folder

    check_model_folder(model, "models.post_removal.folder")
    set_json(model, "config.json", auto_map={"AutoModelForCausalLM": "m.M"})
    with pytest.raises(ModelError, match=r"models\.post_removal\.folder: .*auto_map") as info:
        check_model_folder(model, "models.post_removal.folder")
    assert info.value.requirement == "R2"
    with pytest.raises(ModelError, match="no such model folder"):
        check_model_folder(tmp_path / "org" / "name", "models.control.folder")


def test_model_files_choose_the_files_a_load_reads(model: Path) -> None:
    (model / "README.md").write_text("not read")
    (model / "extra.safetensors").write_bytes(b"not read")
    files = model_files(model)
    assert files.weights == (WEIGHTS,)
    assert files.config == ("config.json", "generation_config.json")
    assert files.tokenizer == ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
    assert all(p.is_relative_to(model.resolve()) for p in files.resolved.values())
