"""``remnant study latent-probe``: the Standard's Annex B validation design at a scale this machine can run.

For every model, removal method and seed (B.2 at small scale): mint a Class D pack, install it into the
never-modified control (R2), install the content-shuffled twin under the identical recipe (content control,
C-H3b), apply the removal to the installed model and to the never-installed control (procedure control, C-H3a),
then read the frozen mean-difference direction over ≥ 3 layers × 2 positions (B.3, via
:func:`remnant.latent.direction.direction_survival`) and relearn the removed model and the control on R, disjoint
from the scored P (§4.2, C-W5, C-W6), for the survival-versus-recovery comparison (B.1 item 5).

The analysis is B.3 step 4 and B.4 as this module declares them before the run (the config is the
pre-registration): a cell is *evaluable* when its run cleared the removal gates (P suppressed to at most
``suppression`` of the installed level, retained items kept to at least ``utility_floor`` of it, nothing
diverged) and installation left a signature above its sign-flip permutation floor; a null *holds* in a cell when
the control's bootstrap interval lies wholly inside ±``margin`` (equivalence, not "contains zero"); a null holds
for a method when it holds in at least ``pass_fraction`` of that method's evaluable cells (B.6 used δ = 0.10 and
80 %). The decision follows B.4 (promote / retain as admissible but non-predictive / demote). Whatever it says,
the statistic stays non-adjudicating under v0.3: an assessor's own validation does not readmit it (C-H6, C-H9).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, ValidationError, model_validator

from remnant.config.fields import Patterns
from remnant.latent.direction import DirectionConfig, DirectionResult, direction_survival, within_margin
from remnant.studies.config import StudyModel
from remnant.studies.document import fmt, fmt_ci
from remnant.studies.readmission import Decision, MethodNulls, NullReading, b4_decision, null_row, overall

if TYPE_CHECKING:
    from remnant.states.store import CheckpointStore
    from remnant.studies.latent_probe_states import RunStates


class PackSettings(StudyModel):
    """The minted Class D pack (D1-D5)."""

    entities: int = Field(default=12, description="Installed entities (half are forget entities).")
    controls: int = Field(default=4, description="Never-installed control entities.")
    seed: int = Field(default=7, description="Minting seed.")


class InstallSettings(StudyModel):
    """Installation recipe shared by the real install and the content-shuffled twin (C-H3b: identical)."""

    target: float = Field(default=0.95, description="Stop once κ on the installed items reaches this.")
    max_epochs: int = Field(default=8, description="Epoch ceiling.")
    lr: float = Field(default=3e-4, description="Learning rate.")
    batch_size: int = Field(default=8, description="Batch size.")


class RelearnSettings(StudyModel):
    """The relearning arm that supplies the recovery criterion (B.5, §4.2)."""

    budgets: list[int] = Field(default=[8], description="Nested relearning budgets (examples of R).")
    lr: float = Field(default=3e-4, description="Learning rate.")
    epochs: int = Field(default=1, description="Epochs.")
    checkpoint_epochs: list[float] = Field(default=[0.5], description="Checkpoints inside the first epoch.")


DEFAULT_METHOD_PARAMS: dict[str, dict[str, Any]] = {
    "npo": {"lr": 5e-5, "epochs": 2, "batch_size": 8, "warmup_epochs": 0.0},
    # the fine-tuned vector moves a never-installed model too, so the procedure control is informative
    "task_vector": {"vector_source": "finetune", "finetune_epochs": 2.0, "lr": 1e-4, "scale": 1.0},
}


class ModelSettings(StudyModel):
    """Settings that differ between model families (B.2 asks for ≥ 2): block indices, and a recipe sized to the
    model. Each field left ``None`` keeps the study-wide value; ``method_params`` merge over the study's, per
    method and per parameter."""

    trainable: Patterns | None = Field(default=None, description="Trainable parameter regexes.")
    layers: list[int] | None = Field(default=None, description="Layers the direction is read in.")
    install: InstallSettings | None = Field(default=None, description="Install recipe.")
    relearn: RelearnSettings | None = Field(default=None, description="Relearning arm.")
    method_params: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Per-method parameters merged over the study's."
    )


class LatentProbeConfig(StudyModel):
    """Everything declared before the run (the study's pre-registration, B.4)."""

    models: list[str] = Field(description="Model folders or zoo names (B.2 asks for ≥ 2 families).")
    methods: list[str] = Field(default=["npo", "task_vector"], description="Registered removal methods.")
    method_params: dict[str, dict[str, Any]] = Field(
        default_factory=lambda: copy.deepcopy(DEFAULT_METHOD_PARAMS), description="Parameters per method."
    )
    seeds: list[int] = Field(default=[0, 1], description="Installation and removal seeds (B.2: ≥ 2).")
    pack: PackSettings = Field(default_factory=PackSettings, description="The target pack.")
    attributes: list[str] = Field(default=["birth_year"], description="Installed attributes.")
    system_prompt: str | None = Field(default="", description="Chat system turn (None: template default).")
    trainable: Patterns | None = Field(default=None, description="Trainable parameter regexes (all: None).")
    install: InstallSettings = Field(default_factory=InstallSettings, description="Install recipe.")
    relearn: RelearnSettings = Field(default_factory=RelearnSettings, description="Relearning arm.")
    layers: list[int] | None = Field(default=None, description="Layers (None: 25/50/75 % of depth).")
    positions: list[str] = Field(default=["last", "mean"], description="Token positions (≥ 2).")
    margin: float = Field(default=0.10, description="Equivalence margin δ for both nulls (B.6: 0.10).")
    pass_fraction: float = Field(default=0.80, description="Share of evaluable cells a null must hold in.")
    suppression: float = Field(default=0.5, description="Gate: κ_P(removed) ≤ this × κ_P(installed).")
    utility_floor: float = Field(default=0.8, description="Gate: retain κ(removed) ≥ this × installed.")
    rho_min: float = Field(default=0.5, description="Spearman ρ survival-vs-recovery needed to promote.")
    n_resamples: int = Field(default=1000, description="Bootstrap resamples per interval.")
    n_permutations: int = Field(default=500, description="Sign-flip permutations for the signature floor.")
    dtype: str = Field(default="fp32", description="Model dtype.")
    per_model: dict[str, ModelSettings] = Field(
        default_factory=dict,
        description="Overrides for one model, keyed by the model exactly as ``models`` names it.",
    )

    @model_validator(mode="after")
    def _per_model_names_a_model(self) -> LatentProbeConfig:
        unknown = sorted(set(self.per_model) - set(self.models))
        if unknown:
            raise ValueError(f"per_model names {unknown}, which are not among models {self.models}")
        return self

    def for_model(self, model: str) -> LatentProbeConfig:
        """This config as it applies to ``model``: its ``per_model`` entry laid over the study-wide values."""
        settings = self.per_model.get(model)
        if settings is None:
            return self
        update: dict[str, object] = {
            k: getattr(settings, k)
            for k in ("trainable", "layers", "install", "relearn")
            if getattr(settings, k) is not None
        }
        params = copy.deepcopy(self.method_params)
        for method, extra in settings.method_params.items():
            params[method] = {**params.get(method, {}), **extra}
        update["method_params"] = params
        return self.model_copy(update=update)


#: Sizing presets: ``tiny`` runs on the test suite's tiny random model in about a minute of CPU (docs/latent.md);
#: ``cpu`` is SmolLM2-scale.
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {
        "seeds": [0],
        "pack": {"entities": 8, "controls": 2, "seed": 0},
        "install": {"target": 0.9, "max_epochs": 30, "lr": 3e-3, "batch_size": 8},
        "relearn": {"budgets": [6], "lr": 3e-3, "epochs": 1, "checkpoint_epochs": [0.5]},
        "method_params": {
            "npo": {"lr": 1e-3, "epochs": 3, "alpha": 3.0, "batch_size": 4, "warmup_epochs": 0.0},
            "task_vector": {"vector_source": "finetune", "finetune_epochs": 2.0, "lr": 2e-3, "scale": 0.8},
        },
        "utility_floor": 0.7,
        "layers": [0, 1],
        "n_resamples": 200,
        "n_permutations": 100,
    },
    # SmolLM2-135M: only blocks 15-29 train, so the direction is read inside them (blocks 7 and 14, the
    # default 25/50 % depths, are identical in every state: ‖u‖ = 0, never evaluable). Both methods are sized
    # to clear B.6's suppression and utility gates on seed 0 (calibrated:
    # docs/latent.md#how-the-cpu-preset-was-sized).
    "cpu": {
        "trainable": [r"model\.layers\.(1[5-9]|2\d)\."],
        "layers": [18, 22, 26],
        # birth years share their tokens, so NPO on some bled into all and failed the utility gate; home
        # towns, as in the canary states (docs/latent.md#how-the-cpu-preset-was-sized)
        "attributes": ["home_town"],
        "method_params": {
            "npo": {"lr": 1.5e-4, "epochs": 4, "alpha": 10.0, "batch_size": 8, "warmup_epochs": 0.0},
            "task_vector": {**DEFAULT_METHOD_PARAMS["task_vector"], "scale": 0.5},
        },
        # a second family (B.2): Gemma-3-270M has 18 blocks, so the upper half (9-17) trains and the direction
        # is read inside it. SmolLM2's NPO learning rate did not pass the suppression gate there; this one
        # does on seed 0 (docs/latent.md#how-the-cpu-preset-was-sized).
        "per_model": {
            "gemma3-270m": {
                "trainable": [r"model\.layers\.(9|1[0-7])\."],
                "layers": [11, 13, 15],
                "method_params": {"npo": {"lr": 4e-4}},
            },
        },
    },
}


