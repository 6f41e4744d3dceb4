"""What a task needs to build or measure one model, and how it gets it in any process (a Ray worker included).

The driver hands each task a :class:`Workspace`: plain values (the spec, the resolved pool, the bytes of the
sweep folder's pack and TOFU view, where the base model and the store are) that pickle to any worker. A task never
reads the driver's sweep folder: a cluster node has no such path (docs/sweep.md, "Running on a cluster"); the
store, a folder or an ``s3://``/``gs://`` URI, is the one place tasks share. :meth:`Workspace.open` turns it into
a :class:`WorkerContext` in that process: the inputs written once per node under ``$REMNANT_HOME/sweep-inputs``,
the spec re-validated, the pack loaded and its digest checked (R2). The only thing kept between a worker's tasks
is the model states it loaded (:mod:`remnant.states.cache`): the base and the audit references are read once per
worker process, not once per task.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from remnant.states.store import CheckpointMeta
from remnant.sweep.pool import Pool, PoolModel
from remnant.sweep.spec import ExistingSpec, GeneratedSpec

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Mapping

    from transformers import PreTrainedTokenizerBase

    from remnant.models.load import ModelState
    from remnant.models.prompts import PromptFormat
    from remnant.packs.schema import Pack
    from remnant.states.store import CheckpointStore
    from remnant.sweep.pins import Pin

#: What a load through the worker's cache returns.
T = TypeVar("T")


@dataclass(frozen=True)
class Workspace:
    """Everything a task needs, as values that pickle (module docstring)."""

    spec: dict[str, Any]
    pool: dict[str, Any]
    #: The sweep folder's files a task reads (the pack and the metrics' TOFU view), by path relative to the
    #: folder (:func:`sweep_inputs`): they travel with the task, not through the driver's disk.
    inputs: dict[str, bytes]
    store: str
    out: str
    run_id: str
    base_path: str | None = None
    device: str = "cpu"
    threads: int = 1
    #: Test seam only (remnant.sweep.measure.inject_fault); None in every real run.
    fault: str | None = None
    #: Checkpoint key -> its pin: the stored checkpoints a task may use (R23).
    pins: dict[str, Pin] = field(default_factory=dict)
    #: This run's token (32 hex digits; empty outside a run): a checkpoint whose meta names it was built by this
    #: run, whose driver pins it from the build result.
    token: str = ""

    @classmethod
    def of_plan(cls, plan: Mapping[str, Any], out: Path, **run: Any) -> Workspace:
        """The workspace of the sweep in ``out`` planned as ``plan`` (``plan.json``'s values); ``run``: what a run
        adds (``fault``, ``pins``, ``token``)."""
        return cls(
            spec=plan["spec"],
            pool=plan["pool"],
            inputs=sweep_inputs(out),  # tasks get the pack and TOFU view as bytes: no node reads this folder
            store=str(plan["store"]),
            out=str(out),  # a name in messages and checkpoint metas, never opened by a task
            run_id=str(plan["run_id"]),
            base_path=plan.get("base_path"),
            **run,
        )

    def open(self) -> WorkerContext:
        from remnant.packs import load_pack
        from remnant.states.store import CheckpointStore
        from remnant.sweep.prepare import PACK_DIR
        from remnant.sweep.spec import _SPEC

        root = self.local_inputs()
        return WorkerContext(
            ws=self,
            spec=_SPEC.validate_python(self.spec),
            pool=Pool.from_dict(self.pool),
            pack=load_pack(root / PACK_DIR),  # its digest checked again on this node (R2)
            store=CheckpointStore(self.store),
            root=root,
        )

    def local_inputs(self) -> Path:
        """A folder on this node holding :attr:`inputs`: ``$REMNANT_HOME/sweep-inputs/<their digest>``, written
        once (into a temp folder, then renamed) and reused only while every file still holds their bytes."""
        import hashlib
        import os
        import shutil
        import tempfile

        from remnant.models.zoo import remnant_home

        digest = hashlib.sha256()
        for name in sorted(self.inputs):
            digest.update(f"{name}\0{len(self.inputs[name])}\0".encode())
            digest.update(self.inputs[name])
        root = remnant_home() / "sweep-inputs" / digest.hexdigest()
        if root.is_dir():
            if all((root / n).is_file() and (root / n).read_bytes() == b for n, b in self.inputs.items()):
                return root
            shutil.rmtree(root, ignore_errors=True)  # torn by a crash before its files reached the disk
        root.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{root.name[:12]}.", dir=root.parent))
        for name, data in self.inputs.items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp / name).write_bytes(data)
        try:
            os.rename(tmp, root)
        except OSError:  # another task on this node renamed its equal copy first
            shutil.rmtree(tmp, ignore_errors=True)
        return root


def sweep_inputs(out: Path) -> dict[str, bytes]:
    """The files of the sweep folder ``out`` a task reads (its pack and TOFU view), by relative path."""
    from remnant.sweep.prepare import PACK_DIR, TOFU_DIR

    files: dict[str, bytes] = {}
    for folder in (Path(PACK_DIR), TOFU_DIR):
        for path in sorted((out / folder).rglob("*")):
            if path.is_file():
                files[path.relative_to(out).as_posix()] = path.read_bytes()
    return files


@dataclass
class WorkerContext:
    """The opened workspace of one task."""

    ws: Workspace
    spec: GeneratedSpec | ExistingSpec
    pool: Pool
    pack: Pack
    store: CheckpointStore
    #: This node's copy of the workspace's inputs (:meth:`Workspace.local_inputs`).
    root: Path
    _tokenizer: PreTrainedTokenizerBase | None = field(default=None, repr=False)

    @property
    def attributes(self) -> list[str] | None:
        return self.spec.pack.attributes

    @property
    def dtype(self) -> str:
        return self.spec.base.dtype if isinstance(self.spec, GeneratedSpec) else "fp32"

    def apply_threads(self) -> None:
        """Use the task's declared CPU threads (a Ray task gets ``cpus_per_task``)."""
        import torch

        if self.ws.threads > 0:
            torch.set_num_threads(self.ws.threads)

    def kept(self, key: Hashable, make: Callable[[], T]) -> T:
        """``make()``'s value, made once per key in this worker for this run (what audits reuse between the pool's
        models: UDS stage 1 against the pool's references)."""
        return self._cached(("kept", key), make)

    def _cached(self, key: tuple[Hashable, ...], load: Callable[[], T]) -> T:
        """``load()`` through this worker's model cache (remnant.states.cache), scoped to this run and store."""
        from remnant.states.cache import worker_cache

        scope = (self.ws.run_id, self.ws.token, self.ws.store)
        return worker_cache().get(scope, (*key, self.dtype, self.ws.device), load)

    def _folder(self, kind: str, path: Path) -> ModelState:
        """The model folder ``path`` (the base, or a pool's own folder), loaded once per worker process; the
        task's tokenizer is the first folder's."""
        from remnant.models import load_model

        state: ModelState = self._cached(
            (kind, str(path)), lambda: load_model(path, dtype=self.dtype, device=self.ws.device)
        )
        if self._tokenizer is None:  # a copy: the cached state is shared, and a tokenizer has settable state
            self._tokenizer = copy.deepcopy(state.tokenizer)
        return state

    def _base_state(self) -> ModelState:
        if self.ws.base_path is None:
            raise ValueError("this pool has no base model")
        return self._folder("base", Path(self.ws.base_path))

    def load_base(self) -> Any:
        """The base model, a copy of its own (builds train it, a chain applies its deltas to it), on the task's
        device; the base is read from disk once per worker process."""
        return copy.deepcopy(self._base_state().model)

    def tokenizer(self) -> PreTrainedTokenizerBase:
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            source = self.ws.base_path or next(m.path for m in self.pool.models if m.path is not None)
            self._tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=False)
        return self._tokenizer

    def fmt(self) -> PromptFormat:
        """The prompt format every state is trained and scored in (R3): the tokenizer's chat template if any."""
        from remnant.models.prompts import PromptFormat

        return PromptFormat.for_tokenizer(self.tokenizer(), system_prompt=self.spec.pack.system_prompt)

    def load_model(self, model: PoolModel) -> Any:
        """The weights of ``model`` (a folder of an existing pool, or a stored checkpoint's chain checked against
        its pin), loaded once per worker process and shared: read them only (copy them to change them)."""
        if model.path is not None:
            return self._folder("folder", Path(model.path)).model
        if model.pool == "base":
            return self._base_state().model
        from remnant.sweep.weights import load_chain

        key = model.state
        return self._cached(
            ("state", key),
            lambda: load_chain(self.store, key, self.load_base, expected=self.expected_digest(key)),
        )

    def trusted_meta(self, key: str) -> CheckpointMeta | None:
        """The stored meta of checkpoint ``key`` when this task may use it (remnant.sweep.pins): the workspace
        pins it (and the meta agrees with the pin, else IntegrityError) or this run built it; None when it is
        not stored, or stored but pinned by nothing this sweep trusts (it is then built again)."""
        from remnant.sweep.pins import check_against

        if not self.store.has(key):
            return None
        meta: CheckpointMeta = self.store.meta(key)
        if key in self.ws.pins:
            pin = self.ws.pins[key]
            check_against(meta, pin, self.store.where(key), f"the records of the sweep in {self.ws.out}")
            return meta
        built_here = meta.built_by is not None and bool(self.ws.token) and meta.built_by.run == self.ws.token
        return meta if built_here else None

    def expected_digest(self, key: str) -> str | None:
        """The weights digest checkpoint ``key`` must load to (its pin); IntegrityError when nothing this sweep
        trusts pins it (R23). None for a diverged checkpoint (which has no weights to load)."""
        from remnant.errors import IntegrityError

        meta = self.trusted_meta(key)
        if meta is None:
            raise IntegrityError(
                f"{self.store.where(key)}: checkpoint {key[:12]}… is pinned by no record of the sweep in "
                f"{self.ws.out}, so its weights are not trusted (the store is never the authority; "
                "`remnant sweep run` builds and pins it)",
                requirement="R23",
            )
        return meta.weights_digest


__all__ = ["WorkerContext", "Workspace", "sweep_inputs"]
