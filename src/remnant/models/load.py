"""Load causal LMs safely: safetensors folders and GGUF files only; pickles and remote code refused.

Claimants' files are untrusted, so ``trust_remote_code`` is always False (there is no switch) and pickled
checkpoints are refused with the file named.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from remnant.atomic import replace_dir
from remnant.errors import ModelError
from remnant.models.dtype import resolve_dtype
from remnant.models.identity import ModelIdentity, identify

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".ckpt")


@dataclass(frozen=True)
class ModelState:
    """A loaded model state (eval mode) with its tokenizer and content identity."""

    model: Any
    tokenizer: Any
    identity: ModelIdentity
    source: str


def _check_folder(folder: Path) -> None:
    if any(folder.glob("*.safetensors")):
        return
    pickles = sorted(p for p in folder.iterdir() if p.suffix in PICKLE_SUFFIXES)
    if pickles:
        raise ModelError(
            f"{pickles[0]}: pickled weights are refused (they can run code); convert to safetensors first"
        )
    raise ModelError(f"{folder}: no *.safetensors weights found")


def _resolve_source(source: str | Path) -> Path:
    path = Path(source).expanduser()
    if path.exists():
        return path
    from remnant.models import zoo

    name = str(source)
    if name in zoo.ZOO:
        cached = zoo.cached(name)
        return cached if cached is not None else zoo.fetch(name)
    return _from_hub(name)


def _from_hub(hub_id: str) -> Path:
    if "/" not in hub_id:
        raise ModelError(f"{hub_id!r} is not a folder, a .gguf file, a zoo name or a hub id")
    try:
        from huggingface_hub import snapshot_download

        offline = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")
        return Path(
            snapshot_download(
                hub_id,
                allow_patterns=["*.json", "*.safetensors", "*.jinja", "*.txt", "*.model"],
                local_files_only=offline,
                etag_timeout=5,
            )
        )
    except Exception as exc:  # network or offline: one clear message
        raise ModelError(
            f"cannot reach hub model {hub_id!r} ({type(exc).__name__}); run `remnant models fetch NAME` "
            "or point to a local folder"
        ) from exc


def load_model(source: str | Path, *, dtype: str = "fp32", device: str = "cpu") -> ModelState:
    """Load a folder (safetensors), a .gguf file, a zoo name or a hub id, in eval mode (R2 identity)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch_dtype = resolve_dtype(dtype, device)
    path = _resolve_source(source)
    try:
        if path.is_file():
            if path.suffix != ".gguf":
                raise ModelError(f"{path}: only .gguf files or safetensors folders can be loaded")
            kwargs: dict[str, Any] = {"gguf_file": path.name, "trust_remote_code": False}
            tokenizer = AutoTokenizer.from_pretrained(path.parent, **kwargs)
            model = AutoModelForCausalLM.from_pretrained(path.parent, dtype=torch_dtype, **kwargs)
        else:
            _check_folder(path)
            tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
            model = AutoModelForCausalLM.from_pretrained(
                path, dtype=torch_dtype, use_safetensors=True, trust_remote_code=False
            )
    except ModelError:
        raise
    except Exception as exc:
        raise ModelError(f"{path}: cannot load model: {exc}") from exc
    model.to(device)
    model.eval()
    return ModelState(
        model=model, tokenizer=tokenizer, identity=identify(path, model, tokenizer), source=str(path)
    )


def save_model(model: Any, tokenizer: Any, out_dir: str | Path) -> Path:
    """Write safetensors + tokenizer + config to a temp dir beside ``out_dir``, then rename it in place."""

    def build(tmp: Path) -> None:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)

    return replace_dir(out_dir, build)