class NullCell(StudyModel):
    """One control state's survival at one cell and the equivalence reading (B.3 step 4)."""

    survival: float = Field(description="Projection on the frozen direction (installed = 1).")
    ci95: tuple[float, float] = Field(description="Bootstrap interval over probe inputs.")
    held: bool = Field(description="Interval wholly inside ±margin.")


class CellReading(StudyModel):
    """One (layer, position) cell of one run."""

    layer: int = Field(description="Block index.")
    position: str = Field(description="Token position.")
    signature: float = Field(description="‖u‖ of the installed-minus-never-modified mean difference.")
    floor: float = Field(description="Sign-flip permutation floor of ‖u‖.")
    survival_removed: float = Field(description="Survival in the post-removal model.")
    ci95_removed: tuple[float, float] = Field(description="Its bootstrap interval.")
    procedure: NullCell = Field(description="Procedure control (removal on a never-installed model, C-H3a).")
    content: NullCell = Field(description="Content control (content-shuffled twin installed, C-H3b).")
    evaluable: bool = Field(description="Run passed its gates and the signature exceeds its floor.")


class RunResult(StudyModel):
    """One (model, method, seed) run: gates, recovery and every cell."""

    model: str = Field(description="Model as given.")
    model_digest: str = Field(description="Weights digest of the never-modified model.")
    method: str = Field(description="Removal method.")
    seed: int = Field(description="Installation and removal seed.")
    kappa_p: dict[str, float] = Field(description="κ on P per state (control, installed, removed, controls).")
    kappa_retain: dict[str, float] = Field(description="κ on retained installed items (installed, removed).")
    removal_status: str = Field(description="Removal outcome status (completed / diverged).")
    gates: dict[str, bool] = Field(description="suppressed, utility_kept, not_diverged.")
    recovery: float | None = Field(description="Relearning recovery of the removed gap (None: no gap).")
    control_relearned_p: float = Field(description="Best κ_P of the relearned never-modified control.")
    primary_survival: float = Field(description="Survival in the removed model at the primary cell.")
    cells: list[CellReading] = Field(description="Per cell.")
    direction: DirectionResult = Field(description="The full direction-survival measurement.")


