"""The model states of one latent-probe study run (Annex B.2): never-modified, installed, content-shuffled
install, installed-then-removed, never-installed-but-removal-applied, plus the relearning criterion.

Every state comes from the one states builder (:mod:`remnant.states.builder`), which trains deep copies of the
never-modified control, so the control is never modified; the installed model and the content twin depend only
on (model, seed), so the builder hands every method of that seed the same ones. Relearning is the criterion's
attack (:func:`remnant.studies.relearn_criterion.relearn_attack`); nothing here trains by itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from remnant.models.identity import ModelIdentity
from remnant.states.builder import LoadedState, Loader, Made, Origin, StateBuilder
from remnant.states.store import CheckpointStore

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from remnant.models.prompts import PromptFormat
    from remnant.packs.schema import Item, Pack
    from remnant.studies.latent_probe import LatentProbeConfig
    from remnant.train.install import InstallSpec
    from remnant.train.methods.base import QA, RemovalData
    from remnant.train.relearn import Scorer


@dataclass(frozen=True)
class RunStates:
    """One (model, method, seed) run's states (with the tokenizer and pack they were trained with), probe prompts
    and measured κ."""

    method: str
    seed: int
    tokenizer: PreTrainedTokenizerBase
    pack: Pack
    control: PreTrainedModel
    installed: PreTrainedModel
    removed: PreTrainedModel
    procedure: PreTrainedModel
    content: PreTrainedModel
    prompts: tuple[tuple[int, ...], ...]
    kappa_p: dict[str, float]
    kappa_retain: dict[str, float]
    removal_status: str
    recovery: float | None
    control_relearned_p: float

    def gates(self, cfg: LatentProbeConfig) -> dict[str, bool]:
        """B.6's suppression and utility gates, declared in the config; a diverged run never qualifies."""
        installed_p, removed_p = self.kappa_p["installed"], self.kappa_p["removed"]
        inst_r, rem_r = self.kappa_retain["installed"], self.kappa_retain["removed"]
        return {
            "installed": installed_p > 0.0,
            "suppressed": removed_p <= cfg.suppression * installed_p,
            "utility_kept": rem_r >= cfg.utility_floor * inst_r,
            "not_diverged": self.removal_status != "diverged",
        }


def rate_of(score: tuple[int, int]) -> float:
    """κ as a rate from a scorer's (correct, total); 0 for an empty set."""
    k, n = score
    return k / n if n else 0.0


def p_items(pack: Pack, cfg: LatentProbeConfig) -> list[Item]:
    """The scored P facts of the design (install items of the forget-probe entities, declared attributes)."""
    probe_entities = {e.id for e in pack.manifest.entities if e.role == "forget_probe"}
    return [
        it
        for it in pack.split("install")
        if it.entity_id in probe_entities and it.attribute in set(cfg.attributes)
    ]


@dataclass(frozen=True)
class Study:
    """What every run on one model shares: the loaded control, its states builder, the pack, the scored sets and
    their scorers."""

    tokenizer: PreTrainedTokenizerBase
    control: PreTrainedModel
    builder: StateBuilder
    fmt: PromptFormat
    pack: Pack
    attributes: list[str]
    trainable: tuple[str, ...] | None
    p_set: tuple[QA, ...]
    relearn_set: tuple[QA, ...]
    data: RemovalData
    score_p: Scorer
    score_retain: Scorer
    prompts: tuple[tuple[int, ...], ...]
    install_spec: InstallSpec
    control_p: float


@dataclass(frozen=True)
class _Installed:
    """One seed's installed model and content-shuffled twin (shared by every method of that seed)."""

    model: LoadedState
    content: LoadedState
    kappa_p: float
    kappa_retain: float


