"""A spec resolved into its pool: every model with its labels, the build job that makes it, and its state digest.

A *job* makes checkpoints: the base model (nothing to train), one install (a P-pool strength or an N-pool
retain-only install), one removal run (its final weights and any declared intermediate checkpoints), or an
existing folder. A *model* is one checkpoint of one job, with the labels of the results table (pool, method,
strength, seed, hyper-parameters, parent). A generated model's checkpoint key and *state digest* (what the
engine's cell keys hash) are its recipe's (:mod:`remnant.states.recipe`), known before it is built and shared by
every spec that declares it; an existing folder's state digest is the digest of its files. Pure: no torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from remnant.errors import ConfigError
from remnant.states.recipe import BUILD_VERSION, Recipe, Step
from remnant.sweep.spec import SPEC_RULE, ExistingSpec, GeneratedSpec, MethodGrid, Strength, local_path


@dataclass(frozen=True)
class Job:
    """One build: ``kind`` base, install, removal or folder; ``recipe`` is everything it trains with (JSON);
    ``parent`` the id of the pool model it starts from (None: the base model, or nothing to build)."""

    key: str
    kind: str
    parent: str | None
    recipe: dict[str, Any]
    models: tuple[str, ...]


@dataclass(frozen=True)
class PoolModel:
    """One model of the pool: the results table's labels, its job, checkpoint position and state digest."""

    id: str
    pool: str
    method: str | None
    strength: str | None
    seed: int | None
    hyperparameters: dict[str, object]
    parent: str | None
    job: str
    checkpoint: str
    state: str
    path: str | None = None

    def labels(self) -> dict[str, object]:
        """The label columns of the results table (hyper-parameters as canonical JSON)."""
        from remnant.statement.canonical import canonical_text

        return {
            "model": self.id,
            "pool": self.pool,
            "method": self.method,
            "strength": self.strength,
            "seed": self.seed,
            "hyperparameters": canonical_text(self.hyperparameters),
            "parent": self.parent,
        }


@dataclass(frozen=True)
class Pool:
    """The resolved pool: models in build-and-measure order (references first), jobs by key, the references."""

    name: str
    models: tuple[PoolModel, ...]
    jobs: dict[str, Job]
    references: dict[str, str] = field(default_factory=dict)

    def model(self, model_id: str) -> PoolModel:
        return next(m for m in self.models if m.id == model_id)

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "models": [asdict(m) for m in self.models],
            "jobs": {k: asdict(j) for k, j in self.jobs.items()},
            "references": dict(self.references),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Pool:
        models = tuple(PoolModel(**m) for m in data["models"])
        jobs = {k: Job(**{**j, "models": tuple(j["models"])}) for k, j in data["jobs"].items()}
        return cls(data["name"], models, jobs, dict(data["references"]))


def number_label(value: object) -> str:
    """A parameter value as it appears in model ids and strength labels: 2e-05 → 2e-5, 0.5 → 0.5."""
    if isinstance(value, float):
        text = f"{value:.6g}"
        return text.replace("e-0", "e-").replace("e+0", "e+")
    return str(value).lower().replace(" ", "")


def strength_label(point: Mapping[str, object]) -> str:
    """``lr=2e-5,epochs=2`` (sorted keys), or ``default`` for the method's defaults."""
    return ",".join(f"{k}={number_label(point[k])}" for k in sorted(point)) or "default"


def _safe(text: str) -> str:
    """``text`` in lower case, each run of characters a model id may not hold (a spec ``Label``) one ``-``."""
    import re

    return re.sub(r"[^a-z0-9_.=-]+", "-", text.lower())


def _id_part(point: Mapping[str, object]) -> str:
    return _safe("-".join(f"{k}{number_label(point[k])}" for k in sorted(point)) or "default")