class MethodRow(MethodNulls):
    """One row of the Annex-shaped table (B.6): counts over the method's evaluable cells (models, seeds, layers and
    positions), each null held if in ≥ pass_fraction of them."""

    design_stable: bool = Field(description="Each null's reading is the same in every evaluable cell (C-H4).")


class StudyResult(StudyModel):
    """The study's record and its Annex-shaped table. Never adjudicating (C-H6, C-H9)."""

    study: Literal["latent-probe"] = Field(default="latent-probe", description="Study name.")
    adjudicating: Literal[False] = Field(default=False, description="Always false (C-H6, C-H9).")
    config: LatentProbeConfig = Field(description="The declared design.")
    primary: tuple[int, str] = Field(description="Primary configuration (middle layer, first position).")
    table: list[MethodRow] = Field(description="Per method: evaluable cells and null readings (B.6 shape).")
    content_null: NullReading = Field(description="held only if it held for every method.")
    procedure_null: NullReading = Field(description="held only if it held for every method.")
    rho: float | None = Field(description="Spearman ρ of primary survival vs recovery over evaluable runs.")
    n_rho: int = Field(description="Runs behind ρ.")
    decision: Decision = Field(description="B.4 decision under this study's own rule.")
    note: str = Field(description="What the decision does and does not license.")
    runs: list[RunResult] = Field(description="Every run.")