def load_study(
    model: str,
    cfg: LatentProbeConfig,
    pack: Pack | None = None,
    states: CheckpointStore | None = None,
    progress: bool = True,
) -> Study:
    """Load ``model`` once, mint the pack (without general questions; or take ``pack``) and build P, the retain
    and relearning sets (C-W6) with their greedy scorers and the probe prompts (B.3 step 1). With ``states`` the
    builder keeps every trained state there and loads it back on a later run of the same recipe (R23).
    ``progress=False``: no progress bar while a model is fetched or loaded."""
    from remnant.latent.inputs import probe_prompts
    from remnant.models import load_model
    from remnant.models.prompts import PromptFormat
    from remnant.packs import ClassDSpec, mint_class_d
    from remnant.train.data import as_qa, removal_data, retain_training_qa, split_qa
    from remnant.train.install import InstallSpec
    from remnant.train.relearn import greedy_scorer

    state = load_model(model, dtype=cfg.dtype, progress=progress)
    tok, control = state.tokenizer, state.model
    origin = LoadedState("control", model, model, control, tok, state.identity)
    fmt = PromptFormat.for_tokenizer(tok, system_prompt=cfg.system_prompt)
    if pack is None:
        minted = ClassDSpec(
            entities=cfg.pack.entities, controls=cfg.pack.controls, general=False, seed=cfg.pack.seed
        )
        pack = mint_class_d(minted)
    attrs = list(cfg.attributes)
    trainable = tuple(cfg.trainable) if cfg.trainable is not None else None
    p_set = as_qa(p_items(pack, cfg))
    retain_set = retain_training_qa(pack, attrs)
    relearn_set = split_qa(pack, "relearn", attrs)
    score_p = greedy_scorer(tok, p_set, fmt)
    score_retain = greedy_scorer(tok, retain_set, fmt)
    prompts = probe_prompts(tok, pack, attrs, fmt)
    spec = InstallSpec(**cfg.install.model_dump(), trainable=trainable)
    return Study(
        tokenizer=tok,
        control=control,
        builder=StateBuilder(
            Origin(origin, pack, fmt, tuple(attrs)),
            states,
            _loader(cfg.dtype, progress) if states is not None else None,
        ),
        fmt=fmt,
        pack=pack,
        attributes=attrs,
        trainable=trainable,
        p_set=p_set,
        relearn_set=relearn_set,
        data=removal_data(pack, attrs),
        score_p=score_p,
        score_retain=score_retain,
        prompts=prompts,
        install_spec=spec,
        control_p=rate_of(score_p(control)),
    )


def _loader(dtype: str, progress: bool) -> Loader:
    """Reads a saved state back in the study's dtype (a state's identity is that of its files, R23)."""

    def load(folder: Path) -> tuple[Any, Any, ModelIdentity]:
        from remnant.models import load_model

        state = load_model(folder, dtype=dtype, progress=progress)
        return state.model, state.tokenizer, state.identity

    return load


def installed_state(study: Study, seed: int, items: str = "install") -> LoadedState:
    """The control with the pack's install split installed (R2) for ``seed``, from the states builder;
    ``items="content_control"``: its content-shuffled twin (C-H3b), installed under the identical recipe."""
    from dataclasses import asdict

    from remnant.train.data import split_qa

    builder, spec = study.builder, study.install_spec

    def installed() -> Made:
        if items == "content_control":
            return builder.twin(spec, seed=seed)
        model, result = builder.install(split_qa(study.pack, "install", study.attributes), spec, seed=seed)
        return Made(model, {"install": result.to_dict()}, "the pack installed into the control")

    recipe = builder.origin.recipe("install", {"install": asdict(spec), "seed": seed, "items": items})
    role = "installed" if items == "install" else items
    return builder.state(recipe, role, role, installed)


def removal_method(study: Study, name: str, params: dict[str, Any]) -> Any:
    """The registered method ``name`` with ``params`` (and its ``.spec``), training the design's trainable
    parameters."""
    from remnant import registry

    params = {**params}
    if study.trainable is not None:
        params.setdefault("trainable", list(study.trainable))
    return registry.create("method", name, params)


def removal_state(
    study: Study, method: Any, start: LoadedState | None, seed: int, role: str, name: str, what: str
) -> LoadedState:
    """``method`` at ``seed`` applied to ``start`` (None: the never-installed control, C-H3a) by the states
    builder, not kept in memory past its run; ``what`` describes it in the state's record."""
    builder = study.builder

    def make() -> Made:
        model, result = builder.removal(method, start, study.data, seed=seed)
        return Made(model, {"removal": result.to_dict()}, what)

    recipe = builder.origin.recipe("removal", {"method": method.spec.to_dict(), "seed": seed}, start)
    return builder.state(recipe, role, name, make, keep=False)


def relearned(
    study: Study, cfg: LatentProbeConfig, removed: PreTrainedModel, seed: int
) -> tuple[float, float]:
    """The relearning criterion on ``removed`` and the control, under one procedure (C-W5): the declared budgets
    that fit R (else all of R); each one's best κ_P at the last budget."""
    from remnant.studies.relearn_criterion import relearn_attack
    from remnant.train.relearn import RelearnSpec

    n_relearn = len(study.relearn_set)
    spec = RelearnSpec(
        budgets=tuple(b for b in cfg.relearn.budgets if b <= n_relearn) or (n_relearn,),
        lr=cfg.relearn.lr,
        epochs=cfg.relearn.epochs,
        checkpoint_epochs=tuple(cfg.relearn.checkpoint_epochs),
        trainable=tuple(cfg.trainable) if cfg.trainable is not None else None,
        seed=seed,
    )
    attack = relearn_attack(
        removed, study.control, study.tokenizer, study.relearn_set, study.p_set, spec, fmt=study.fmt
    )
    last = attack.budgets[-1]
    return max(p.rate for p in last.post_removal.points), max(p.rate for p in last.control.points)