@dataclass
class _Builder:
    spec: GeneratedSpec
    base_digest: str
    pack_digest: str
    models: list[PoolModel] = field(default_factory=list)
    jobs: dict[str, Job] = field(default_factory=dict)

    def common(self) -> dict[str, object]:
        pack = self.spec.pack
        return {
            "base": self.base_digest,
            "pack": self.pack_digest,
            "attributes": pack.attributes,
            "system_prompt": pack.system_prompt,
            "dtype": self.spec.base.dtype,
            "build": BUILD_VERSION,
        }

    def add(
        self,
        kind: Step,
        parent: tuple[str, str] | None,
        recipe: dict[str, object],
        entries: list[dict[str, Any]],
    ) -> str:
        """Add a job (``parent``: the id and state digest of the model it starts from) and its models."""
        job = Recipe(self.common(), kind, recipe, parent=parent and parent[1])
        key = job.job
        ids = tuple(e["id"] for e in entries)
        self.jobs[key] = Job(key=key, kind=kind, parent=parent and parent[0], recipe=recipe, models=ids)
        for e in entries:
            point = e.pop("checkpoint", "final")
            self.models.append(PoolModel(job=key, checkpoint=point, state=job.at(point).digest, **e))
        return key


def _installs(b: _Builder) -> None:
    """P-pool then N-pool installs: one job and one model per recipe variant and seed (an N-pool install
    trains the retained people only: share 0)."""
    spec = b.spec
    pools = (
        ("target", "target", spec.target.strengths, spec.target.seeds),
        ("never_saw", "never", spec.never_saw.variants, spec.never_saw.seeds),
    )
    for pool, prefix, variants, seeds in pools:
        for variant in variants:
            share = variant.share if isinstance(variant, Strength) else 0.0
            for seed in seeds:
                recipe = {**variant.recipe(spec.install).model_dump(), "share": share, "seed": seed}
                model_id = f"{prefix}-{variant.label}-s{seed}"
                params = {k: v for k, v in recipe.items() if k != "seed"}
                labels = {"pool": pool, "method": None, "strength": variant.label, "seed": seed}
                entry = {"id": model_id, **labels, "hyperparameters": params, "parent": "base"}
                b.add("install", None, recipe, [entry])


def _removals(b: _Builder, grid: MethodGrid, parent_id: str, parent_state: str) -> None:
    """One job per (hyper-parameter point, seed): its final weights and each declared checkpoint are models."""
    from remnant import registry
    from remnant.sweep.checks import method_points

    removal = b.spec.removal
    label = grid.label or grid.name
    for point in method_points(grid):
        bound = registry.bind("method", grid.name, {**removal.common, **grid.params, **point}).to_dict()
        for seed in removal.seeds:
            base_id = f"{label}-{_id_part(point)}-s{seed}"
            marks = [f"epoch={number_label(float(e))}" for e in sorted(set(removal.checkpoints))]
            entry = {
                "pool": "unlearned",
                "method": grid.name,
                "strength": strength_label(point),
                "seed": seed,
                "hyperparameters": bound["params"],
                "parent": parent_id,
            }
            entries = [{**entry, "id": f"{base_id}-ep{m.split('=')[1]}", "checkpoint": m} for m in marks]
            entries.append({**entry, "id": base_id})
            recipe = {"method": bound, "seed": seed, "checkpoints": marks}
            b.add("removal", (parent_id, parent_state), recipe, entries)


def generated_pool(spec: GeneratedSpec, *, base_digest: str, pack_digest: str) -> Pool:
    """The pool of a generated spec (module docstring); ids must come out unique."""
    b = _Builder(spec, base_digest, pack_digest)
    if spec.include_base:
        labels = {"pool": "base", "method": None, "strength": None, "seed": None}
        b.add("base", None, {}, [{"id": "base", **labels, "hyperparameters": {}, "parent": None}])
    _installs(b)
    refs: dict[str, str] = {}
    if spec.removal.methods or spec.suite.audits:
        label = spec.removal.parent or next(s.label for s in spec.target.strengths if s.share == 1.0)
        parent_id = f"target-{label}-s{spec.target.seeds[0]}"
        refs = {"full": parent_id, "retain": next(m.id for m in b.models if m.pool == "never_saw")}
        parent_state = next(m.state for m in b.models if m.id == parent_id)
        for grid in spec.removal.methods:
            _removals(b, grid, parent_id, parent_state)
    return _ordered(spec.name, b.models, b.jobs, refs)


