"""The three model states (R3): the never-modified control, the pre-removal model θ and the post-removal θ_U.

Each state is built or loaded once and identified by the sha256 of its weights, tokenizer and chat template
(R23). The trained ones (an install into the control, a removal method's result) come from the one states
builder (:mod:`remnant.states.builder`), kept whole in the content-addressed store ``STATES/ckpt/<digest>/`` by
their recipe's digest, so ``--resume`` — or a second assessment in the same session, as the demo runs three — reuses them
instead of training again.

Model folders named by the config are checked before anything trains (:func:`preflight`): missing folders,
pickled weights, custom code and files resolving outside the folder are bad input (exit 2, R2), reported before
any work is spent. A config's ``folder`` is always a folder (a ``Path``), never read as a hub id; a hub id is
named by its own key (``hub``, with an optional ``revision``) and resolved to its local snapshot folder through
:func:`remnant.models.load.hub_model`, the one resolver (from the cache offline, safetensors only, R2). Its state
records the id, the revision and the snapshot's commit beside the weight digest, so a re-run is pinned (R23, R24).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from remnant.config import AssessmentConfig
from remnant.errors import ModelError
from remnant.models.dtype import DTYPE_NAMES
from remnant.models.identity import ModelIdentity

# ROLES: the config's model states a claimant (or the hub) supplies, by role: each may name ``folder`` or ``hub``
from remnant.standard.vocabulary import ROLES
from remnant.states.builder import LoadedState, Made, Origin, StateBuilder

if TYPE_CHECKING:
    from remnant.models.prompts import PromptFormat
    from remnant.packs.schema import Pack
    from remnant.states.store import CheckpointStore


def resolve_device(cfg: AssessmentConfig) -> str:
    """``[models] device`` resolved (``auto``: cuda when available, else cpu) and present on this machine; a
    ConfigError naming the config file and the field otherwise (R24 records the resolved name)."""
    from remnant.models.device import check_device

    source = f"{cfg.source}: " if cfg.source is not None else ""
    return check_device(cfg.models.device, where=f"{source}field 'models.device'")


def check_model_folder(folder: Path, field_name: str) -> None:
    """Every file a load of ``folder`` would read is checked before anything trains (ModelError, exit 2): the
    folder exists; its weights, config and tokenizer files resolve inside it; no pickled weights, no custom code
    (:func:`remnant.models.files.model_files`, R2)."""
    from remnant.models.files import model_files

    try:
        model_files(folder)
    except ModelError as exc:
        raise ModelError(f"{field_name}: {exc}", requirement=exc.requirement) from None


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
    source: str | Path,
    role: str,
    name: str,
    cfg: AssessmentConfig,
    record: dict[str, object],
    progress: bool = True,
) -> LoadedState:
    from remnant.models.load import load_model

    device = resolve_device(cfg)
    state = load_model(source, dtype=DTYPE_NAMES[cfg.models.dtype], device=device, progress=progress)
    return LoadedState(role, name, str(source), state.model, state.tokenizer, state.identity, record)


def load_control(cfg: AssessmentConfig, *, progress: bool = True) -> LoadedState:
    """The never-modified control: a zoo entry (fetched once, cached as safetensors), a folder or a hub id
    (R3)."""
    spec = cfg.models.control
    if spec.zoo is not None:
        from remnant.models import zoo

        folder = zoo.cached(spec.zoo) or zoo.fetch(spec.zoo)
        state = _load(folder, "control", spec.zoo, cfg, {"zoo": spec.zoo}, progress)
        state.source = f"zoo:{spec.zoo}"
        return state
    return load_named_state(cfg, "control", progress=progress)


def load_named_state(cfg: AssessmentConfig, role: str, *, progress: bool = True) -> LoadedState:
    """A state the config names by ``folder`` or ``hub`` (:func:`state_source`): the control's, or a
    claimant's pre- or post-removal model (R1b, R2, R3)."""
    source = state_source(cfg, role)
    if source is None:
        raise ValueError(f"models.{role} names no folder or hub id")
    state = _load(source.folder, role, source.name, cfg, source.record, progress)
    if "hub" in source.record:  # the manifest's source says what a re-run must fetch (R23, R24)
        rec = source.record
        state.source = f"hub:{rec['hub']}@{rec['revision']} (commit {rec['commit']})"
    return state


def state_builder(
    cfg: AssessmentConfig,
    control: LoadedState,
    pack: Pack,
    fmt: PromptFormat,
    store: CheckpointStore,
    *,
    progress: bool,
    memo: MutableMapping[str, LoadedState] | None = None,
) -> StateBuilder:
    """The builder of this assessment's trained states (:mod:`remnant.states.builder`): from ``control``, saved
    in ``store`` and loaded back in the config's dtype and on its device."""

    def load(folder: Path) -> tuple[Any, Any, ModelIdentity]:
        state = _load(folder, "", "", cfg, {}, progress)
        return state.model, state.tokenizer, state.identity

    return StateBuilder(Origin(control, pack, fmt), store, load, progress, memo if memo is not None else {})


def install_state(builder: StateBuilder, cfg: AssessmentConfig, items: Any, *, seed: int) -> LoadedState:
    """θ = the control with the pack's install split trained in (R2)."""
    from remnant.train.install import InstallSpec

    budget = cfg.models.pre_removal.install
    assert budget is not None
    control = builder.origin.state
    # exclude_none: a budget that trains every parameter keeps the recipe it had before ``trainable`` existed
    recipe = {
        "install": budget.model_dump(mode="json", exclude_none=True),
        "seed": seed,
        "system_prompt": builder.origin.fmt.system_prompt,
    }

    def make() -> Made:
        model, result = builder.install(items, InstallSpec.from_budget(budget), seed=seed)
        installed = result.to_dict()
        installed.pop("outcome", None)
        outcome = {"status": result.outcome.status, "steps": result.outcome.steps}
        record = {"recipe": recipe, "install": installed, "install_outcome": outcome}
        return Made(model, record, f"installed into {control.name} (R2)")

    step = builder.origin.recipe("install", {**recipe, "items": "install"})
    return builder.state(step, "pre_removal", f"{control.name}+pack", make)


def removal_state(
    builder: StateBuilder, cfg: AssessmentConfig, pre: LoadedState, data: Any, *, seed: int
) -> tuple[LoadedState, dict[str, object]]:
    """θ_U by a registered removal method applied to θ (R1c); returns (state, method spec)."""
    from remnant import registry

    post = cfg.models.post_removal
    assert post.method is not None
    method = registry.create("method", post.method, post.params)
    spec = method.spec.to_dict()

    def make() -> Made:
        model, result = builder.removal(method, pre, data, seed=seed)
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
        return Made(model, record, f"removal method {post.method} (R1c)")

    step = builder.origin.recipe("removal", {"method": spec, "seed": seed}, parent=pre)
    return builder.state(step, "post_removal", f"{pre.name}-{post.method}", make), spec


__all__ = [
    "StateSource",
    "check_model_folder",
    "install_state",
    "load_control",
    "load_named_state",
    "preflight",
    "state_builder",
    "removal_state",
    "resolve_device",
    "state_source",
]
