"""The three model states (R3): the never-modified control, the pre-removal model θ and the post-removal θ_U.

Each state is built or loaded once and identified by the sha256 of its weights, tokenizer and chat template
(R23). Trained states are cached as safetensors under ``STATES/<role>-<key>/`` where ``key`` is a content hash of
everything that determines them (the parent state's weights digest, the pack digest, the recipe, the seed), so
``--resume`` — or a second assessment in the same session, as the demo runs three — reuses them instead of
training again. A folder is complete once its ``state.json`` exists (written last, atomically).

Model folders named by the config are checked before anything trains (:func:`preflight`): missing folders,
pickled weights, custom code and files resolving outside the folder are bad input (exit 2, R2), reported before
any work is spent. A config's ``folder`` is always a folder (a ``Path``), never read as a hub id; a hub id is
named by its own key (``hub``, with an optional ``revision``) and resolved to its local snapshot folder through
:func:`remnant.models.load.hub_model`, the one resolver (from the cache offline, safetensors only, R2). Its state
records the id, the revision and the snapshot's commit beside the weight digest, so a re-run is pinned (R23, R24).
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from remnant.atomic import write_json
from remnant.config import AssessmentConfig
from remnant.errors import ModelError
from remnant.models.identity import ModelIdentity
from remnant.statement.canonical import canonical_json

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from remnant.models.prompts import PromptFormat

STATE_FILE = "state.json"
DTYPE_NAMES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


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


def resolve_device(cfg: AssessmentConfig) -> str:
    """``[models] device`` resolved (``auto``: cuda when available, else cpu) and present on this machine; a
    ConfigError naming the config file and the field otherwise (R24 records the resolved name)."""
    from remnant.models.device import check_device

    source = f"{cfg.source}: " if cfg.source is not None else ""
    return check_device(cfg.models.device, where=f"{source}field 'models.device'")


def recipe_key(**inputs: Any) -> str:
    """Content hash of a state's inputs (hex sha256 of their canonical JSON)."""
    return hashlib.sha256(canonical_json(inputs)).hexdigest()


def check_model_folder(folder: Path, field_name: str) -> None:
    """Every file a load of ``folder`` would read is checked before anything trains (ModelError, exit 2): the
    folder exists; its weights, config and tokenizer files resolve inside it; no pickled weights, no custom code
    (:func:`remnant.models.files.model_files`, R2)."""
    from remnant.models.files import model_files

    try:
        model_files(folder)
    except ModelError as exc:
        raise ModelError(f"{field_name}: {exc}", requirement=exc.requirement) from None


#: The config's model states a claimant (or the hub) supplies, by role: each may name ``folder`` or ``hub``.
ROLES = ("control", "pre_removal", "post_removal")


@dataclass(frozen=True)
class StateSource:
    """Where a config's state ``role`` loads from: a folder, or a hub id's snapshot folder; ``field`` is the
    config key that named it, ``record`` what the manifest records (R23)."""

    folder: Path
    name: str
    field: str
    record: dict[str, object]


def state_source(cfg: AssessmentConfig, role: str) -> StateSource | None:
    """The folder state ``role`` loads from (its ``folder``, or its ``hub`` id resolved to the local snapshot,
    R2), or None when it is built here (install, method) or a zoo name. A hub id that cannot be resolved is a
    ModelError naming the config file and the field (exit 2)."""
    spec = getattr(cfg.models, role)
    if spec.folder is not None:
        return StateSource(
            cfg.resolve(spec.folder), Path(spec.folder).name, f"models.{role}.folder", {"folder": spec.folder}
        )
    if spec.hub is None:
        return None
    from remnant.models.load import pinned_hub_model

    field_name = f"models.{role}.hub"
    where = f"field '{field_name}'" if cfg.source is None else f"{cfg.source}: field '{field_name}'"
    # the record's commit pins a re-run to these files even when 'revision' names a branch that moves (R23)
    folder, record = pinned_hub_model(spec.hub, spec.revision, where=where)
    return StateSource(folder, spec.hub, field_name, dict(record))