def recovery(installed_p: float, removed_p: float, relearned_p: float) -> float | None:
    """The share of the removed gap relearning restored (None: removal left no gap)."""
    gap = installed_p - removed_p
    return (relearned_p - removed_p) / gap if gap > 0 else None


def _method_run(
    cfg: LatentProbeConfig, study: Study, seed: int, installed: _Installed, name: str
) -> RunStates:
    """Method ``name`` on the installed model and on the never-installed control (C-H3a), then relearning of
    θ_U and the control on R: one run's states and measured κ."""
    method = removal_method(study, name, cfg.method_params.get(name, {}))
    rem = removal_state(study, method, installed.model, seed, "removed", name, f"removal {name}")
    proc = removal_state(study, method, None, seed, "procedure_control", name, f"removal {name}")
    removed, procedure = rem.model, proc.model
    removed_p = rate_of(study.score_p(removed))
    best_removed, control_relearned = relearned(study, cfg, removed, seed)
    return RunStates(
        method=name,
        seed=seed,
        tokenizer=study.tokenizer,
        pack=study.pack,
        control=study.control,
        installed=installed.model.model,
        removed=removed,
        procedure=procedure,
        content=installed.content.model,
        prompts=study.prompts,
        kappa_p={
            "control": study.control_p,
            "installed": installed.kappa_p,
            "removed": removed_p,
            "procedure_control": rate_of(study.score_p(procedure)),
            "content_control": rate_of(study.score_p(installed.content.model)),
        },
        kappa_retain={"installed": installed.kappa_retain, "removed": rate_of(study.score_retain(removed))},
        removal_status=str(cast(dict[str, Any], rem.record["removal"])["outcome"]["status"]),
        recovery=recovery(installed.kappa_p, removed_p, best_removed),
        control_relearned_p=control_relearned,
    )


@dataclass(frozen=True)
class PlannedRun:
    """One (model, method, seed) run before anything is trained: ``states()`` builds its states (the seed's
    install and content twin once, shared by its methods) when a caller needs them."""

    model: str
    method: str
    seed: int
    origin: str
    pack: str
    states: Callable[[], RunStates]


def planned_runs(
    model: str,
    cfg: LatentProbeConfig,
    *,
    log: Callable[[str], None] | None = None,
    states: CheckpointStore | None = None,
    progress: bool = True,
) -> Iterator[PlannedRun]:
    """Load ``model`` once and yield one :class:`PlannedRun` per (seed, method), seeds outermost; ``origin`` is
    the never-modified model's weights digest and ``pack`` the pack's digest. ``states``: where the builder keeps the trained states between
    runs (:func:`load_study`). A run's states must be asked for before the next run is taken: the builder frees
    a seed's states when the next seed begins."""
    from functools import cache

    say = log or (lambda _m: None)
    study = load_study(model, cfg, states=states, progress=progress)
    origin = study.builder.origin.state.identity.digest
    for seed in cfg.seeds:
        study.builder.memo.clear()  # a seed's states are not read by the next seed's runs: free them

        @cache
        def installed(seed: int = seed) -> _Installed:
            say(f"{model} seed {seed}: install and content-shuffled twin")
            state = installed_state(study, seed)
            return _Installed(
                model=state,
                content=installed_state(study, seed, "content_control"),
                kappa_p=rate_of(study.score_p(state.model)),
                kappa_retain=rate_of(study.score_retain(state.model)),
            )

        for name in cfg.methods:

            def run(seed: int = seed, name: str = name) -> RunStates:
                inst = installed()
                say(f"{model} seed {seed}: {name} on the installed model and on the never-installed control")
                return _method_run(cfg, study, seed, inst, name)

            yield PlannedRun(model, name, seed, origin, study.pack.digest, run)


__all__ = [
    "PlannedRun",
    "RunStates",
    "Study",
    "installed_state",
    "load_study",
    "p_items",
    "planned_runs",
    "rate_of",
    "recovery",
    "relearned",
    "removal_method",
    "removal_state",
]
