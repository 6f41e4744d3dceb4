"""Everything the driver settles before a task runs: the spec, base model, pack, pool, cells and disk (R14).

:func:`prepare` reads and checks the spec, finds the base model (a folder, a zoo name: fetched only when
``fetch``, or a hub id: its local snapshot, downloaded where the network allows), mints or loads the pack,
resolves the pool and every cell key, and, for a run, writes the sweep folder's fixed inputs — ``spec.toml`` (the
spec as given), ``pack/`` (the pack every task loads and checks), ``data/tofu/`` (the metrics' view of it) and
``plan.json`` (the resolved pool and its cells). :func:`check_disk` checks the disk the missing checkpoints need
against the declared budget and the free space, before anything trains. A sweep folder belongs to one spec:
rerunning it with a different spec is refused (R14), so a folder's records always answer to the spec beside them.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from remnant.errors import ConfigError
from remnant.results import SPEC_COPY
from remnant.runlock import FolderLock, held
from remnant.statement.canonical import canonical_sha256
from remnant.states.remote import is_uri
from remnant.states.store import CheckpointStore, default_root
from remnant.sweep.cells import PlannedCell, perturbations, plan_cells, reference_states
from remnant.sweep.pool import Pool, existing_pool, generated_pool
from remnant.sweep.spec import SPEC_RULE, ExistingSpec, GeneratedSpec, load_spec, local_path

if TYPE_CHECKING:
    from remnant.engine.measurement import Measurement
    from remnant.packs.schema import Pack
    from remnant.sweep.suite import SuiteData

PLAN_FILE = "plan.json"
PACK_DIR = "pack"
TOFU_DIR = Path("data") / "tofu"
DIGESTS_FILE = "file-digests.json"


@dataclass
class Prepared:
    """A resolved sweep (module docstring)."""

    spec: GeneratedSpec | ExistingSpec
    spec_path: Path
    pool: Pool
    pack: Pack
    cells: list[PlannedCell]
    store: CheckpointStore
    base_path: Path | None
    run_id: str
    #: The suite's inputs and its measurements without models (what the cell keys hash, remnant.sweep.suite).
    data: SuiteData
    measurements: list[tuple[str, Measurement]]

    def plan_dict(self) -> dict[str, Any]:
        plan = {
            "run_id": self.run_id,
            "spec": self.spec.model_dump(mode="json"),
            "pool": self.pool.to_dict(),
            "perturbations": perturbations(self.spec),
            "cells": [c.__dict__ for c in self.cells],
            "pack_digest": self.pack.digest,
            "store": self.store.uri,
            "base_path": None if self.base_path is None else str(self.base_path),
        }
        if isinstance(self.spec, GeneratedSpec) and self.spec.base.hub is not None and self.base_path:
            from remnant.hub import snapshot_commit

            # a hub base is pinned by its snapshot's commit beside the base digest in every job key (R23, R24)
            plan["base_hub"] = {
                "hub": self.spec.base.hub,
                "revision": self.spec.base.revision or "main",
                "commit": snapshot_commit(self.base_path),
            }
        return plan


def file_tag(path: Path) -> str:
    """What a cached file hash is kept under: the path, and the metadata any change of the file's content moves.
    Size and modification time alone can be restored after rewriting the file in place (``touch -d``,
    ``os.utime``), and the old hash — so the old identity and its recorded results — would stand (R23); the
    inode (a file replaced) and the status-change time (set by the kernel on every write or utime, and by nothing
    a user can call) cannot be put back."""
    stat = path.stat()
    return f"{path}|{stat.st_dev}|{stat.st_ino}|{stat.st_size}|{stat.st_mtime_ns}|{stat.st_ctime_ns}"


def folder_digest(folder: Path, cache: dict[str, str]) -> str:
    """sha256 over the files a load of ``folder`` reads (weights, config, tokenizer), each by name and sha256;
    ``cache`` keeps each file's hash by :func:`file_tag` (a pool of GB checkpoints is hashed once)."""
    from remnant.models.files import model_files
    from remnant.models.identity import sha256_file

    files = model_files(folder)
    out: dict[str, str] = {}
    for name in files.names:
        path = files.resolved[name]
        tag = file_tag(path)
        if tag not in cache:
            cache[tag] = sha256_file(path)
        out[name] = cache[tag]
    return canonical_sha256(out)


def _cached_digests(store: CheckpointStore) -> dict[str, str]:
    from remnant.jsonio import loads_strict

    path = store.root / DIGESTS_FILE
    if not path.is_file():
        return {}
    data = loads_strict(path.read_bytes(), source=str(path), requirement="R23")
    if not isinstance(data, dict):
        return {}
    # only entries of the current tag form with a sha256 value: anything else is hashed again, never trusted
    return {
        k: v
        for k, v in data.items()
        if k.count("|") >= 5
        and isinstance(v, str)
        and len(v) == 64
        and all(c in "0123456789abcdef" for c in v)
    }


