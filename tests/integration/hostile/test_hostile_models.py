"""Hostile model folders (R2): each is refused by `remnant models identify` with exit 2, the file named, R2 cited.

Every case starts from a fresh copy of the tiny Llama (``tmp/model``) and tampers with it the way a claimant who
supplies model folders could: weights or tokenizer files that resolve outside the folder (index entries, absolute
paths, symlinks), a checkpoint that does not fill its architecture, custom code, a chat template that trips the
Jinja sandbox, files that are not regular files, malformed JSON, and paths that do not exist. `identify` runs the
same loader an assessment runs.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from harness import Hostile, check, ids
from safetensors.torch import load_file, save_file

W = "model.safetensors"
INDEX = "model.safetensors.index.json"
SHARDS = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")

Tamper = Callable[[Path, Path], object]


def _tensors(m: Path, edit: Callable[[dict[str, torch.Tensor]], object], name: str = W) -> None:
    tensors = load_file(m / name)
    edit(tensors)
    save_file(tensors, m / name, metadata={"format": "pt"})


def _write_index(m: Path, weight_map: dict[str, str], **extra: object) -> None:
    body = {"metadata": {}, "weight_map": weight_map, **extra}
    (m / INDEX).write_text(json.dumps(body), encoding="utf-8")


def _index_to(shard: str) -> Tamper:
    """An index mapping every tensor of ``model.safetensors`` to ``shard`` (the file stays beside it)."""
    return lambda m, tmp: _write_index(m, dict.fromkeys(sorted(load_file(m / W)), shard))


def _shard(m: Path) -> dict[str, str]:
    tensors = load_file(m / W)
    keys = sorted(tensors)
    weight_map = {k: SHARDS[0] if i < len(keys) // 2 else SHARDS[1] for i, k in enumerate(keys)}
    for part in SHARDS:
        save_file(
            {k: tensors[k] for k, p in weight_map.items() if p == part}, m / part, metadata={"format": "pt"}
        )
    (m / W).unlink()
    _write_index(m, weight_map)
    return weight_map


def _outside(m: Path, tmp: Path, name: str) -> None:
    """Move ``name`` out of the folder and leave a symlink to it."""
    (tmp / "outside").mkdir(exist_ok=True)
    shutil.move(m / name, tmp / "outside" / name)
    (m / name).symlink_to(tmp / "outside" / name)


def _json(name: str, **fields: object) -> Tamper:
    def tamper(m: Path, tmp: Path) -> None:
        data = json.loads((m / name).read_text(encoding="utf-8"))
        data.update(fields)
        (m / name).write_text(json.dumps(data), encoding="utf-8")

    return tamper


def _write(name: str, content: str | bytes) -> Tamper:
    def tamper(m: Path, tmp: Path) -> None:
        (m / name).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            (m / name).write_bytes(content)
        else:
            (m / name).write_text(content, encoding="utf-8")

    return tamper


def _replace(name: str, make: Callable[[Path], object]) -> Tamper:
    """``name`` removed and ``make(path)`` puts something else there (a link, a FIFO, a folder)."""

    def tamper(m: Path, tmp: Path) -> None:
        (m / name).unlink()
        make(m / name)

    return tamper


def _decoy_and_index_to(where: Callable[[Path], str]) -> Tamper:
    """Weights moved to ``tmp/other``; a zeroed decoy stays in the folder; the index maps to ``where(tmp)``."""

    def tamper(m: Path, tmp: Path) -> None:
        (tmp / "other").mkdir()
        keys = sorted(load_file(m / W))
        shutil.copy(m / W, tmp / "other" / W)
        _tensors(m, lambda t: [v.zero_() for v in t.values()])
        os.replace(m / W, m / "decoy.safetensors")
        _write_index(m, dict.fromkeys(keys, where(tmp)))

    return tamper


def _shard_linked_outside(m: Path, tmp: Path) -> None:
    _shard(m)
    _outside(m, tmp, SHARDS[1])


def _subfolder_shard_linked_outside(m: Path, tmp: Path) -> None:
    weight_map = _shard(m)
    _outside(m, tmp, SHARDS[0])
    (m / "sub").mkdir()
    (m / SHARDS[0]).rename(m / "sub" / SHARDS[0])
    _write_index(m, {k: f"sub/{v}" if v == SHARDS[0] else v for k, v in weight_map.items()})


def _index_linked_outside(m: Path, tmp: Path) -> None:
    _index_to(W)(m, tmp)
    _outside(m, tmp, INDEX)


def _one_of_two_shards(m: Path, tmp: Path) -> None:
    _write_index(m, {k: v for k, v in _shard(m).items() if v == SHARDS[0]})


def _legacy_template(m: Path, tmp: Path) -> None:
    (m / "chat_template.jinja").unlink()
    _json("tokenizer_config.json", chat_template="{{ self._TemplateReference__context }}{{ x.y }}")(m, tmp)


def _drop(*names: str) -> Tamper:
    return lambda m, tmp: _tensors(m, lambda t: [t.pop(n) for n in names])


def _case(
    case_id: str, tamper: Tamper, named: Callable[[Path, Path], object], target: str = "model"
) -> Hostile:
    def build(tmp: Path) -> tuple[list[str], str]:
        m = tmp / "model"
        tamper(m, tmp)
        return ["models", "identify", str(tmp / target)], str(named(m, tmp))

    return Hostile(case_id, build, requirement="R2")


def _in(name: str) -> Callable[[Path, Path], Path]:
    return lambda m, tmp: m / name


def _folder(m: Path, tmp: Path) -> Path:
    return m


def _link_out(name: str) -> Hostile:
    return _case(f"symlink-out-{name}", lambda m, tmp: _outside(m, tmp, name), _in(name))


def _template(case_id: str, text: str) -> Hostile:
    return _case(case_id, _write("chat_template.jinja", text), _folder)


CASES = [
    # ---- weights resolving outside the folder
    _case(
        "index-shard-parent-dir-with-decoy",
        _decoy_and_index_to(lambda tmp: "../other/model.safetensors"),
        lambda m, tmp: "../other/model.safetensors",
    ),
    _case(
        "index-shard-absolute-path-with-decoy",
        _decoy_and_index_to(lambda tmp: str(tmp / "other" / W)),
        lambda m, tmp: tmp / "other" / W,
    ),
    _case("index-shard-symlinked-outside", _shard_linked_outside, _in(SHARDS[1])),
    _case(
        "index-shard-in-subfolder-linked-outside", _subfolder_shard_linked_outside, _in(f"sub/{SHARDS[0]}")
    ),
    _link_out(W),
    _link_out("config.json"),
    _link_out("generation_config.json"),
    _link_out("tokenizer.json"),
    _link_out("tokenizer_config.json"),
    _link_out("chat_template.jinja"),
    _case("symlink-out-index", _index_linked_outside, _in(INDEX)),
    _case(
        "special-tokens-map-to-etc-passwd",
        lambda m, tmp: (m / "special_tokens_map.json").symlink_to("/etc/passwd"),
        _in("special_tokens_map.json"),
    ),
    _case("dangling-symlink-weights", _replace(W, lambda p: p.symlink_to(p.parent / "gone")), _in(W)),
    _case("symlink-loop-config", _replace("config.json", lambda p: p.symlink_to(p)), _in("config.json")),
    _case("fifo-as-tokenizer", _replace("tokenizer.json", os.mkfifo), _in("tokenizer.json")),
    _case("folder-as-weights", _replace(W, Path.mkdir), _in(W)),
    # ---- the index itself
    _case("index-names-a-pickle", _index_to("pytorch_model.bin"), _in(INDEX)),
    _case("index-dot-dot-inside", _index_to(f"sub/../{W}"), _in(INDEX)),
    _case("index-without-weight-map", _write(INDEX, '{"metadata": {}}'), _in(INDEX)),
    _case(
        "index-without-metadata",
        _write(INDEX, '{"weight_map": {"lm_head.weight": "x.safetensors"}}'),
        _in(INDEX),
    ),
    _case(
        "index-duplicate-key",
        _write(INDEX, '{"weight_map": {"a": "x.safetensors"}, "weight_map": {}}'),
        _in(INDEX),
    ),
    _case("index-not-json", _write(INDEX, "{'weight_map': None}"), _in(INDEX)),
    # ---- checkpoints that do not fill the architecture
    _case("missing-tensor", _drop("model.layers.1.mlp.down_proj.weight"), _folder),
    _case("missing-untied-lm-head", _drop("lm_head.weight"), _folder),
    _case(
        "missing-most-tensors",
        lambda m, tmp: _tensors(m, lambda t: [t.pop(k) for k in sorted(t)[1:]]),
        _folder,
    ),
    _case(
        "unexpected-tensor",
        lambda m, tmp: _tensors(m, lambda t: t.__setitem__("model.layers.0.payload", torch.zeros(8))),
        _folder,
    ),
    _case(
        "wrong-shape-tensor",
        lambda m, tmp: _tensors(m, lambda t: t.__setitem__("model.norm.weight", torch.ones(63))),
        _folder,
    ),
    _case("index-names-one-of-two-shards", _one_of_two_shards, _folder),
    _case("weights-not-safetensors", _write(W, b"\x80\x04" + b"x" * 64), _folder),
    # ---- custom code
    _case(
        "auto-map-in-config",
        _json("config.json", auto_map={"AutoModelForCausalLM": "x.X"}),
        _in("config.json"),
    ),
    _case(
        "auto-map-in-tokenizer-config",
        _json("tokenizer_config.json", auto_map={"AutoTokenizer": ["t.T", None]}),
        _in("tokenizer_config.json"),
    ),
    _case("python-file", _write("modeling_evil.py", "import os"), _in("modeling_evil.py")),
    _case(
        "python-file-in-subfolder",
        _write("custom_generate/generate.py", ""),
        _in("custom_generate/generate.py"),
    ),
    # ---- chat templates
    _template("template-mro-escape", "{{ ''.__class__.__mro__[1].__subclasses__() }}"),
    _template("template-globals-escape", "{{ cycler.__init__.__globals__.os.system('id') }}"),
    _template("template-dunder-call", "{% for m in messages %}{{ m.content.__len__() }}{% endfor %}"),
    _template("template-syntax-error", "{% for m in messages %}{{ m.content }"),
    _template("template-raises", "{{ raise_exception('refuse every conversation') }}"),
    _case("template-in-tokenizer-config", _legacy_template, _folder),
    # ---- missing, malformed and misplaced files
    _case("no-such-folder", lambda m, tmp: None, lambda m, tmp: tmp / "org" / "name", target="org/name"),
    _case("no-config", lambda m, tmp: (m / "config.json").unlink(), _folder),
    _case("no-weights", lambda m, tmp: (m / W).unlink(), _folder),
    _case(
        "pickled-weights-only",
        lambda m, tmp: os.replace(m / W, m / "pytorch_model.bin"),
        _in("pytorch_model.bin"),
    ),
    _case(
        "config-duplicate-key",
        _write("config.json", '{"model_type": "llama", "model_type": "gpt2"}'),
        _in("config.json"),
    ),
    _case("config-not-an-object", _write("config.json", "[1, 2]"), _in("config.json")),
    _case("config-unknown-model-type", _json("config.json", model_type="evil_arch"), _folder),
    _case("weights-file-not-gguf", lambda m, tmp: None, _in(W), target=f"model/{W}"),
    _case("gguf-garbage", _write("x.gguf", b"GGUF" + bytes(60)), _in("x.gguf"), target="model/x.gguf"),
]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_hostile_model_folder_is_refused(
    case: Hostile, tmp_path: Path, tiny_llama_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(tiny_llama_dir, tmp_path / "model")
    text = check(case, tmp_path, capsys)
    assert "trust_remote_code" not in text
    assert [line.startswith("remnant models: error: ") for line in text.splitlines()].count(True) == 1, text


def test_the_untampered_copy_is_accepted(
    tmp_path: Path, tiny_llama_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cases fail because of their tampering, not because a copied folder cannot be identified."""
    from remnant.cli import main

    shutil.copytree(tiny_llama_dir, tmp_path / "model")
    assert main(["models", "identify", str(tmp_path / "model")]) == 0
    identity = json.loads(capsys.readouterr().out)
    assert set(identity["weights"]) == {W} and identity["architecture"] == "LlamaForCausalLM"


def test_there_are_at_least_thirty_cases() -> None:
    assert len(CASES) >= 30