def _ordered(name: str, models: list[PoolModel], jobs: dict[str, Job], refs: dict[str, str]) -> Pool:
    """References first (every audit needs them), then the pool in declaration order; ids must be unique."""
    from remnant.sweep.spec import MAX_MODELS

    seen: set[str] = set()
    for m in models:
        if m.id in seen:
            raise ConfigError(
                f"pool {name}: two models are named {m.id!r}; ids must differ", requirement=SPEC_RULE
            )
        seen.add(m.id)
    if len(models) > MAX_MODELS:
        raise ConfigError(f"pool {name}: {len(models)} models, more than {MAX_MODELS}", requirement=SPEC_RULE)
    first = [m for m in models if m.id in refs.values()]
    return Pool(name, tuple(first + [m for m in models if m.id not in refs.values()]), jobs, refs)


def _folders(entry: Any, root: Path, where: str) -> list[tuple[Path, dict[str, object]]]:
    """The folders ``entry`` names, each with what pins it beyond its digest: a hub id's snapshot folder in the
    local cache (safetensors only, R2) with its id, revision and commit (R23, R24); nothing for a folder."""
    if entry.hub is not None:
        from remnant.models.load import pinned_hub_model

        folder, pin = pinned_hub_model(entry.hub, entry.revision, where=where)
        return [(folder, dict(pin))]
    if entry.path is not None:
        return [(local_path(entry.path, root), {})]
    found = sorted(p for p in root.glob(entry.glob) if p.is_dir())
    if not found:
        raise ConfigError(f"models glob {entry.glob!r} matches no folder under {root}", requirement="R2")
    return [(folder, {}) for folder in found]


def existing_pool(
    spec: ExistingSpec, *, root: Path, folder_digest: Callable[[Path], str], source: str = "spec"
) -> Pool:
    """The pool of an existing spec: one job and one model per folder (a hub id's is its cache snapshot);
    ``folder_digest(path)`` gives the state; ``source`` (the spec file) is named when a hub id cannot load."""
    models: list[PoolModel] = []
    pins: dict[str, dict[str, object]] = {}
    for index, entry in enumerate(spec.models):
        for folder, pin in _folders(entry, root, f"{source}: field 'models[{index}].hub'"):
            if not folder.is_dir():
                raise ConfigError(f"{folder}: no such model folder", requirement="R2")
            state = folder_digest(folder)
            if pin or state not in pins:  # one job per state: a folder of the same files keeps the hub's pin
                pins[state] = pin
            named = Path(entry.hub.split("/")[-1]) if entry.hub is not None else folder
            model_id = entry.id or _safe(named.name).strip("-") or "model"
            labels = entry.model_dump(
                include={"pool", "method", "strength", "seed", "hyperparameters", "parent"}
            )
            models.append(
                PoolModel(
                    id=model_id,
                    job=state,
                    checkpoint="final",
                    state=f"folder:{state}",
                    path=str(folder),
                    **labels,
                )
            )
    jobs = {
        m.job: Job(
            m.job,
            "folder",
            None,
            {"path": m.path, **pins[m.job]},
            tuple(n.id for n in models if n.job == m.job),
        )
        for m in models
    }
    ids = {m.id for m in models}
    for role, ref in spec.references.items():
        if ref not in ids:
            raise ConfigError(f"references.{role} = {ref!r} names no model of the pool", requirement="C-H7")
    if spec.suite.audits and set(spec.references) != {"full", "retain"}:
        raise ConfigError(
            "audits compare with references.full and references.retain: name both", requirement="C-H7"
        )
    return _ordered(spec.name, models, jobs, {str(k): v for k, v in spec.references.items()})


__all__ = [
    "Job",
    "Pool",
    "PoolModel",
    "existing_pool",
    "generated_pool",
    "number_label",
    "strength_label",
]