def _base_path(spec: GeneratedSpec, source: Path, fetch: bool) -> Path | None:
    from remnant.models import zoo

    if spec.base.hub is not None:  # the one resolver (R2): the snapshot's folder, pinned by the base digest
        from remnant.models.load import pinned_hub_model

        return pinned_hub_model(spec.base.hub, spec.base.revision, where=f"{source}: field 'base.hub'")[0]
    assert spec.base.model is not None  # BaseSpec: exactly one of model and hub
    path = local_path(spec.base.model, source.resolve().parent)
    if path.is_dir():
        return path
    if spec.base.model in zoo.ZOO:
        cached = zoo.cached(spec.base.model)
        return cached if cached is not None or not fetch else zoo.fetch(spec.base.model)
    raise ConfigError(
        f"{source}: field 'base.model' {spec.base.model!r} is no model folder ({path}) and no zoo name "
        f"({', '.join(sorted(zoo.ZOO))})",
        requirement="R2",
    )


def _pack(spec: GeneratedSpec | ExistingSpec, root: Path) -> Pack:
    from remnant.packs import load_pack
    from remnant.packs.classd import ClassDSpec, mint_class_d

    if spec.pack.mint is not None:
        return mint_class_d(ClassDSpec(**spec.pack.mint))
    return load_pack(local_path(spec.pack.path or "", root))


def _store(spec: GeneratedSpec | ExistingSpec, root: Path, source: Path) -> CheckpointStore:
    if spec.resources.store is None:
        return CheckpointStore(default_root())
    if is_uri(spec.resources.store):  # object storage (remnant.states.remote)
        try:
            return CheckpointStore(spec.resources.store)
        except ConfigError as exc:
            raise ConfigError(f"{source}: field 'resources.store': {exc}") from None
    return CheckpointStore(local_path(spec.resources.store, root))


def _pool(
    spec: GeneratedSpec | ExistingSpec,
    root: Path,
    store: CheckpointStore,
    base: Path | None,
    pack: Pack,
    *,
    save: bool,
    source: Path,
) -> Pool:
    """The resolved pool; ``save`` keeps the file hashes for the next run (a plan writes nothing); ``source``
    (the spec file) is named when a pool model's hub id cannot load."""
    cache = _cached_digests(store)
    if isinstance(spec, ExistingSpec):
        pool = existing_pool(
            spec, root=root, folder_digest=lambda f: folder_digest(f, cache), source=str(source)
        )
    else:
        from remnant.models.files import has_weights

        # a plan prices a base folder holding only config.json; a run needs (and digests) its weights (R2)
        if base is not None and (save or has_weights(base)):
            base_digest = folder_digest(base, cache)
        else:
            base_digest = f"unfetched:{spec.base.model}"
        pool = generated_pool(spec, base_digest=base_digest, pack_digest=pack.digest)
    if cache and save:
        from remnant.atomic import write_atomic

        write_atomic(store.root / DIGESTS_FILE, json.dumps(cache, sort_keys=True, indent=0))
    return pool


def prepare(
    spec_path: str | Path, *, out: Path | None = None, fetch: bool = False, lock: FolderLock | None = None
) -> Prepared:
    """Resolve the sweep of ``spec_path`` (module docstring); with ``out``, write its fixed inputs there, holding
    the sweep folder's lock (R23, :mod:`remnant.runlock`): the caller's ``lock`` when it holds it already (the
    command holds one lock from this call to the end of :func:`remnant.sweep.driver.run_sweep`), else one taken
    for this call, so a second process never rewrites the inputs of a sweep another one is running."""
    path = Path(spec_path)
    spec = load_spec(path)
    if out is None:
        return _prepare(spec, path, None, fetch)
    _check_folder(out, path, spec)  # before the lock: a folder that is refused is neither locked nor made
    with held(out, lock, purpose="remnant sweep run"):
        return _prepare(spec, path, out, fetch)


def check_out(spec_path: str | Path, out: Path) -> None:
    """What :func:`prepare` checks before writing into ``out``, for a caller to check before taking its lock:
    the spec reads, and ``out`` is a new folder or a sweep folder of this spec (R14)."""
    path = Path(spec_path)
    _check_folder(out, path, load_spec(path))


