"""The files a model is read from: chosen here, checked here, and the only files a load can see (R2, R23).

A model's identity must be what was loaded, and a claimant's folder is untrusted, so every file read must be a
regular file (a FIFO named ``tokenizer.json`` would hang the load) resolving, symlinks followed, inside the folder
(or a Hugging Face cache snapshot's own ``blobs/``); custom code (``auto_map``, any ``*.py`` file) is refused; the
weights are ``model.safetensors.index.json`` and exactly the shards it names, else ``model.safetensors`` (other
``*.safetensors`` files, e.g. Mistral's ``consolidated.safetensors``, are neither loaded nor hashed). The load runs
on a private staging folder of symlinks to exactly these files (:func:`staged`), and
:mod:`remnant.models.identity` hashes exactly these files.

A PEFT LoRA adapter folder is a model too (R2): its base (``base_model_name_or_path``: an absolute folder, one
relative to the adapter, or a hub id) is checked as above, and the adapter's two files are added under
``adapter/`` names, so they are staged, hashed and loaded with the base's. A pickled ``adapter_model.bin``, an
adapter on an adapter and a ``peft_type`` other than ``LORA`` are refused. No torch here."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from remnant.errors import ModelError
from remnant.jsonio import loads_strict

INDEX_NAME = "model.safetensors.index.json"
SINGLE_WEIGHTS = "model.safetensors"
CONFIG_NAME = "config.json"
GENERATION_CONFIG = "generation_config.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
CHAT_TEMPLATE_FILE = "chat_template.jinja"
#: The tokenizer files transformers 5 looks up in a folder (its ``vocab_files_names`` and the extra files of
#: ``PreTrainedTokenizerBase.from_pretrained``). Only these are staged, so only these can be read and hashed.
TOKENIZER_FILES = (
    "tokenizer.json",
    TOKENIZER_CONFIG,
    "special_tokens_map.json",
    "added_tokens.json",
    CHAT_TEMPLATE_FILE,
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "tokenizer.model",
    "spiece.model",
    "sentencepiece.bpe.model",
    "tekken.json",
    "tiktoken.model",
)
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".ckpt")
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
#: Where an adapter's files sit among the files of one load (a folder of the staging folder).
ADAPTER_DIR = "adapter"
#: The PEFT adapter types remnant applies (merged into the base before scoring).
ADAPTER_TYPES = ("LORA",)
#: Largest JSON file (config, index, tokenizer config) read here to check it; real ones are under 2 MB.
MAX_JSON_BYTES = 64 << 20
_SEGMENT = re.compile(r"[^/\\\x00]+")


@dataclass(frozen=True)
class ModelFiles:
    """The files one load reads, each by its ``/``-separated name inside the folder, grouped by role; ``resolved`` maps
    each to the file it resolves to, and ``gguf`` is set for a single ``.gguf`` file (weights, config and tokenizer)."""

    folder: Path
    weights: tuple[str, ...]
    config: tuple[str, ...]
    tokenizer: tuple[str, ...]
    resolved: dict[str, Path]
    gguf: str | None = None
    adapter: tuple[str, ...] = ()

    @property
    def directory(self) -> Path:
        """The folder the files sit in (a GGUF file's parent)."""
        return self.folder.parent if self.gguf is not None else self.folder

    @property
    def names(self) -> tuple[str, ...]:
        """Every file read, in role order (a PEFT adapter's files last)."""
        return self.weights + self.config + self.tokenizer + self.adapter


def _refuse(message: str) -> ModelError:
    return ModelError(message, requirement="R2")


def _containment_roots(folder: Path) -> tuple[Path, ...]:
    """Where the folder's files may resolve: the folder, and a hub cache snapshot's own ``blobs/``."""
    real = folder.resolve()
    roots = [real]
    if real.parent.name == "snapshots" and (real.parent.parent / "blobs").is_dir():
        roots.append((real.parent.parent / "blobs").resolve())
    return tuple(roots)


def _regular_inside(folder: Path, name: str, roots: tuple[Path, ...], what: str) -> Path:
    """``folder/name`` resolved, refused unless it is a regular file inside one of ``roots`` (R2)."""
    path = folder / name
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError) as exc:  # a dangling link or a link loop
        raise _refuse(f"{path}: {what} cannot be resolved ({type(exc).__name__}: {exc})") from None
    if not any(real.is_relative_to(root) for root in roots):
        raise _refuse(f"{path}: {what} resolves to {real}, outside the model folder {folder}")
    if not stat.S_ISREG(real.stat().st_mode):
        raise _refuse(f"{path}: {what} is not a regular file")
    return real


def _present(folder: Path, name: str) -> bool:
    """The folder holds an entry ``name`` (a dangling symlink counts, so it is refused rather than skipped)."""
    path = folder / name
    return path.is_symlink() or path.exists()


