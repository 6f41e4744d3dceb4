"""Identity of a model state: content hashes of exactly the files it was loaded from (R2, R21, R23).

The files are those :mod:`remnant.models.files` chose and checked, the only ones a load can read, so a file the
load does not read is not hashed and one it reads is never left out. A PEFT adapter's identity is its base's files
plus the adapter's two (named ``adapter/...``)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from remnant.models.files import ModelFiles, model_files
from remnant.statement.canonical import canonical_sha256, sha256_text


class ModelIdentity(BaseModel):
    """Content identity of one model state."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    weights: dict[str, str] = Field(
        description="sha256 of each weights file read (the shard index and every shard it names), by file name"
    )
    tokenizer: dict[str, str] = Field(description="sha256 of each tokenizer file read, by file name")
    chat_template: str | None = Field(
        description="sha256 of the chat template text, or None when there is none"
    )
    config: dict[str, str] = Field(
        default_factory=dict,
        description="sha256 of config.json and generation_config.json as read, by file name (empty: GGUF)",
    )
    architecture: str = Field(description="model class name, e.g. LlamaForCausalLM")
    parameter_count: int = Field(description="number of parameters")
    dtype: str = Field(description="dtype of the loaded parameters")
    device: str = Field(description="device the state was loaded on")
    digest: str = Field(description="sha256 over every field above")


def sha256_file(path: Path) -> str:
    """sha256 of a file, streamed."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def weights_digest_of(model: Any) -> str:
    """sha256 over the in-memory state dict (names, dtypes, shapes, bytes) for states never written to disk."""
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(-1).view(__import__("torch").uint8).numpy().tobytes())
    return h.hexdigest()


def _template_digest(tokenizer: Any) -> str | None:
    """sha256 of the chat template text; several named templates are hashed as their sorted JSON."""
    import json

    template = getattr(tokenizer, "chat_template", None) if tokenizer is not None else None
    if isinstance(template, str):
        return sha256_text(template)
    if isinstance(template, dict) and template:
        return sha256_text(json.dumps(template, sort_keys=True, separators=(",", ":")))
    return None


def _identity(model: Any, tokenizer: Any, *hashes: dict[str, str]) -> ModelIdentity:
    """The identity of ``model`` whose weights, tokenizer and config files hash to ``hashes`` (in that order)."""
    from remnant.models.dtype import DTYPE_NAMES

    param = next(model.parameters())
    fields: dict[str, Any] = {
        **dict(zip(("weights", "tokenizer", "config"), hashes, strict=True)),
        "chat_template": _template_digest(tokenizer),
        "architecture": type(model).__name__,
        "parameter_count": sum(p.numel() for p in model.parameters()),
        # outside the policy, torch's own name (``torch.float64``), as identities have always recorded it
        "dtype": DTYPE_NAMES.get(str(param.dtype).removeprefix("torch."), str(param.dtype)),
        "device": str(param.device),
    }
    return ModelIdentity(**fields, digest=canonical_sha256(fields))


def identify_files(files: ModelFiles, model: Any, tokenizer: Any = None) -> ModelIdentity:
    """The identity of ``model`` loaded from exactly ``files`` (each hashed where it resolves)."""

    def hashes(names: tuple[str, ...]) -> dict[str, str]:
        return {name: sha256_file(files.resolved[name]) for name in names}

    adapter_weights = tuple(n for n in files.adapter if n.endswith(".safetensors"))
    adapter_config = tuple(n for n in files.adapter if n not in adapter_weights)
    weights, config = files.weights + adapter_weights, files.config + adapter_config
    return _identity(model, tokenizer, hashes(weights), hashes(files.tokenizer), hashes(config))


def identify(folder: Path | str, model: Any, tokenizer: Any = None) -> ModelIdentity:
    """The identity of a model loaded from ``folder`` (a directory or a single .gguf file), as a load reads it."""
    return identify_files(model_files(Path(folder)), model, tokenizer)


def identify_in_memory(model: Any, tokenizer: Any = None) -> ModelIdentity:
    """The identity of a state that was never read from files (a notebook's model): its weights' bytes stand for
    the weights files (``weights_digest_of``, under the name ``in-memory``); no tokenizer or config files (R23)."""
    return _identity(model, tokenizer, {"in-memory": weights_digest_of(model)}, {}, {})