def _prepare(spec: GeneratedSpec | ExistingSpec, path: Path, out: Path | None, fetch: bool) -> Prepared:
    from remnant.sweep.suite import suite_data, suite_measurements, write_tofu_view

    root = path.resolve().parent
    store = _store(spec, root, path)
    base = _base_path(spec, path, fetch) if isinstance(spec, GeneratedSpec) else None
    pack = _pack(spec, root)
    pool = _pool(spec, root, store, base, pack, save=out is not None, source=path)
    dtype = spec.base.dtype if isinstance(spec, GeneratedSpec) else "fp32"
    with tempfile.TemporaryDirectory() as tmp:
        tofu = (out / TOFU_DIR) if out is not None else Path(tmp) / "tofu"
        write_tofu_view(pack, spec.pack.attributes, tofu)
        data = suite_data(pack, spec.pack.attributes, spec.pack.system_prompt, tofu, spec.suite.max_items)
    refs = reference_states(pool) if spec.suite.audits else {}
    try:
        measurements = suite_measurements(spec.suite, data, refs, dtype)
    except ConfigError as exc:  # the pack cannot feed the suite: say which spec asked for it
        hint = (
            " (mint with truth_ratio_options = true for the truth-ratio splits)"
            if "_perturbed" in str(exc)
            else ""
        )
        raise ConfigError(f"{path}: field 'suite': {exc}{hint}", requirement=exc.requirement) from None
    cells = plan_cells(spec, pool, measurements, pack.digest)
    prepared = Prepared(spec, path, pool, pack, cells, store, base, f"sweep:{spec.name}", data, measurements)
    if out is not None:
        _write_inputs(prepared, out)
    return prepared


def _check_folder(out: Path, spec_path: Path, spec: GeneratedSpec | ExistingSpec) -> None:
    """``out`` is a sweep folder of this spec, or a new one (module docstring), and none of the sweep's inputs
    (remnant.cli_paths: the one output guard)."""
    from remnant.cli_paths import out_folder

    out_folder(out, requirement=SPEC_RULE, kind="sweep", inputs=_input_paths(spec, spec_path))
    copy = out / SPEC_COPY
    if copy.is_file() and copy.read_bytes() != spec_path.read_bytes():
        raise ConfigError(
            f"{copy}: this sweep folder was run with another spec; a folder's records answer to one spec "
            "(use a new --out, or move the folder aside)",
            requirement=SPEC_RULE,
        )


def _input_paths(spec: GeneratedSpec | ExistingSpec, spec_path: Path) -> dict[str, Path | None]:
    """The folders and files a sweep reads, by what a refusal calls them (a zoo name is no path: skipped)."""
    root = spec_path.resolve().parent

    def local(given: str | None) -> Path | None:
        return None if given is None else local_path(given, root)

    found: dict[str, Path | None] = {
        "the spec": spec_path,
        "the pack": local(spec.pack.path),
        "the checkpoint store": local(spec.resources.store),
    }
    if isinstance(spec, GeneratedSpec):
        found["the base model folder"] = local(spec.base.model)
    else:
        found |= {f"pool model {m.path}": local(m.path) for m in spec.models if m.path is not None}
    return found


def _write_inputs(prepared: Prepared, out: Path) -> None:
    from remnant.atomic import write_atomic
    from remnant.packs.schema import write_pack

    out.mkdir(parents=True, exist_ok=True)
    if not (out / SPEC_COPY).is_file():
        write_atomic(out / SPEC_COPY, prepared.spec_path.read_bytes())
    if not (out / PACK_DIR / "pack.json").is_file():
        write_pack(prepared.pack, out / PACK_DIR)
    plan = json.dumps(prepared.plan_dict(), indent=1, sort_keys=True, allow_nan=False) + "\n"
    write_atomic(out / PLAN_FILE, plan)


def check_disk(prepared: Prepared, needed: int) -> None:
    """Refuse a run whose new checkpoints exceed the declared budget or the free disk (before any training)."""
    budget = prepared.spec.resources.disk_budget_gb
    gb = needed / 1e9
    if budget is not None and gb > budget:
        raise ConfigError(
            f"the missing checkpoints need about {gb:.2f} GB, over the declared disk_budget_gb = {budget}",
            requirement=SPEC_RULE,
        )
    root = prepared.store.root
    probe = next((p for p in (root, *root.parents) if p.exists()), Path("/"))
    free = shutil.disk_usage(probe).free
    if needed > free:
        raise ConfigError(
            f"the missing checkpoints need about {gb:.2f} GB; {free / 1e9:.2f} GB is free under {probe}",
            requirement=SPEC_RULE,
        )


__all__ = [
    "PACK_DIR",
    "PLAN_FILE",
    "TOFU_DIR",
    "Prepared",
    "check_disk",
    "check_out",
    "file_tag",
    "folder_digest",
    "prepare",
]
