"""Identity of a model state: content hashes that go into manifests and statements (R2, R21)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
)
WEIGHT_SUFFIXES = (".safetensors", ".gguf")


class ModelIdentity(BaseModel):
    """Content identity of one model state."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    weights: dict[str, str] = Field(description="sha256 of each weights file, by file name")
    tokenizer: dict[str, str] = Field(description="sha256 of each tokenizer file, by file name")
    chat_template: str | None = Field(
        description="sha256 of the chat template text, or None when there is none"
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


def sha256_text(text: str) -> str:
    """sha256 of UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _digest(fields: dict[str, Any]) -> str:
    import json

    return sha256_text(json.dumps(fields, sort_keys=True, separators=(",", ":")))


def weights_digest_of(model: Any) -> str:
    """sha256 over the in-memory state dict (names, dtypes, shapes, bytes) for states never written to disk."""
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(-1).view(__import__("torch").uint8).numpy().tobytes())
    return h.hexdigest()


def identify(folder: Path | str, model: Any, tokenizer: Any = None) -> ModelIdentity:
    """Build the identity of a model loaded from ``folder`` (a directory or a single .gguf file)."""
    from remnant.models.dtype import dtype_name

    folder = Path(folder)
    if folder.is_file():
        weight_files = [folder]
        tok_dir = folder.parent
    else:
        weight_files = sorted(p for p in folder.iterdir() if p.suffix in WEIGHT_SUFFIXES)
        tok_dir = folder
    weights = {p.name: sha256_file(p) for p in weight_files}
    tok = {n: sha256_file(tok_dir / n) for n in TOKENIZER_FILES if (tok_dir / n).is_file()}
    template = getattr(tokenizer, "chat_template", None) if tokenizer is not None else None
    param = next(model.parameters())
    fields: dict[str, Any] = {
        "weights": weights,
        "tokenizer": tok,
        "chat_template": sha256_text(template) if isinstance(template, str) else None,
        "architecture": type(model).__name__,
        "parameter_count": sum(p.numel() for p in model.parameters()),
        "dtype": dtype_name(param.dtype),
        "device": str(param.device),
    }
    return ModelIdentity(**fields, digest=_digest(fields))
