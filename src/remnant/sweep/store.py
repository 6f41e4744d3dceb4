"""The content-addressed checkpoint store: every checkpoint a sweep builds, reused by every spec that declares it.

Layout (``STORE`` is ``[resources] store``, else ``$REMNANT_HOME/checkpoints``)::

    STORE/ckpt/<key>/meta.json            what the checkpoint is: job, position, format, parent, weights digest,
                                          status (ok or diverged) and what building it measured
    STORE/ckpt/<key>/delta.safetensors    format "delta": the tensors that differ from the parent checkpoint
    STORE/ckpt/<key>/adapter.safetensors  format "lora": the LoRA adapter (A and B matrices), merged on load
    STORE/locks/<key>.lock                one builder at a time per checkpoint (processes and Ray workers)

``<key>`` is :func:`remnant.sweep.pool.checkpoint_key`: the digest of every input that produces the weights. A
removal that trains part of the model stores only what it changed, a LoRA removal only its adapter, so a pool of
tens of removals of one install costs tens of adapters or deltas, not tens of models; installs are stored as
deltas from the base model. A checkpoint folder is written whole through :func:`remnant.atomic.replace_dir` or
not at all; the weights digest in ``meta.json`` is checked when a checkpoint is loaded, so a store edited by hand
cannot pass for the checkpoint its key names (R23). A build that raised stores nothing (a rerun builds it
again); a diverged one stores its meta and no weights (a recorded outcome, Annex B.6). Pure: no torch.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from remnant.atomic import write_atomic
from remnant.errors import ConfigError, RecordError

META = "meta.json"
DELTA = "delta.safetensors"
ADAPTER = "adapter.safetensors"
#: Bytes per parameter of the stored dtype (checkpoints are stored in the dtype they were trained in).
DTYPE_BYTES = {"fp32": 4, "bf16": 2}


def default_root() -> Path:
    """``$REMNANT_HOME/checkpoints`` (``~/.cache/remnant/checkpoints`` without it)."""
    import os

    home = os.environ.get("REMNANT_HOME")
    return (Path(home) if home else Path.home() / ".cache" / "remnant") / "checkpoints"


class CheckpointStore:
    """The store under ``root`` (module docstring)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def folder(self, key: str) -> Path:
        if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
            raise ConfigError(f"{key!r} is not a checkpoint key (64 hex digits)", requirement="R23")
        return self.root / "ckpt" / key

    def has(self, key: str) -> bool:
        """Whether the checkpoint (or its diverged outcome) is stored."""
        return (self.folder(key) / META).is_file()

    def meta(self, key: str) -> dict[str, Any]:
        """The stored meta of ``key`` (strict JSON); RecordError naming the file when it is unreadable."""
        from remnant.jsonio import loads_strict

        path = self.folder(key) / META
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise RecordError(
                f"{path}: cannot read the checkpoint's meta: {exc}", requirement="R23"
            ) from None
        meta = loads_strict(data, source=str(path), error=RecordError, requirement="R23")
        if not isinstance(meta, dict) or meta.get("key") != key:
            raise RecordError(f"{path}: is not the meta of checkpoint {key}", requirement="R23")
        return meta

    @contextlib.contextmanager
    def lock(self, key: str) -> Iterator[None]:
        """Hold the build lock of ``key`` (blocking): two workers never build one checkpoint twice at once."""
        path = self.root / "locks" / f"{key}.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def write_meta_only(self, key: str, meta: dict[str, Any]) -> None:
        """Store an outcome without weights (a diverged build)."""
        from remnant.atomic import replace_dir

        def build(tmp: Path) -> None:
            write_atomic(tmp / META, dump_meta(meta))

        replace_dir(self.folder(key), build)

    def bytes_used(self, key: str) -> int:
        folder = self.folder(key)
        return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) if folder.is_dir() else 0


def dump_meta(meta: dict[str, Any]) -> str:
    return json.dumps(meta, indent=1, sort_keys=True, allow_nan=False) + "\n"


def safetensors_header(path: Path) -> dict[str, Any]:
    """The JSON header of a .safetensors file: tensor name -> dtype, shape, offsets (no tensor is read)."""
    from remnant.jsonio import loads_strict

    with path.open("rb") as handle:
        raw = handle.read(8)
        if len(raw) != 8:
            raise ConfigError(f"{path}: not a safetensors file", requirement="R2")
        (size,) = struct.unpack("<Q", raw)
        if size > 100 * 2**20:
            raise ConfigError(f"{path}: safetensors header of {size} bytes", requirement="R2")
        header = loads_strict(handle.read(size), source=str(path), requirement="R2")
    if not isinstance(header, dict):
        raise ConfigError(f"{path}: safetensors header is not an object", requirement="R2")
    return {k: v for k, v in header.items() if k != "__metadata__"}


def parameter_shapes(folder: Path) -> dict[str, tuple[int, ...]]:
    """Parameter name -> shape of a safetensors model folder (from the headers only: no tensor is read)."""
    from remnant.models.files import model_files

    files = model_files(folder)
    out: dict[str, tuple[int, ...]] = {}
    for name in files.weights:
        if name.endswith(".safetensors"):
            for tensor, info in safetensors_header(files.resolved[name]).items():
                out[tensor] = tuple(int(d) for d in info.get("shape", []))
    return out


__all__ = [
    "ADAPTER",
    "DELTA",
    "DTYPE_BYTES",
    "META",
    "CheckpointStore",
    "default_root",
    "dump_meta",
    "parameter_shapes",
    "safetensors_header",
]
