"""The content-addressed checkpoint store: every state a plan builds, reused by every plan that declares it.

``STORE`` is a local folder or an object-storage URI (``s3://bucket/prefix``, ``gs://bucket/prefix``:
:mod:`remnant.states.remote` seals each checkpoint and decides who builds it without ``flock``); a sweep's is
``[resources] store``, else ``$REMNANT_HOME/checkpoints``. Layout::

    STORE/ckpt/<key>/meta.json            what the checkpoint is (:class:`CheckpointMeta`)
    STORE/ckpt/<key>/delta.safetensors    format "delta": the tensors that differ from the parent checkpoint
    STORE/ckpt/<key>/adapter.safetensors  format "lora": the LoRA adapter (A and B matrices), merged on load
    STORE/ckpt/<key>/state/               format "full": a whole state the states builder saved, a model folder
    STORE/ckpt/<key>/seal.json            object storage only: each file's sha256, written last
    STORE/locks/<key>.lock                one builder at a time per checkpoint (flock; object storage: a lease)

``<key>`` is the digest of the state's :class:`remnant.states.recipe.Recipe`. A removal stores only what it
changed, a LoRA removal only its adapter, and installs are deltas from the base model, so tens of removals of one
install cost tens of adapters, not tens of models. A checkpoint folder is written whole or not at all; a build that
raised stores nothing (a rerun builds it again), a diverged one its meta alone (a recorded outcome, Annex B.6).
Pure: no torch.

The store is a cache, never the authority on what a checkpoint holds (R23): whoever can write it can rewrite a
delta and recompute the digest in ``meta.json``. What a checkpoint must hold is *pinned* in the records of the
sweep that built it (:mod:`remnant.sweep.pins`), and every read checks the loaded weights against a pin, so a
store edited by hand cannot pass for the checkpoint its key names; a whole state's identity is that of its files.
A store on object storage is read through a local cache folder (``$REMNANT_HOME/store-cache/<digest of the
URI>``), every file checked against the seal.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import struct
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, model_validator

from remnant.atomic import write_atomic
from remnant.errors import ConfigError, RecordError
from remnant.models.identity import ModelIdentity
from remnant.runlock import open_lock_file
from remnant.states.remote import LeaseTiming, RemoteStore, is_uri

META = "meta.json"
DELTA = "delta.safetensors"
ADAPTER = "adapter.safetensors"
#: The model folder of a whole saved state (format "full").
FULL = "state"
#: Bytes per parameter of the stored dtype (checkpoints are stored in the dtype they were trained in).
DTYPE_BYTES = {"fp32": 4, "bf16": 2}
#: A checkpoint key or weights digest: sha256 in hex.
HEX64 = r"^[0-9a-f]{64}$"
#: The requirement a stored checkpoint answers to: what was built is what is read (R23).
STORE_RULE = "R23"


class LoraMeta(BaseModel):
    """The LoRA configuration a stored adapter is merged with (the same as the build's, or the weights differ)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rank: StrictInt = Field(gt=0, le=65536, description="LoRA rank: a whole number (R23).")
    alpha: float = Field(gt=0, allow_inf_nan=False, description="LoRA alpha (R23).")
    targets: str | list[str] = Field(description="Adapted modules: 'all-linear' or their names (R23).")
    seed: StrictInt = Field(ge=0, description="Seed the adapter was initialised with (R23).")


class BuiltBy(BaseModel):
    """Where a checkpoint's pin is recorded: the records of the sweep that built it, and that run's token."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    records: str = Field(min_length=1, description="records.jsonl of the sweep whose build event pins it.")
    run: str = Field(pattern=r"^[0-9a-f]{32}$", description="Token of the run that built it.")


class SavedAs(BaseModel):
    """What a whole saved state was built as: the role it was built for, the manifest's source line for it and the
    identity of the files saved (R23)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: str = Field(min_length=1, description="The role it was built for.")
    source: str = Field(description="How it was made, as the manifest shows it.")
    identity: ModelIdentity = Field(description="The identity of the files saved (R23).")


class CheckpointMeta(BaseModel):
    """``meta.json`` of a stored checkpoint (module docstring): what it is, never proof of what it holds (R23)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str = Field(pattern=HEX64, description="The checkpoint's key (its folder name).")
    job: str = Field(min_length=1, description="Key of the job that built it.")
    checkpoint: str = Field(min_length=1, description="Position in the job: 'final' or 'epoch=X'.")
    parent: str | None = Field(
        pattern=HEX64, description="Key of the parent checkpoint; None: the base model."
    )
    model: str = Field(min_length=1, description="Pool model id (a whole state: its name) it was built as.")
    status: Literal["ok", "diverged"] = Field(description="ok (weights stored) or diverged (Annex B.6).")
    reason: str | None = Field(default=None, description="Why the build diverged.")
    weights_digest: str | None = Field(
        default=None, pattern=HEX64, description="Digest of the weights the build measured (ok only)."
    )
    format: Literal["delta", "lora", "full"] | None = Field(
        default=None,
        description="delta.safetensors, adapter.safetensors or a whole state in state/ (ok only).",
    )
    lora: LoraMeta | None = Field(default=None, description="The adapter's LoRA configuration (format lora).")
    state: SavedAs | None = Field(default=None, description="What a whole state was built as (format full).")
    build: dict[str, Any] | None = Field(default=None, description="What building the state measured.")
    built_by: BuiltBy | None = Field(default=None, description="The sweep records that pin it.")

    @model_validator(mode="after")
    def _consistent(self) -> CheckpointMeta:
        if self.status == "ok" and (self.weights_digest is None or self.format is None):
            raise ValueError("a checkpoint with status ok names its weights_digest and format")
        if self.status == "diverged" and self.format is not None:
            raise ValueError("a diverged checkpoint stores no weights, so it has no format")
        if (self.format == "lora") != (self.lora is not None):
            raise ValueError("the lora table is given exactly when format is 'lora'")
        if (self.format == "full") != (self.state is not None):
            raise ValueError("the state table is given exactly when format is 'full'")
        return self


def parse_meta(raw: object, source: str) -> CheckpointMeta:
    """``raw`` (parsed JSON) as a :class:`CheckpointMeta`; RecordError naming ``source`` and the field (R23)."""
    from remnant.packs.schema import describe_validation

    try:
        return CheckpointMeta.model_validate(raw)
    except ValidationError as exc:
        raise RecordError(
            f"{source}: not a checkpoint meta: {describe_validation(exc)}", requirement=STORE_RULE
        ) from None


def default_root() -> Path:
    """``$REMNANT_HOME/checkpoints`` (``~/.cache/remnant/checkpoints`` without it)."""
    home = os.environ.get("REMNANT_HOME")
    return (Path(home) if home else Path.home() / ".cache" / "remnant") / "checkpoints"


def cache_root(uri: str) -> Path:
    """The local cache folder of the object-storage store ``uri``: beside the default store, by the URI's digest."""
    from remnant.statement.canonical import canonical_sha256

    return default_root().parent / "store-cache" / canonical_sha256(uri.rstrip("/"))[:16]


class CheckpointStore:
    """The store at ``root``, a local folder or an object-storage URI (module docstring). ``root`` is always a
    local folder: the store itself, or the cache a remote store's checkpoints are read through; ``uri`` is what
    names the store to another process (a task's workspace)."""

    def __init__(
        self, root: str | Path, *, cache: Path | None = None, timing: LeaseTiming | None = None
    ) -> None:
        self.uri = str(root)
        self.remote = RemoteStore(self.uri, timing) if is_uri(self.uri) else None
        self.root = Path(root) if self.remote is None else (cache or cache_root(self.uri))

    def folder(self, key: str) -> Path:
        """The local folder of ``key``: the checkpoint itself, or its cached copy (object storage)."""
        if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
            raise ConfigError(f"{key!r} is not a checkpoint key (64 hex digits)", requirement="R23")
        return self.root / "ckpt" / key

    def where(self, key: str) -> str:
        """The checkpoint's name in messages: its folder, or its URI on object storage."""
        folder = self.folder(key)
        return str(folder) if self.remote is None else self.remote.name(key)

    def has(self, key: str) -> bool:
        """Whether the checkpoint (or its diverged outcome) is stored (on object storage: sealed)."""
        folder = self.folder(key)
        return (folder / META).is_file() if self.remote is None else self.remote.has(key)

    def meta(self, key: str) -> CheckpointMeta:
        """The stored meta of ``key`` (strict JSON, :class:`CheckpointMeta`); RecordError naming the file and the
        field when it is unreadable or malformed. What it says is checked against a pin before use (R23)."""
        from remnant.jsonio import loads_strict

        path = f"{self.where(key)}/{META}"
        try:
            data = (
                (self.folder(key) / META).read_bytes() if self.remote is None else self.remote.meta_bytes(key)
            )
        except OSError as exc:
            raise RecordError(
                f"{path}: cannot read the checkpoint's meta: {exc.strerror or exc}", requirement=STORE_RULE
            ) from None
        meta = parse_meta(loads_strict(data, source=path, error=RecordError, requirement=STORE_RULE), path)
        if meta.key != key:
            raise RecordError(
                f"{path}: field 'key' is {meta.key[:12]}…: not the meta of checkpoint {key}",
                requirement=STORE_RULE,
            )
        return meta

    @contextlib.contextmanager
    def lock(self, key: str) -> Iterator[None]:
        """Hold the build lock of ``key`` (blocking): two workers never build one checkpoint twice at once
        (``flock`` on a local folder, a lease on object storage)."""
        if self.remote is not None:
            with self.remote.lease(self.folder(key).name):
                yield
            return
        path = self.root / "locks" / f"{key}.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_lock_file(path)  # never follows a link out of the store (R23)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def put(self, key: str, build: Callable[[Path], Mapping[str, object]]) -> None:
        """Store checkpoint ``key`` as the files ``build(tmp)`` writes and the meta it returns, whole or not at all
        (a diverged build writes no files)."""
        from remnant.atomic import replace_dir

        def whole(tmp: Path) -> None:
            write_atomic(tmp / META, dump_meta(build(tmp)))

        replace_dir(self.folder(key), whole)
        if self.remote is not None:  # built in the cache, which then holds what was uploaded
            self.remote.put(key, self.folder(key))

    def local(self, key: str) -> Path:
        """The folder to read ``key``'s files from: the checkpoint itself, or (object storage) its cached copy,
        downloaded when missing or not the sealed bytes, never through a link (R23)."""
        folder = self.folder(key)
        if self.remote is None:
            return folder
        from remnant.atomic import replace_dir
        from remnant.errors import IntegrityError
        from remnant.states.remote import verify_folder

        if folder.is_dir() and not folder.is_symlink():
            with contextlib.suppress(IntegrityError):
                verify_folder(folder, self.remote.seal(key), self.where(key))
                return folder
        remote = self.remote

        def download(tmp: Path) -> None:
            remote.download(key, tmp)

        replace_dir(folder, download)
        return folder


def open_store(location: str, *, option: str, inputs: Mapping[str, str | Path]) -> CheckpointStore:
    """The store ``location`` names on a command line: an object-storage URI, or a folder checked before anything
    runs (absent, empty or remnant's own states folder; none of the command's ``inputs``) and marked as remnant's,
    so a later run may add to it (R23)."""
    if is_uri(location):
        return CheckpointStore(location)
    from remnant.cli_paths import mark_output, out_folder

    folder = out_folder(location, requirement=STORE_RULE, kind="states", option=option, inputs=dict(inputs))
    folder.mkdir(parents=True, exist_ok=True)
    mark_output(folder, "states")
    return CheckpointStore(folder)


def dump_meta(meta: Mapping[str, object]) -> str:
    """``meta`` as stored JSON, validated as the reader will read it (a writer cannot store what is refused)."""
    text = json.dumps(meta, indent=1, sort_keys=True, allow_nan=False) + "\n"
    parse_meta(json.loads(text), "the checkpoint meta being written")
    return text


def safetensors_header(path: Path) -> dict[str, Any]:
    """The JSON header of a .safetensors file: tensor name -> dtype, shape, offsets (no tensor is read)."""
    from remnant.jsonio import loads_strict

    with path.open("rb") as handle:
        raw = handle.read(8)
        if len(raw) != 8:
            raise ConfigError(f"{path}: not a safetensors file", requirement="R2")
        (size,) = struct.unpack("<Q", raw)
        if size > 100 * 2**20:
            raise ConfigError(f"{path}: not a safetensors file (a header of {size} bytes)", requirement="R2")
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
    "FULL",
    "META",
    "STORE_RULE",
    "BuiltBy",
    "CheckpointMeta",
    "CheckpointStore",
    "LoraMeta",
    "SavedAs",
    "cache_root",
    "default_root",
    "dump_meta",
    "open_store",
    "parameter_shapes",
    "parse_meta",
    "safetensors_header",
]