def resolve_config(
    models: Sequence[str], *, preset: str | None = None, overrides: dict[str, Any] | None = None
) -> LatentProbeConfig:
    """Defaults, then a preset's values, then explicit overrides (e.g. from a TOML config)."""
    from remnant.errors import ConfigError

    data: dict[str, Any] = {}
    if preset is not None:
        if preset not in PRESETS:
            raise ConfigError(f"study latent-probe: preset {preset!r} is not one of {sorted(PRESETS)}")
        data.update(copy.deepcopy(PRESETS[preset]))
    preset_models = data.pop("per_model", {})
    data.update(overrides or {})
    if models:
        data["models"] = list(models)
    # a preset sizes the families it knows; only the ones this study runs are kept (a config's own per_model
    # entries must each name a model it runs)
    kept = {name: v for name, v in preset_models.items() if name in (data.get("models") or [])}
    data["per_model"] = {**kept, **data.get("per_model", {})}
    if not data.get("models"):
        raise ConfigError("study latent-probe: no model given (--model DIR or models = [...] in the config)")
    try:
        return LatentProbeConfig(**data)
    except ValidationError as exc:  # one line: the first problem's field and message
        from remnant.formats.files import describe_error

        raise ConfigError(
            f"study latent-probe: bad config: {describe_error(exc)}", requirement="C-H7"
        ) from None


def method_table(runs: Sequence[RunResult], cfg: LatentProbeConfig) -> list[MethodRow]:
    """The B.6 table from the runs: counts over evaluable cells and the ≥ pass_fraction rule per null."""
    rows = []
    for method in cfg.methods:
        cells = [c for r in runs if r.method == method for c in r.cells if c.evaluable]
        nulls = null_row(method, [(c.content.held, c.procedure.held) for c in cells], cfg.pass_fraction)
        stable = all(len({getattr(c, k).held for c in cells}) <= 1 for k in ("content", "procedure"))
        rows.append(MethodRow(**nulls.model_dump(), design_stable=stable))
    return rows


def _overall_nulls(table: Sequence[MethodRow]) -> tuple[NullReading, NullReading]:
    """(content, procedure) over every method of the table: each held only if it held for every method."""
    return overall([r.content_null for r in table], every=True), overall(
        [r.procedure_null for r in table], every=True
    )


def decide(table: Sequence[MethodRow], rho: float | None, cfg: LatentProbeConfig) -> Decision:
    """B.4: demote if either null fails or the conclusion is design-sensitive; promote only if survival also
    predicts recovery (ρ ≥ rho_min); otherwise retain as admissible but non-predictive."""
    stable = all(r.design_stable for r in table if r.evaluable_cells)
    return b4_decision(*_overall_nulls(table), stable, None, rho is not None and rho >= cfg.rho_min)[0]