def _read_json(path: Path, label: Path) -> Any:
    size = path.stat().st_size
    if size > MAX_JSON_BYTES:
        raise _refuse(f"{label}: {size} bytes is larger than any model file of its kind ({MAX_JSON_BYTES})")
    return loads_strict(path.read_bytes(), source=str(label), requirement="R2", error=ModelError)


def _shard_name(name: object, index: Path) -> str:
    """A shard name from the index: a relative ``.safetensors`` path with no empty, ``.`` or ``..`` part."""
    if not isinstance(name, str) or not name:
        raise _refuse(f"{index}: weight_map holds {name!r}, not a shard file name")
    parts = name.split("/")
    if name.startswith(("/", "~")) or ".." in parts or Path(name).is_absolute():
        raise _refuse(f"{index}: shard {name!r} points outside the model folder")
    if any(p in ("", ".") or not _SEGMENT.fullmatch(p) for p in parts):
        raise _refuse(f"{index}: shard {name!r} is not a plain relative path inside the model folder")
    if not name.endswith(".safetensors"):
        raise _refuse(f"{index}: shard {name!r} is not a .safetensors file")
    return name


def _index_shards(folder: Path, real_index: Path) -> tuple[str, ...]:
    index = folder / INDEX_NAME
    data = _read_json(real_index, index)
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise _refuse(f"{index}: no weight_map naming the shards")
    if not isinstance(data.get("metadata"), dict):  # transformers reads it: a KeyError otherwise
        raise _refuse(f"{index}: no metadata object")
    for key in weight_map:
        if not key:
            raise _refuse(f"{index}: weight_map has an empty tensor name")
    return tuple(sorted({_shard_name(v, index) for v in weight_map.values()}))


def _refuse_pickles_or_nothing(folder: Path) -> ModelError:
    pickles = sorted(p for p in folder.iterdir() if p.suffix in PICKLE_SUFFIXES)
    if pickles:
        return _refuse(
            f"{pickles[0]}: pickled weights are refused (loading them can run code); "
            "convert the model to safetensors"
        )
    return _refuse(f"{folder}: no {SINGLE_WEIGHTS} or {INDEX_NAME} found")


def has_weights(folder: Path) -> bool:
    """Whether ``folder`` holds safetensors weights (a folder with only ``config.json`` can still be priced)."""
    return _present(folder, SINGLE_WEIGHTS) or _present(folder, INDEX_NAME)


def _refuse_code(folder: Path) -> None:
    """Custom code is never run, so a folder that ships or asks for it is refused (R2)."""
    code = next(iter(sorted(folder.rglob("*.py"))), None)
    if code is not None:
        raise _refuse(f"{code}: model folders holding Python code are refused (custom code is never run)")


def _refuse_auto_map(folder: Path, name: str, real: Path) -> None:
    data = _read_json(real, folder / name)
    if not isinstance(data, dict):
        raise _refuse(f"{folder / name}: not a JSON object")
    if "auto_map" in data:
        raise _refuse(
            f"{folder / name}: auto_map asks for custom model code, which remnant never runs; "
            "use a model of a built-in transformers architecture"
        )


def folder_files(folder: Path) -> ModelFiles:
    """Choose and check the files a load of ``folder`` reads (module docstring); ModelError (R2) otherwise."""
    if not folder.is_dir():
        raise _refuse(f"{folder}: no such model folder")
    roots = _containment_roots(folder)
    _refuse_code(folder)
    resolved: dict[str, Path] = {}

    def take(name: str, what: str) -> str:
        resolved[name] = _regular_inside(folder, name, roots, what)
        return name

    if _present(folder, INDEX_NAME):
        take(INDEX_NAME, "the shard index")
        shards = _index_shards(folder, resolved[INDEX_NAME])
        weights = (INDEX_NAME, *(take(s, "a weights shard the index names") for s in shards))
    elif _present(folder, SINGLE_WEIGHTS):
        weights = (take(SINGLE_WEIGHTS, "the weights file"),)
    else:
        raise _refuse_pickles_or_nothing(folder)
    if not _present(folder, CONFIG_NAME):
        raise _refuse(f"{folder}: no {CONFIG_NAME}")
    config = tuple(take(n, "a model config") for n in (CONFIG_NAME, GENERATION_CONFIG) if _present(folder, n))
    tokenizer = tuple(take(n, "a tokenizer file") for n in TOKENIZER_FILES if _present(folder, n))
    _refuse_auto_map(folder, CONFIG_NAME, resolved[CONFIG_NAME])
    if TOKENIZER_CONFIG in resolved:
        _refuse_auto_map(folder, TOKENIZER_CONFIG, resolved[TOKENIZER_CONFIG])
    return ModelFiles(folder, weights, config, tokenizer, resolved)


