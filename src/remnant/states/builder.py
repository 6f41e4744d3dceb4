"""The one builder of the model states a plan trains (R2, R3, R23, C-H3, C-H7b, C-H7c, Annex B).

Every trained state starts from a never-modified *origin* (:class:`Origin`: a loaded control, the pack, the
prompt format; every step trains a deep copy) and is made by one step of the training package: an install of a
set of the pack's items (the install split, the retained items only for the retain-only model, or the
content-shuffled twin's, C-H3b), or a registered removal method applied to an installed state or to the origin
itself (the procedure control, C-H3a). A state's identity before it is built is its
:class:`~remnant.states.recipe.Recipe` digest. A builder builds each recipe once and hands the same
:class:`LoadedState` to every later request, so an assessment's audit states, a study's methods sharing one
install and the demo's three assessments in one session train nothing twice.

With a ``store`` (an assessment's ``states/``, a study's ``--states``) a state is also kept whole in the
content-addressed store (:mod:`remnant.states.store`): ``ckpt/<digest>/state/`` and its ``meta.json`` (format
``full``), whole or not at all. ``--resume`` or a second run loads it instead of training again, two processes
asking for one recipe build it once (the store's lock), and its identity is that of the files it loads from
(R23). Without one a state lives in memory and its identity is its weights' digest. The sweep builds its
checkpoints through the same steps (:func:`train_install`, :func:`train_removal`) into the same store, as deltas
and adapters pinned by its records: this module is the only caller of the training package's install and removal.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from remnant.errors import IntegrityError
from remnant.models.identity import ModelIdentity
from remnant.states.recipe import BUILD_VERSION, Recipe, Step
from remnant.states.store import FULL, META, CheckpointStore, SavedAs

if TYPE_CHECKING:
    from remnant.models.prompts import PromptFormat
    from remnant.packs.schema import Pack
    from remnant.train.install import InstallResult, InstallSpec
    from remnant.train.methods.base import QA, RemovalData, RemovalMethod
    from remnant.train.removal import RemovalResult


@dataclass
class LoadedState:
    """A model state in memory with its identity and how it was obtained (manifest ModelRecord)."""

    role: str
    name: str
    source: str
    model: Any
    tokenizer: Any
    identity: ModelIdentity
    record: dict[str, object] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        return self.identity.digest

    def context(self) -> dict[str, Any]:
        """The run-context entry of this state (manifest models, statement identities)."""
        return {
            "role": self.role,
            "name": self.name,
            "source": self.source,
            "identity": self.identity.model_dump(mode="json"),
            "record": self.record,
        }


#: Loads a saved state's folder: (model, tokenizer, identity) in the run's dtype and on its device.
Loader = Callable[[Path], tuple[Any, Any, ModelIdentity]]


@dataclass(frozen=True)
class Made:
    """What one build step made: the trained model, what building it measured (the manifest's record, R23) and
    the source line the manifest shows."""

    model: Any
    record: dict[str, object]
    source: str


@dataclass(frozen=True)
class Origin:
    """The never-modified state every build starts from, with the pack and the prompt format it trains on."""

    state: LoadedState
    pack: Pack
    fmt: PromptFormat
    attributes: tuple[str, ...] | None = None

    def recipe(self, step: Step, params: dict[str, object], parent: LoadedState | None = None) -> Recipe:
        """The recipe of the state ``step`` (``params``) makes from ``parent`` (None: from the origin)."""
        base: dict[str, object] = {
            "base": self.state.digest,
            "pack": self.pack.digest,
            "prompt": [self.fmt.style, self.fmt.system_prompt],
            "attributes": None if self.attributes is None else sorted(self.attributes),
            "build": BUILD_VERSION,
        }
        return Recipe(base, step, params, parent=None if parent is None else parent.digest)


@dataclass
class StateBuilder:
    """Builds states from ``origin`` (module docstring); ``memo`` (by recipe digest) may be shared by builders of
    one session, ``store`` keeps them between runs (``load`` reads a saved one's model folder back)."""

    origin: Origin
    store: CheckpointStore | None = None
    load: Loader | None = None
    progress: bool = False
    memo: MutableMapping[str, LoadedState] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.store is None) != (self.load is None):
            raise ValueError("a states builder keeps states in a store exactly when it can load them back")

    def state(
        self, recipe: Recipe, role: str, name: str, make: Callable[[], Made], *, keep: bool = True
    ) -> LoadedState:
        """The state of ``recipe``: kept in memory, kept in the store, or made by ``make()`` (and kept in memory
        unless ``keep`` is False: a state nothing asks for again need not hold memory). With a store, one process
        at a time builds a recipe; another asking meanwhile waits and loads what it stored."""
        key = recipe.digest
        if key in self.memo:
            return self.memo[key]
        if self.store is None:
            state = self._made(role, name, recipe, make())
        else:
            with self.store.lock(key):
                state = self._saved(role, key) or self._made(role, name, recipe, make())
        if keep:
            self.memo[key] = state
        return state

    def _saved(self, role: str, key: str) -> LoadedState | None:
        """The whole state the store keeps under ``key``, or None. Its meta is read strictly, and the files loaded
        must be the ones saved (their hashes, R23): a state edited since is refused, never measured."""
        assert self.store is not None and self.load is not None
        if not self.store.has(key):
            return None
        meta, where = self.store.meta(key), self.store.where(key)
        if meta.format != "full" or meta.state is None:
            raise IntegrityError(
                f"{where}/{META}: field 'format' is {meta.format!r}, not a whole saved state ('full')",
                requirement="R23",
            )
        model, tokenizer, identity = self.load(self.store.local(key) / FULL)
        if _files(identity) != _files(meta.state.identity):
            raise IntegrityError(
                f"{where}: the files loaded are not the state saved there for recipe {key[:16]} (they were "
                "changed after it was saved); delete the folder to build the state again",
                requirement="R23",
            )
        return LoadedState(role, meta.model, meta.state.source, model, tokenizer, identity, meta.build or {})

    def _made(self, role: str, name: str, recipe: Recipe, made: Made) -> LoadedState:
        """What ``make()`` built, with its identity: that of the files it is kept as in the store, whole or not
        at all (R23), or (no store) of its weights in memory."""
        from remnant.models.identity import identify, identify_in_memory

        tokenizer = self.origin.state.tokenizer
        record = json.loads(json.dumps(made.record, default=str))
        if self.store is None:
            identity = identify_in_memory(made.model, tokenizer)
            return LoadedState(role, name, made.source, made.model, tokenizer, identity, record)
        from remnant.models.load import save_model

        saved: list[ModelIdentity] = []

        def write(tmp: Path) -> dict[str, object]:
            folder = save_model(made.model, tokenizer, tmp / FULL, progress=self.progress)
            saved.append(identify(folder, made.model, tokenizer))
            return {
                "key": recipe.digest,
                "job": recipe.job,
                "checkpoint": recipe.checkpoint,
                "parent": recipe.parent,
                "model": name,
                "status": "ok",
                "weights_digest": saved[0].digest,
                "format": "full",
                "state": SavedAs(role=role, source=made.source, identity=saved[0]).model_dump(mode="json"),
                "build": record,
            }

        self.store.put(recipe.digest, write)
        return LoadedState(role, name, made.source, made.model, tokenizer, saved[0], record)

    def install(self, items: Sequence[QA], spec: InstallSpec, *, seed: int) -> tuple[Any, InstallResult]:
        """``items`` installed into a copy of the origin by the install recipe (R2)."""
        origin = self.origin
        return train_install(
            copy.deepcopy(origin.state.model),
            origin.state.tokenizer,
            items,
            spec,
            seed,
            origin.fmt,
            self.progress,
        )

    def twin(self, spec: InstallSpec, *, seed: int) -> Made:
        """The origin with the pack's content-shuffled twin installed (C-H3b): same recipe, shuffled facts."""
        from remnant.packs.splits import shuffled_twin
        from remnant.statement.canonical import derive_seed
        from remnant.train.data import split_qa

        twin = shuffled_twin(self.origin.pack, random.Random(derive_seed(seed, "shuffled-twin")))
        attributes = self.origin.attributes
        items = split_qa(twin, "install", list(attributes) if attributes is not None else None)
        model, result = self.install(items, spec, seed=seed)
        record: dict[str, object] = {
            "twin_pack_id": twin.manifest.id,
            "twin_digest": twin.digest,
            "install": result.to_dict(),
        }
        return Made(model, record, "the content-shuffled twin installed into the control")

    def removal(
        self, method: RemovalMethod, start: LoadedState | None, data: RemovalData, *, seed: int
    ) -> tuple[Any, RemovalResult]:
        """``method`` applied to a copy of ``start`` (None: the never-installed origin, C-H3a)."""
        origin = self.origin.state
        return train_removal(
            method,
            copy.deepcopy((start or origin).model),
            origin.tokenizer,
            data,
            seed=seed,
            fmt=self.origin.fmt,
            control=origin.model if method.needs_control else None,
            progress=self.progress,
        )


def _files(identity: ModelIdentity) -> tuple[dict[str, str], ...]:
    """The hashes of the files a state loads from (weights, tokenizer, config): what saving it fixed. The dtype
    and device it is loaded on may differ (a resumed run on another device)."""
    return identity.weights, identity.tokenizer, identity.config


def train_install(
    model: Any,
    tokenizer: Any,
    items: Sequence[QA],
    spec: InstallSpec,
    seed: int,
    fmt: PromptFormat | None,
    progress: bool = False,
) -> tuple[Any, InstallResult]:
    """Train ``items`` into ``model`` (in place) by the install recipe: the one call of the install (R2)."""
    from remnant.train.install import install

    return install(model, tokenizer, items, spec, seed=seed, fmt=fmt, progress=progress)


def train_removal(
    method: RemovalMethod, model: Any, tokenizer: Any, data: RemovalData, **options: Any
) -> tuple[Any, RemovalResult]:
    """Apply ``method`` to ``model`` (in place): the one call of a removal (R1c); ``options`` are
    :func:`remnant.train.removal.apply_removal`'s."""
    from remnant.train.removal import apply_removal

    return apply_removal(method, model, tokenizer, data, **options)


__all__ = [
    "LoadedState",
    "Loader",
    "Made",
    "Origin",
    "StateBuilder",
    "train_install",
    "train_removal",
]