def cells_from(direction: DirectionResult, evaluable_run: bool, margin: float) -> list[CellReading]:
    """Per-cell readings of one run's direction measurement (roles removed / procedure / content control)."""
    by = {(f.role, f.layer, f.position): f for f in direction.figures}
    out = []
    for sig in direction.signatures:
        cell = (sig.layer, sig.position)

        def null(role: str, cell: tuple[int, str] = cell) -> NullCell:
            f = by[(role, *cell)]
            return NullCell(survival=f.survival, ci95=f.ci95, held=within_margin(f.ci95, margin))

        removed = by[("removed", *cell)]
        out.append(
            CellReading(
                layer=sig.layer,
                position=sig.position,
                signature=sig.magnitude,
                floor=sig.permutation_floor,
                survival_removed=removed.survival,
                ci95_removed=removed.ci95,
                procedure=null("procedure_control"),
                content=null("content_control"),
                evaluable=evaluable_run and sig.magnitude > sig.permutation_floor,
            )
        )
    return out


def direction_config(cfg: LatentProbeConfig, seed: int) -> DirectionConfig:
    layers = tuple(cfg.layers) if cfg.layers is not None else None
    return DirectionConfig(
        layers=layers,
        positions=tuple(cfg.positions),
        n_resamples=cfg.n_resamples,
        n_permutations=cfg.n_permutations,
        margin=cfg.margin,
        seed=seed,
    )


def measure_run(states: RunStates, cfg: LatentProbeConfig) -> DirectionResult:
    """Direction survival for one run's states (exactly what a direct call of the audit computes)."""
    return direction_survival(
        states.control,
        states.installed,
        {"removed": states.removed, "procedure": states.procedure, "content": states.content},
        {"removed": "removed", "procedure": "procedure_control", "content": "content_control"},
        states.prompts,
        direction_config(cfg, states.seed),
    )


def run_result(run: RunStates, cfg: LatentProbeConfig, model: str, gates: dict[str, bool]) -> RunResult:
    """One run's direction survival over the grid, its cells and its κ (B.3, B.6)."""
    direction = measure_run(run, cfg)
    primary = _primary(direction)
    survival = next(
        f.survival for f in direction.figures if f.role == "removed" and (f.layer, f.position) == primary
    )
    return RunResult(
        model=model,
        model_digest=direction.reference,
        method=run.method,
        seed=run.seed,
        kappa_p=run.kappa_p,
        kappa_retain=run.kappa_retain,
        removal_status=run.removal_status,
        gates=gates,
        recovery=run.recovery,
        control_relearned_p=run.control_relearned_p,
        primary_survival=survival,
        cells=cells_from(direction, all(gates.values()), cfg.margin),
        direction=direction,
    )


def run_study(
    cfg: LatentProbeConfig,
    *,
    log: Callable[[str], None] | None = None,
    keep_states: bool = False,
    states: CheckpointStore | None = None,
    progress: bool = True,
    records: Path | None = None,
    run_id: str = "latent-probe",
) -> tuple[StudyResult, list[object]]:
    """Run every (model, method, seed), one engine cell per run recorded in ``records`` (appended to; None: in
    memory), so a rerun skips the recorded runs without training their states. Returns the result and, with
    ``keep_states``, the states of the runs computed now. ``states``: a folder where the trained states are kept
    and reused by a later run of the same recipes."""
    from remnant.stats import spearman
    from remnant.studies.readmission_run import direction_cell
    from remnant.studies.run_cells import Estimated, record_cells, run_results, study_runs

    kept: list[object] = []

    def estimator(mcfg: LatentProbeConfig, model: str) -> Callable[[RunStates, dict[str, bool]], Estimated]:
        def estimate(run: RunStates, gates: dict[str, bool]) -> Estimated:
            result = run_result(run, mcfg, model, gates)
            if keep_states:
                kept.append(run)
            gated = all(gates.values())
            cells = [direction_cell(c, model, run.method, run.seed, gated) for c in result.cells]
            return Estimated(cells, result.model_dump_json())

        return estimate

    cells = study_runs(
        "latent-probe", "direction", {}, cfg, estimator, log=log, states=states, progress=progress
    )
    runs = run_results(*record_cells(cells, records, run_id, log), RunResult.model_validate_json)
    table = method_table(runs, cfg)
    scored = [r for r in runs if all(r.gates.values()) and r.recovery is not None]
    rho = None
    if len(scored) >= 3:
        rho = spearman([r.primary_survival for r in scored], [float(r.recovery or 0.0) for r in scored])
    decision = decide(table, rho, cfg)
    content, procedure = _overall_nulls(table)
    result = StudyResult(
        config=cfg,
        primary=_primary(runs[0].direction) if runs else (0, cfg.positions[0]),
        table=table,
        content_null=content,
        procedure_null=procedure,
        rho=rho,
        n_rho=len(scored),
        decision=decision,
        note=(
            "Under Standard v0.3 the direction statistic is non-adjudicating whatever this study finds: an "
            "assessor's own validation does not readmit it (C-H6, C-H9). Annex B.6's study found both nulls "
            "failing (demote)."
        ),
        runs=runs,
    )
    return result, kept


