"""The assessment orchestrator: a pre-registered config → states → cells → records → statement.

:func:`assess` is what ``remnant assess CONFIG --out RUN [--resume]`` runs:

1. read the config (ConfigError, exit 2), refuse without a frozen pre-registration in RUN (R14) and hold the
   config to it, each difference explained by a recorded deviation (R15);
2. check model folders before any work (pickled weights refused), load or mint the pack (R2, R18);
3. build or load the states: control (R3), pre-removal θ by installation (R2) or a folder, post-removal θ_U by
   a registered method (R1c) or the claimant's folder, trained states cached by their inputs;
4. run every cell on the post-removal model AND the control with identical inputs, seeds and scoring (R3, C-Q4,
   C-W5), in the order of :mod:`remnant.assess.schedule`: baselines, utility (R10-R12, C-W4), every declared
   attack (C-Q1, C-Q2), relearning (C-W1..C-W6), the white-box audits (C-H6, C-H7; the Annex B control states
   built here when asked) and the Class D battery (D-2 to D-5.3);
5. :func:`remnant.assess.finalize.finalize`: facts → verdict → tier → manifest → statement → signature → reports.

What each stage creates (the removal method's record, the utility metrics, audits and battery) it returns, and
:func:`assess` records it all as the ``components`` context (R23).

Every cell is appended to ``records.jsonl`` as it completes, so Ctrl-C (exit 130) or a crash loses at most the
cell in flight and ``--resume`` carries on. The whole run holds the run folder's lock (:mod:`remnant.runlock`,
R23): one writer at a time, a second process refused with the holder named. A :class:`Session` shares trained
states and computed cells between assessments (the demo's three removals share one control and one installed
model).
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# An assessment trains and runs models: importing torch here makes a missing model extra the first thing
# `remnant assess` reports, before any check of the run folder.
import torch  # noqa: F401

from remnant.assess.audits import LATENT_CACHE, build_audit_states, check_audits
from remnant.assess.classd import CLASSD_CONTEXT, prepare_battery
from remnant.assess.finalize import Outcome, finalize
from remnant.assess.inputs import (
    Inputs,
    check_utility_metrics,
    component_record,
    load_or_mint_pack,
    prepare_inputs,
)
from remnant.assess.runfiles import (
    STATES_DIR,
    context_event,
    read_context,
    run_id_for,
    store,
)
from remnant.assess.schedule import classd_cells, run_cells
from remnant.assess.states import (
    install_state,
    load_control,
    load_named_state,
    preflight,
    removal_state,
    state_builder,
)
from remnant.atomic import write_atomic
from remnant.config import AssessmentConfig, derive_seed, load_config
from remnant.engine.runner import CellCache, CellRunner
from remnant.errors import ConfigError
from remnant.prereg import load_prereg, require_prereg
from remnant.records import RECORDS_FILE, Deviation, Event, RecordStore
from remnant.run_manifest import CONFIG_COPY
from remnant.runlock import held
from remnant.standard.vocabulary import CONTROL, POST, PRE
from remnant.states.builder import LoadedState, StateBuilder
from remnant.states.store import CheckpointStore


@dataclass
class Session:
    """What several assessments in one process share: trained states, the cell cache, display settings.

    ``before_cell(label)`` is a test seam: it is called before each cell is computed, and raising from it
    simulates a kill in the middle of the run.
    """

    states: CheckpointStore | None = None
    cell_cache: CellCache | None = None
    progress: bool = True
    before_cell: Callable[[str], None] | None = None
    log: Callable[[str], None] = field(default=lambda text: print(text, file=sys.stderr, flush=True))
    memo: dict[str, LoadedState] = field(default_factory=dict)


@dataclass(frozen=True)
class LoadedStates:
    """The model states of one assessment, with what loading them fixed.

    ``inputs`` carries the control tokenizer's prompt format (bound here, before anything trains or any cell
    runs, R3); ``components`` holds the removal method's record when this run trained the post-removal
    model; ``builder`` builds any further state from the control (the audits' states)."""

    inputs: Inputs
    states: dict[str, LoadedState]
    components: tuple[dict[str, object], ...]
    builder: StateBuilder


def _load_states(
    cfg: AssessmentConfig, inputs: Inputs, store: CheckpointStore, session: Session
) -> LoadedStates:
    """Control, pre-removal and post-removal states, built or loaded (R2, R3, R1c); trained ones kept in
    ``store``."""
    memo = session.memo
    spec = cfg.models.control
    named = f"hub:{spec.hub}@{spec.revision or 'main'}" if spec.hub is not None else None
    control_key = f"control:{spec.zoo or named or cfg.resolve(spec.folder or '')}"
    if control_key not in memo:
        session.log("loading the never-modified control (R3)")
        memo[control_key] = load_control(cfg, progress=session.progress)
    control = memo[control_key]
    inputs = inputs.with_format(control.tokenizer)
    builder = state_builder(
        cfg, control, inputs.pack, inputs.fmt, store, progress=session.progress, memo=memo
    )
    pre = _pre_removal_state(cfg, inputs, builder, session)
    post, removal = _post_removal_state(cfg, inputs, builder, pre, session)
    states: dict[str, LoadedState] = {CONTROL: control, PRE: pre, POST: post}
    return LoadedStates(inputs, states, removal, builder)


def _pre_removal_state(
    cfg: AssessmentConfig, inputs: Inputs, builder: StateBuilder, session: Session
) -> LoadedState:
    """θ: the claimant's folder, or the pack installed into the control (R2)."""
    if cfg.models.pre_removal.install is None:
        return load_named_state(cfg, "pre_removal", progress=session.progress)
    session.log("pre-removal model: installing the pack into the control (R2)")
    seed = derive_seed(cfg.seeds.master, "install")
    return install_state(builder, cfg, inputs.install_items, seed=seed)


def _post_removal_state(
    cfg: AssessmentConfig, inputs: Inputs, builder: StateBuilder, pre: LoadedState, session: Session
) -> tuple[LoadedState, tuple[dict[str, object], ...]]:
    """θ_U: the claimant's folder, or the registered removal method run on θ (R1c), with its component
    record (R23)."""
    post_cfg = cfg.models.post_removal
    if post_cfg.method is None:
        return load_named_state(cfg, "post_removal", progress=session.progress), ()
    session.log(f"post-removal model: removal method {post_cfg.method} (R1c)")
    seed = derive_seed(cfg.seeds.master, "removal")
    post, spec = removal_state(builder, cfg, pre, inputs.removal_data, seed=seed)
    return post, (component_record("removal", spec),)


def _audit_context(extra: dict[str, LoadedState | str]) -> dict[str, dict[str, Any]]:
    """The ``audit_states`` context entry: each extra state's identity, or why it could not be built (C-H7)."""
    if not extra:
        return {}
    entry = {
        role: {"not_built": state} if isinstance(state, str) else state.context()
        for role, state in extra.items()
    }
    return {"audit_states": entry}


def _append_context(run: Path, run_id: str, items: Mapping[str, Mapping[str, object]]) -> None:
    """Append the context entries that differ from what the run already recorded (resume adds nothing new)."""
    records = store(run)
    have = read_context(records.read())
    new = [context_event(run_id, key, data) for key, data in items.items() if have.get(key) != data]
    records.extend(new)


@dataclass(frozen=True)
class OpenedRun:
    """A run folder checked and opened for this assessment: its id, record store, deviations in force, the
    inputs (fixed before any model loads) and the assessment context the run already recorded (on resume)."""

    run_id: str
    records: RecordStore
    deviations: tuple[Deviation, ...]
    inputs: Inputs
    earlier: dict[str, object]


def _open_run(cfg: AssessmentConfig, run: Path, *, resume: bool, session: Session) -> OpenedRun:
    """Steps 1 and 2 of the module docstring: every check that needs no model, before any model work; then the
    config copy and the stage's first event."""
    load_prereg(run)  # R14: nothing runs without a frozen pre-registration
    pack, minted, location = load_or_mint_pack(cfg, run)
    prereg, deviations = require_prereg(
        cfg, run, pack_digest=pack.digest if cfg.target.pack is not None else None
    )
    preflight(cfg)
    check_utility_metrics(cfg)  # R9: a misspelt metric must not cost the install and removal first
    if (run / RECORDS_FILE).exists() and not resume:
        raise ConfigError(
            f"{run}: already holds records.jsonl; pass --resume to continue it, or use a new run folder"
        )
    run_id = run_id_for(prereg.digest)
    records = store(run)
    if resume:
        torn = records.repair()
        if torn is not None:
            session.log(
                f"moved a torn last line of records.jsonl to {torn.side_file.name}; its cell is re-run"
            )
    source = cfg.source
    if source is None:
        raise ConfigError("assess needs a config read from a file (its copy is kept in the run folder, R24)")
    # components are built (and a misspelt attack parameter refused) before anything is written to the run
    inputs = prepare_inputs(cfg, pack, minted=minted, location=location)
    check_audits(cfg)  # C-H7: a misspelt audit parameter must not cost the install and removal first
    write_atomic(run / CONFIG_COPY, source.read_bytes())
    earlier = read_context(records.read()).get("assessment", {})
    records.append(Event(run_id=run_id, stage="assess", kind="resumed" if earlier else "stage_started"))
    return OpenedRun(run_id, records, tuple(deviations), inputs, earlier)


def _record_run_context(
    cfg: AssessmentConfig,
    run: Path,
    opened: OpenedRun,
    loaded: LoadedStates,
    extra: dict[str, LoadedState | str],
) -> None:
    """The context entries every later step reads back: assessment, pack, states, seeds, hyperparameters,
    environment and precision (R23, R25)."""
    from remnant.run_manifest import capture_environment

    inputs, states = loaded.inputs, loaded.states
    environment = capture_environment(device=str(states[CONTROL].identity.device), dtype=cfg.models.dtype)
    _append_context(
        run,
        opened.run_id,
        {
            "assessment": {
                "run_id": opened.run_id,
                "date": opened.earlier.get("date") or dt.date.today().isoformat(),
                "config_dir": str(cfg.resolve(".").resolve()),
            },
            "pack": inputs.pack_context(),
            "states": {role: state.context() for role, state in states.items()},
            **_audit_context(extra),
            "seeds": inputs.seeds(),
            "hyperparameters": inputs.hyperparameters(),
            "environment": environment.model_dump(mode="json"),
            "precision": {"list": inputs.precision()},
        },
    )


def _battery_cells(
    cfg: AssessmentConfig,
    run: Path,
    run_id: str,
    runner: CellRunner,
    loaded: LoadedStates,
    *,
    progress: bool,
) -> list[dict[str, object]]:
    """The Class D battery on the post-removal model and the control alike (D-2 to D-5.3, D4), when the config
    declares one; returns its component records (R23)."""
    inputs, states = loaded.inputs, loaded.states
    battery = prepare_battery(cfg, inputs)
    if battery is None:
        return []
    _append_context(run, run_id, {CLASSD_CONTEXT: battery.context()})
    classd_cells(runner, battery, inputs, states, progress=progress)
    return [
        component_record(f"classd:{name}", described) for name, described in battery.spec.describe().items()
    ]


def _finish_stage(
    run: Path, opened: OpenedRun, runner: CellRunner, components: list[dict[str, object]], session: Session
) -> None:
    """The ``components`` context (R23) and the stage's last event, with the cells computed and reused."""
    _append_context(run, opened.run_id, {"components": {"list": components}})
    opened.records.append(
        Event(
            run_id=opened.run_id,
            stage="assess",
            kind="stage_finished",
            data={"computed": runner.computed, "reused": runner.reused},
        )
    )
    session.log(
        f"cells: {runner.computed} computed, {runner.reused} reused; "
        f"deviations in force: {len(opened.deviations)}"
    )


def assess(
    config: str | Path | AssessmentConfig,
    run_dir: str | Path,
    *,
    resume: bool = False,
    session: Session | None = None,
    wait: bool = False,
) -> Outcome:
    """Run (or resume) one assessment into ``run_dir`` and write its statement, manifest and reports.

    The run folder's lock is held from the first check to the last report (R23, :mod:`remnant.runlock`): a
    second process on the folder is refused with the holder named (:class:`~remnant.runlock.FolderInUse`), or
    waits for it with ``wait``, so two assessments never interleave their records.
    """
    session = session or Session()
    cfg = config if isinstance(config, AssessmentConfig) else load_config(config)
    run = Path(run_dir)
    load_prereg(run)  # R14, before the lock: a folder that is no pre-registered run is not locked, nor made
    with held(run, purpose="remnant assess", wait=wait, say=session.log, create=False):
        return _assess_locked(cfg, run, resume=resume, session=session)


def assess_command(
    config: str | Path,
    out: str | Path,
    *,
    resume: bool = False,
    wait: bool = False,
    states: str | Path | None = None,
    progress: bool = True,
) -> Outcome:
    """``remnant assess CONFIG --out RUN [--resume] [--wait] [--states STORE] [--quiet]`` as a function: the command
    line runs it, and it is the public ``remnant.assess``. ``states`` is the store the run's trained states are
    kept in (a folder or an object-storage URI, docs/config.md; default ``RUN/states``); ``progress=False`` is
    ``--quiet``."""
    store = None
    if states is not None:
        from remnant.states.store import open_store

        store = open_store(str(states), option="--states", inputs={"the config": config})
    session = Session(progress=progress, states=store)
    return assess(Path(config), Path(out), resume=resume, session=session, wait=wait)


def _assess_locked(cfg: AssessmentConfig, run: Path, *, resume: bool, session: Session) -> Outcome:
    """:func:`assess` with the run folder's lock held."""
    opened = _open_run(cfg, run, resume=resume, session=session)
    store = session.states or CheckpointStore(run / STATES_DIR)
    loaded = _load_states(cfg, opened.inputs, store, session)
    extra = build_audit_states(cfg, loaded.inputs, loaded.builder, log=session.log)
    _record_run_context(cfg, run, opened, loaded, extra)
    runner = CellRunner(
        opened.records, opened.run_id, cache=session.cell_cache, before_cell=session.before_cell
    )
    runner.progress = lambda label: session.log(f"  cell: {label}")
    components = [*loaded.inputs.attack_components(), *loaded.components]
    components += run_cells(
        cfg,
        loaded.inputs,
        loaded.states,
        runner,
        progress=session.progress,
        audit_states=extra,
        cache_dir=store.root / LATENT_CACHE,  # a local folder: the store's own, or its local cache
    )
    components += _battery_cells(cfg, run, opened.run_id, runner, loaded, progress=session.progress)
    _finish_stage(run, opened, runner, components, session)
    return finalize(run, cfg)


__all__ = ["Session", "assess", "assess_command"]