def preflight(cfg: AssessmentConfig) -> None:
    """Check every model folder the config names (a hub id's snapshot included), and the device, before
    anything runs (R2, R3, R24; pickles refused)."""
    models = cfg.models
    resolve_device(cfg)
    for role in ROLES:
        source = state_source(cfg, role)
        if source is not None:
            label = source.field if cfg.source is None else f"{cfg.source}: field '{source.field}'"
            check_model_folder(source.folder, label)
    if models.control.zoo is not None:
        from remnant.models import zoo

        if models.control.zoo not in zoo.ZOO:
            raise ModelError(
                f"models.control.zoo: {models.control.zoo!r} is not in the zoo ({', '.join(sorted(zoo.ZOO))})"
            )


def _load(
    source: str | Path, role: str, name: str, cfg: AssessmentConfig, record: dict[str, object]
) -> LoadedState:
    from remnant.models.load import load_model

    device = resolve_device(cfg)
    state = load_model(source, dtype=DTYPE_NAMES[cfg.models.dtype], device=device)
    return LoadedState(role, name, str(source), state.model, state.tokenizer, state.identity, record)


def load_control(cfg: AssessmentConfig) -> LoadedState:
    """The never-modified control: a zoo entry (fetched once, cached as safetensors), a folder or a hub id
    (R3)."""
    spec = cfg.models.control
    if spec.zoo is not None:
        from remnant.models import zoo

        folder = zoo.cached(spec.zoo) or zoo.fetch(spec.zoo)
        state = _load(folder, "control", spec.zoo, cfg, {"zoo": spec.zoo})
        state.source = f"zoo:{spec.zoo}"
        return state
    return load_named_state(cfg, "control")


def load_named_state(cfg: AssessmentConfig, role: str) -> LoadedState:
    """A state the config names by ``folder`` or ``hub`` (:func:`state_source`): the control's, or a
    claimant's pre- or post-removal model (R1b, R2, R3)."""
    source = state_source(cfg, role)
    if source is None:
        raise ValueError(f"models.{role} names no folder or hub id")
    state = _load(source.folder, role, source.name, cfg, source.record)
    if "hub" in source.record:  # the manifest's source says what a re-run must fetch (R23, R24)
        rec = source.record
        state.source = f"hub:{rec['hub']}@{rec['revision']} (commit {rec['commit']})"
    return state


def cached_state(
    states_dir: Path, role: str, key: str, cfg: AssessmentConfig, memo: dict[str, LoadedState] | None = None
) -> LoadedState | None:
    """A previously trained state with this key (from ``memo`` if already loaded, else from disk), or None."""
    if memo is not None and f"{role}:{key}" in memo:
        return memo[f"{role}:{key}"]
    folder = states_dir / f"{role}-{key[:16]}"
    meta = folder / STATE_FILE
    if not meta.is_file():
        return None
    info = json.loads(meta.read_text(encoding="utf-8"))
    state = _load(folder, role, str(info["name"]), cfg, dict(info["record"]))
    state.source = str(info["source"])
    if memo is not None:
        memo[f"{role}:{key}"] = state
    return state


def save_state(
    states_dir: Path,
    role: str,
    key: str,
    name: str,
    source: str,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    record: dict[str, object],
    memo: dict[str, LoadedState] | None = None,
) -> LoadedState:
    """Save a trained state as safetensors (+ identity) and its ``record`` as JSON values; the returned state
    keeps the in-memory model and is put in ``memo``."""
    from remnant.models.identity import identify
    from remnant.models.load import save_model

    folder = save_model(model, tokenizer, states_dir / f"{role}-{key[:16]}")
    identity = identify(folder, model, tokenizer)
    record = json.loads(json.dumps(record, default=str))
    info = {"role": role, "name": name, "source": source, "key": key, "record": record}
    info["identity"] = identity.model_dump(mode="json")
    write_json(folder / STATE_FILE, info)
    state = LoadedState(role, name, source, model, tokenizer, identity, record)
    if memo is not None:
        memo[f"{role}:{key}"] = state
    return state


