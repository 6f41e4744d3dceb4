"""The assessment orchestrator: a pre-registered config → states → cells → records → statement (DESIGN §1).

:func:`assess` is what ``remnant assess CONFIG --out RUN [--resume]`` runs:

1. read the config (ConfigError, exit 2), refuse without a frozen pre-registration in RUN (R14) and hold the
   config to it, each difference explained by a recorded deviation (R15);
2. check model folders before any work (pickled weights refused), load or mint the pack (R2, R18);
3. build or load the states: control (R3), pre-removal θ by installation (R2) or a folder, post-removal θ_U by
   a registered method (R1c) or the claimant's folder, trained states cached by their inputs;
4. run every cell on the post-removal model AND the control with identical inputs, seeds and scoring (R3, C-Q4,
   C-W5): unattacked baselines (with the pre-removal model too), utility at the removal stage (R10, R11),
   prefill, many-shot, repeated sampling and every declared extra (C-Q1), not-applicable ones recorded with
   their reason (C-Q2), and relearning at every budget and checkpoint (C-W1..C-W6) with attack-stage utility
   (R12, C-W4); with ``[class_d.battery]``, the Class D battery on both models, relearning included
   (:mod:`remnant.assess.classd`; D-2 to D-5.3); with ``[audits.*]``, the white-box audits on the post-removal
   model (and on both Annex B control states, built here when asked), readings that never weigh in the verdict
   or the tier (:mod:`remnant.assess.audits`; C-H6, C-H7);
5. :func:`remnant.assess.finalize.finalize`: facts → verdict → tier → manifest → statement → signature → reports.

Every cell is appended to ``records.jsonl`` as it completes, so Ctrl-C (exit 130) or a crash loses at most the
cell in flight and ``--resume`` carries on. A :class:`Session` shares trained states and computed cells between
assessments (the demo's three removals share one control and one installed model).
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# An assessment trains and runs models: importing torch here makes a missing model extra the first thing
# `remnant assess` reports, before any check of the run folder.
import torch  # noqa: F401

from remnant.assess import facts as F
from remnant.assess.audits import LATENT_CACHE, build_audit_states, check_audits
from remnant.assess.classd import (
    CLASSD_CONTEXT,
    battery_cells,
    prepare_battery,
    relearning_battery_cells,
)
from remnant.assess.finalize import Outcome, finalize
from remnant.assess.inputs import (
    Inputs,
    check_utility_metrics,
    load_or_mint_pack,
    prepare_inputs,
)
from remnant.assess.runfiles import (
    CONFIG_COPY,
    STATES_DIR,
    context_event,
    read_context,
    run_id_for,
    store,
)
from remnant.assess.schedule import run_cells
from remnant.assess.states import (
    LoadedState,
    install_state,
    load_control,
    load_folder_state,
    preflight,
    removal_state,
)
from remnant.atomic import write_atomic
from remnant.config import AssessmentConfig, derive_seed, load_config
from remnant.engine.runner import CellCache, CellRunner
from remnant.errors import ConfigError
from remnant.prereg import load_prereg, require_prereg
from remnant.records import RECORDS_FILE, Event


@dataclass
class Session:
    """What several assessments in one process share: trained states, the cell cache, display settings.

    ``before_cell(label)`` is a test seam: it is called before each cell is computed, and raising from it
    simulates a kill in the middle of the run.
    """

    states_dir: Path | None = None
    cell_cache: CellCache | None = None
    progress: bool = True
    before_cell: Callable[[str], None] | None = None
    log: Callable[[str], None] = field(default=lambda text: print(text, file=sys.stderr, flush=True))
    memo: dict[str, LoadedState] = field(default_factory=dict)


def _load_states(
    cfg: AssessmentConfig, inputs: Inputs, run: Path, session: Session
) -> dict[str, LoadedState]:
    states_dir = session.states_dir or (run / STATES_DIR)
    memo = session.memo
    control_key = f"control:{cfg.models.control.zoo or cfg.resolve(cfg.models.control.folder or '')}"
    if control_key not in memo:
        session.log("loading the never-modified control (R3)")
        memo[control_key] = load_control(cfg)
    control = memo[control_key]
    inputs.bind_format(control.tokenizer)
    master = cfg.seeds.master
    pre_cfg = cfg.models.pre_removal
    if pre_cfg.folder is not None:
        pre = load_folder_state(cfg, "pre_removal", pre_cfg.folder)
    else:
        session.log("pre-removal model: installing the pack into the control (R2)")
        pre = install_state(
            cfg,
            control,
            inputs.install_items,
            inputs.pack.digest,
            states_dir,
            seed=derive_seed(master, "install"),
            fmt=inputs.fmt,
            progress=session.progress,
            memo=memo,
        )
    post_cfg = cfg.models.post_removal
    if post_cfg.folder is not None:
        post = load_folder_state(cfg, "post_removal", post_cfg.folder)
    else:
        session.log(f"post-removal model: removal method {post_cfg.method} (R1c)")
        post, spec = removal_state(
            cfg,
            control,
            pre,
            inputs.removal_data,
            inputs.pack.digest,
            states_dir,
            seed=derive_seed(master, "removal"),
            fmt=inputs.fmt,
            progress=session.progress,
            memo=memo,
        )
        inputs.components.append({"role": "removal", **spec})
    return {F.CONTROL: control, F.PRE: pre, F.POST: post}


def _audit_context(extra: dict[str, LoadedState | str]) -> dict[str, dict[str, Any]]:
    """The ``audit_states`` context entry: each extra state's identity, or why it could not be built (C-H7)."""
    if not extra:
        return {}
    entry = {
        role: {"not_built": state} if isinstance(state, str) else state.context()
        for role, state in extra.items()
    }
    return {"audit_states": entry}