def _adapter_base(folder: Path, config: Mapping[str, object]) -> Path:
    """The base model folder an adapter names (module docstring); ModelError (R2) when it cannot be found."""
    label = folder / ADAPTER_CONFIG
    base = config.get("base_model_name_or_path")
    if not isinstance(base, str) or not base.strip():
        raise _refuse(f"{label}: base_model_name_or_path must name the base model (a folder or a hub id)")
    path = Path(base).expanduser()
    if path.is_absolute():
        return path
    if os.path.lexists(folder / path):
        return folder / path
    from remnant.hub import is_hub_id

    if not is_hub_id(base):
        raise _refuse(f"{label}: base model {base!r} is neither a folder (beside the adapter) nor a hub id")
    from remnant.models.load import resolve_source  # lazy: only a hub base needs the loader (and torch)

    try:
        return resolve_source(base)
    except ModelError as exc:
        raise _refuse(f"{label}: base model {base!r}: {exc}") from None


def adapter_files(folder: Path) -> ModelFiles:
    """A PEFT LoRA adapter folder: its base's files plus ``adapter/adapter_config.json`` and
    ``adapter/adapter_model.safetensors`` (module docstring; R2)."""
    label = folder / ADAPTER_CONFIG
    roots = _containment_roots(folder)
    _refuse_code(folder)
    if not _present(folder, ADAPTER_WEIGHTS):
        if _present(folder, "adapter_model.bin"):
            raise _refuse(
                f"{folder / 'adapter_model.bin'}: pickled adapter weights are refused (loading them can run "
                "code); save the adapter with safe_serialization=True"
            )
        raise _refuse(f"{folder}: {ADAPTER_CONFIG} but no {ADAPTER_WEIGHTS}")
    real_config = _regular_inside(folder, ADAPTER_CONFIG, roots, "the adapter config")
    config = _read_json(real_config, label)
    if not isinstance(config, dict):
        raise _refuse(f"{label}: not a JSON object")
    if config.get("peft_type") not in ADAPTER_TYPES:
        raise _refuse(
            f"{label}: peft_type {config.get('peft_type')!r} is not supported (only {', '.join(ADAPTER_TYPES)})"
        )
    # peft imports the module named by megatron_core when megatron_config is set: a claimant picks code to run.
    # (auto_mapping is only a note of the base's class: the base is always read by AutoModelForCausalLM.)
    if config.get("megatron_config") is not None:
        raise _refuse(f"{label}: megatron_config makes peft import a module the file names; it is refused")
    base_path = _adapter_base(folder, config)
    if base_path.is_file() or (base_path.is_dir() and _present(base_path, ADAPTER_CONFIG)):
        # one level only: a chain of adapters, or an adapter on a GGUF file, is not what PEFT publishes
        raise _refuse(
            f"{label}: the base model {base_path} must be a safetensors model folder, not another adapter"
        )
    if not base_path.is_dir():
        raise _refuse(f"{label}: base model {base_path}: no such model folder")
    base = folder_files(base_path)
    resolved = dict(base.resolved)
    resolved[f"{ADAPTER_DIR}/{ADAPTER_CONFIG}"] = real_config
    resolved[f"{ADAPTER_DIR}/{ADAPTER_WEIGHTS}"] = _regular_inside(
        folder, ADAPTER_WEIGHTS, roots, "the adapter weights"
    )
    adapter = (f"{ADAPTER_DIR}/{ADAPTER_CONFIG}", f"{ADAPTER_DIR}/{ADAPTER_WEIGHTS}")
    return ModelFiles(folder, base.weights, base.config, base.tokenizer, resolved, adapter=adapter)


def gguf_files(file: Path) -> ModelFiles:
    """A single ``.gguf`` file: weights, config and tokenizer all come from it."""
    if file.suffix != ".gguf":
        raise _refuse(f"{file}: only .gguf files or safetensors folders can be loaded")
    # The user named this file, so wherever a symlink to it leads is what they chose; it must still be a file.
    real = _regular_inside(file.parent, file.name, (Path(os.path.realpath(file)).parent,), "the GGUF file")
    return ModelFiles(file, (file.name,), (), (), {file.name: real}, gguf=file.name)


def model_files(path: Path) -> ModelFiles:
    """The files a load of ``path`` (a folder or a ``.gguf`` file) reads, checked (R2)."""
    if path.is_file():
        return gguf_files(path)
    if not path.exists():
        raise _refuse(f"{path}: no such model folder")
    if _present(path, ADAPTER_CONFIG) and not has_weights(path):
        return adapter_files(path)
    return folder_files(path)


@contextlib.contextmanager
def staged(files: ModelFiles) -> Iterator[Path]:
    """A private folder holding symlinks to exactly ``files``, removed afterwards: the only folder a load sees."""
    where = Path(tempfile.mkdtemp(prefix="remnant-load-"))
    try:
        for name, real in files.resolved.items():
            link = where / name
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(real, link)
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


__all__ = [
    "ADAPTER_CONFIG",
    "ADAPTER_DIR",
    "ADAPTER_WEIGHTS",
    "INDEX_NAME",
    "PICKLE_SUFFIXES",
    "TOKENIZER_FILES",
    "ModelFiles",
    "adapter_files",
    "folder_files",
    "gguf_files",
    "model_files",
    "staged",
]