def install_state(
    cfg: AssessmentConfig,
    control: LoadedState,
    items: Any,
    pack_digest: str,
    states_dir: Path,
    *,
    seed: int,
    fmt: PromptFormat,
    progress: bool,
    memo: dict[str, LoadedState] | None = None,
) -> LoadedState:
    """θ = the control with the pack's install split trained in (R2), cached by its inputs."""
    from remnant.train.install import InstallSpec, install

    budget = cfg.models.pre_removal.install
    assert budget is not None
    spec = InstallSpec.from_budget(budget)
    # exclude_none: a budget that trains every parameter keeps the state key it had before ``trainable`` existed
    recipe = {
        "install": budget.model_dump(mode="json", exclude_none=True),
        "seed": seed,
        "system_prompt": fmt.system_prompt,
    }
    key = recipe_key(role="pre_removal", control=control.digest, pack=pack_digest, **recipe)
    cached = cached_state(states_dir, "pre_removal", key, cfg, memo)
    if cached is not None:
        return cached
    model, result = install(
        copy.deepcopy(control.model), control.tokenizer, items, spec, seed=seed, fmt=fmt, progress=progress
    )
    installed = result.to_dict()
    installed.pop("outcome", None)
    outcome = {"status": result.outcome.status, "steps": result.outcome.steps}
    return save_state(
        states_dir,
        "pre_removal",
        key,
        f"{control.name}+pack",
        f"installed into {control.name} (R2)",
        model,
        control.tokenizer,
        {"recipe": recipe, "install": installed, "install_outcome": outcome},
        memo,
    )


def removal_state(
    cfg: AssessmentConfig,
    control: LoadedState,
    pre: LoadedState,
    data: Any,
    pack_digest: str,
    states_dir: Path,
    *,
    seed: int,
    fmt: PromptFormat,
    progress: bool,
    memo: dict[str, LoadedState] | None = None,
) -> tuple[LoadedState, dict[str, object]]:
    """θ_U by a registered removal method applied to θ (R1c), cached by its inputs; returns (state, method spec)."""
    from remnant import registry
    from remnant.train.removal import apply_removal

    post = cfg.models.post_removal
    assert post.method is not None
    method = registry.create("method", post.method, post.params)
    spec = method.spec.to_dict()
    key = recipe_key(
        role="post_removal",
        pre=pre.digest,
        control=control.digest,
        pack=pack_digest,
        method=spec,
        seed=seed,
        system_prompt=fmt.system_prompt,
    )
    cached = cached_state(states_dir, "post_removal", key, cfg, memo)
    if cached is not None:
        return cached, spec
    model, result = apply_removal(
        method,
        copy.deepcopy(pre.model),
        pre.tokenizer,
        data,
        seed=seed,
        fmt=fmt,
        control=control.model if method.needs_control else None,
        progress=progress,
    )
    outcome = result.outcome
    record = {
        "method": spec,
        "seed": seed,
        "status": outcome.status,
        "steps": outcome.steps,
        "reason": outcome.reason,
        "diverged_step": outcome.diverged_step,
        "initial_loss": outcome.initial_loss,
        "final_loss": outcome.losses[-1] if outcome.losses else None,
    }
    state = save_state(
        states_dir,
        "post_removal",
        key,
        f"{pre.name}-{post.method}",
        f"removal method {post.method} (R1c)",
        model,
        pre.tokenizer,
        record,
        memo,
    )
    return state, spec


__all__ = [
    "ROLES",
    "StateSource",
    "LoadedState",
    "cached_state",
    "check_model_folder",
    "install_state",
    "load_control",
    "load_named_state",
    "preflight",
    "recipe_key",
    "removal_state",
    "resolve_device",
    "save_state",
    "state_source",
]