def _append_context(run: Path, run_id: str, items: dict[str, dict[str, Any]]) -> None:
    """Append the context entries that differ from what the run already recorded (resume adds nothing new)."""
    records = store(run)
    have = read_context(records.read())
    new = [context_event(run_id, key, data) for key, data in items.items() if have.get(key) != data]
    records.extend(new)


def assess(
    config: str | Path | AssessmentConfig,
    run_dir: str | Path,
    *,
    resume: bool = False,
    session: Session | None = None,
) -> Outcome:
    """Run (or resume) one assessment into ``run_dir`` and write its statement, manifest and reports."""
    session = session or Session()
    cfg = config if isinstance(config, AssessmentConfig) else load_config(config)
    run = Path(run_dir)
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
    states = _load_states(cfg, inputs, run, session)
    states_dir = session.states_dir or (run / STATES_DIR)
    extra = build_audit_states(
        cfg, inputs, states, states_dir, progress=session.progress, memo=session.memo, log=session.log
    )
    from remnant.run_manifest import capture_environment

    environment = capture_environment(device=str(states[F.CONTROL].identity.device), dtype=cfg.models.dtype)
    _append_context(
        run,
        run_id,
        {
            "assessment": {
                "run_id": run_id,
                "date": earlier.get("date") or dt.date.today().isoformat(),
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
    runner = CellRunner(records, run_id, cache=session.cell_cache, before_cell=session.before_cell)
    runner.progress = lambda label: session.log(f"  cell: {label}")
    run_cells(
        cfg,
        inputs,
        states,
        runner,
        progress=session.progress,
        audit_states=extra,
        cache_dir=states_dir / LATENT_CACHE,
    )
    battery = prepare_battery(cfg, inputs)
    if battery is not None:  # Class D battery, post-removal model and control alike (D-2 to D-5.3, D4)
        _append_context(run, run_id, {CLASSD_CONTEXT: battery.context()})
        shared = inputs.key_inputs()
        direct = battery_cells(runner, battery, inputs, states, shared)
        relearning_battery_cells(
            runner, battery, inputs, states, shared, step0=direct, progress=session.progress
        )
    _append_context(run, run_id, {"components": {"list": inputs.component_records()}})
    records.append(
        Event(
            run_id=run_id,
            stage="assess",
            kind="stage_finished",
            data={"computed": runner.computed, "reused": runner.reused},
        )
    )
    session.log(
        f"cells: {runner.computed} computed, {runner.reused} reused; deviations in force: {len(deviations)}"
    )
    return finalize(run, cfg)


__all__ = ["Session", "assess"]