def _primary(direction: DirectionResult) -> tuple[int, str]:
    """The primary configuration: the middle layer read and the first position."""
    return direction.layers[len(direction.layers) // 2], direction.positions[0]


def render_markdown(result: StudyResult) -> str:
    """The study's tables in markdown: the B.6 table, the per-run survival/recovery table and the cells."""
    cfg = result.config

    def null(n: NullCell) -> str:
        return f"{fmt_ci(n.survival, n.ci95)} {'held' if n.held else 'failed'}"

    lines = [
        "# Latent-probe study (Standard Annex B design, small scale) — non-adjudicating (C-H6, C-H9)",
        "",
        f"Models: {', '.join(cfg.models)}; methods: {', '.join(cfg.methods)}; seeds: {cfg.seeds}; "
        f"margin δ = {cfg.margin}; a null holds for a method in ≥ {cfg.pass_fraction:.0%} of its evaluable cells.",
        "",
        "| | Evaluable cells | Content null held | Procedure null held | Content null | Procedure null "
        "| Design-stable |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in result.table:
        lines.append(
            f"| {r.method} | {r.evaluable_cells} | {r.content_held} | {r.procedure_held} | {r.content_null} "
            f"| {r.procedure_null} | {'yes' if r.design_stable else 'no'} |"
        )
    lines += [
        "",
        f"Content null: **{result.content_null}**. Procedure null: **{result.procedure_null}**. "
        f"Survival vs relearning recovery: ρ = {fmt(result.rho)} over {result.n_rho} runs. "
        f"Decision (B.4): **{result.decision}**.",
        "",
        result.note,
        "",
        f"Primary configuration: layer {result.primary[0]}, position {result.primary[1]}.",
        "",
        "| Model | Method | Seed | κ_P installed | κ_P removed | retain κ removed/installed | gates | "
        "survival (primary) | recovery | control relearned κ_P |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in result.runs:
        failed = [k for k, v in run.gates.items() if not v]
        lines.append(
            f"| {Path(run.model).name} | {run.method} | {run.seed} | {fmt(run.kappa_p['installed'])} "
            f"| {fmt(run.kappa_p['removed'])} "
            f"| {fmt(run.kappa_retain['removed'])}/{fmt(run.kappa_retain['installed'])} "
            f"| {'passed' if not failed else 'failed: ' + ', '.join(failed)} | {fmt(run.primary_survival)} "
            f"| {fmt(run.recovery)} | {fmt(run.control_relearned_p)} |"
        )
    lines += [
        "",
        "| Model | Method | Seed | Layer | Position | ‖u‖ / floor | removed | procedure control [CI] "
        "| content control [CI] | evaluable |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in result.runs:
        for c in run.cells:
            lines.append(
                f"| {Path(run.model).name} | {run.method} | {run.seed} | {c.layer} | {c.position} "
                f"| {c.signature:.3g} / {c.floor:.3g} | {c.survival_removed:.3f} | {null(c.procedure)} "
                f"| {null(c.content)} | {'yes' if c.evaluable else 'no'} |"
            )
    return "\n".join(lines) + "\n"


__all__ = [
    "PRESETS",
    "CellReading",
    "LatentProbeConfig",
    "MethodRow",
    "ModelSettings",
    "NullCell",
    "RunResult",
    "StudyResult",
    "cells_from",
    "decide",
    "measure_run",
    "method_table",
    "render_markdown",
    "resolve_config",
    "run_study",
]
