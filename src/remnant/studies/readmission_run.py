"""The readmission study's model side: Annex B's states, read by the direction, UDS or J-Access estimator.

Builds on ``remnant study latent-probe``: the states of every (model, method, seed) run come from
:func:`remnant.studies.latent_probe_states.planned_runs` (never-modified, installed, content-shuffled install,
installed-then-removed, never-installed-but-removal-applied, and the relearning criterion), with the removal gates
of :meth:`~remnant.studies.latent_probe_states.RunStates.gates`; the direction estimator is that study's own measurement
(:func:`remnant.studies.latent_probe.measure_run`, :func:`~remnant.studies.latent_probe.cells_from`). UDS and J-Access are read
on the same states, each normalised as Annex B.3 step 2 asks (installed = 1, never-modified = 0):

* **UDS** (the UDS paper): full = installed, retain = never-modified, so a state's reading is 1 − UDS(state). A cell
  is one block layer l and one τ (the KE threshold, UDS's fitted setting, C-H4): 1 − mean LER_l over the
  examples whose Δ1 at l exceeds τ; the interval is a percentile bootstrap over those examples. The patched
  position is the entity span (UDS's only position in this implementation). Examples: the scored P facts.
* **J-Access** (the J-Access paper): JOcc with θ_0 = installed, θ_g = never-modified, read through the logit lens or the
  installed model's Jacobian lens (fixed decoder); a cell is one layer (a band of one), one readout-position
  count and one k; the interval bootstraps probes (JOcc recomputed on each resample's silent subset).
  Probes: remnant's answer-level probes on P ([R]: the paper's identity-level probes need the pack's
  description templates; recorded in the provenance).

A cell is evaluable when its run cleared the gates and the estimator has a signature there (UDS: at least two
KE examples at that layer; J-Access: the anchors differ on the removed model's silent probes). Bootstrap
generators derive from the run's seed (``derive_seed``), never from global state. Each run is one engine cell
(:mod:`remnant.studies.run_cells`): its figures are readings in the study's records, and a rerun skips the runs
already recorded without training their states.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from remnant.statement.canonical import derive_seed
from remnant.studies.config import ReadmissionConfig
from remnant.studies.latent_probe_states import RunStates, p_items
from remnant.studies.readmission import Cell, Cells, Reading

if TYPE_CHECKING:
    from remnant.latent.jaccess import Probe
    from remnant.latent.jacobian_lens import JacobianLens
    from remnant.states.store import CheckpointStore
    from remnant.studies.latent_probe import CellReading, LatentProbeConfig
    from remnant.studies.run_cells import Estimate

Log = Callable[[str], None]
UDS_TAUS = (0.03, 0.05, 0.1)
JACCESS_KS = (5, 10, 20)
JACCESS_POSITIONS = (1, 8)
N_RESAMPLES = 1000


def design_config(cfg: ReadmissionConfig) -> LatentProbeConfig:
    """The latent-probe design (B.2) with the rule's thresholds, so the two never disagree."""
    from remnant.studies.latent_probe import resolve_config

    design = dict(cfg.design)
    models = list(design.pop("models", []))
    overrides = {**design, "margin": cfg.rule.margin, "pass_fraction": cfg.rule.pass_fraction}
    overrides["rho_min"] = cfg.rule.rho_min
    return resolve_config(models, preset=cfg.preset, overrides=overrides)


def _bootstrap(
    stat: Callable[[np.ndarray], float], n: int, rng: np.random.Generator
) -> tuple[float, tuple[float, float]]:
    """``stat`` over all ``n`` examples (by index) and its percentile 95 % interval over N_RESAMPLES resamples of
    them, NaN draws left out (NaN bounds when every draw is NaN)."""
    draws = [stat(rng.integers(0, n, size=n)) for _ in range(N_RESAMPLES)]
    kept = np.asarray([d for d in draws if not math.isnan(d)], dtype=np.float64)
    lo, hi = np.quantile(kept, [0.025, 0.975]) if kept.size else (math.nan, math.nan)
    return stat(np.arange(n)), (float(lo), float(hi))


# -- direction ---------------------------------------------------------------------------------------------------


def direction_cells(
    states: RunStates, mcfg: LatentProbeConfig, model: str, gated: bool, params: dict[str, Any]
) -> list[Cell]:
    """The latent-probe study's own cells, as readmission cells (no parameter, no fitted hyper-parameter:
    setting '-')."""
    from remnant.studies.latent_probe import cells_from, measure_run

    readings = cells_from(measure_run(states, mcfg), gated, mcfg.margin)
    return [direction_cell(c, model, states.method, states.seed, gated) for c in readings]


def direction_cell(c: CellReading, model: str, method: str, seed: int, gated: bool) -> Cell:
    """One latent-probe cell as a readmission cell."""
    return _cell(
        model,
        method,
        seed,
        (gated, c.evaluable, "signature below its floor"),
        layer=c.layer,
        position=c.position,
        removed=c.survival_removed,
        procedure=Reading(value=c.procedure.survival, ci95=c.procedure.ci95),
        content=Reading(value=c.content.survival, ci95=c.content.ci95),
    )


def _cell(model: str, method: str, seed: int, why: tuple[bool, bool, str], **at: Any) -> Cell:
    """One run's cell at ``at`` (layer, position, setting and the readings), ``why`` = (the run cleared its
    gates, the estimator has a signature there, what to say when it has none): evaluable when both hold."""
    gated, signature, no_signature = why
    return Cell(
        model=model,
        method=method,
        seed=seed,
        **at,
        evaluable=gated and signature,
        note=None if gated and signature else ("run failed its gates" if not gated else no_signature),
    )


# -- UDS ---------------------------------------------------------------------------------------------------------


def _uds_reading(
    d1: np.ndarray, d2: np.ndarray, tau: float, rng: np.random.Generator
) -> tuple[float | None, tuple[float, float] | None, int]:
    """1 − mean LER over the KE examples of one layer, with a bootstrap interval; (None, None, n) below two."""
    ke = d1 > tau
    n = int(ke.sum())
    if n < 2:
        return None, None, n
    ler = np.clip(d2[ke] / d1[ke], 0.0, 1.0)
    value, ci = _bootstrap(lambda i: 1.0 - float(ler[i].mean()), n, rng)
    return value, ci, n


def uds_cells(
    states: RunStates, mcfg: LatentProbeConfig, model: str, gated: bool, params: dict[str, Any]
) -> list[Cell]:
    """UDS per (layer, τ) for the removed model and both controls (module docstring)."""
    from remnant.latent.inputs import examples_from_items
    from remnant.latent.uds import UDSConfig, score_source, stage1

    taus = tuple(float(t) for t in params.get("taus", UDS_TAUS))
    tokenizer = states.tokenizer
    examples = examples_from_items(p_items(states.pack, mcfg))
    ucfg = UDSConfig(
        tau=min(taus),
        layers=tuple(mcfg.layers) if mcfg.layers is not None else None,
        prompt_format="chat",
        system_prompt=mcfg.system_prompt,
    )
    s1 = stage1(states.installed, states.control, tokenizer, examples, ucfg)
    d1 = np.asarray(s1.d1, dtype=np.float64)  # [examples, layers]
    d2 = {
        role: np.asarray(
            [e.d2 for e in score_source(states.installed, source, s1, ucfg).examples], dtype=np.float64
        )
        for role, source in (
            ("removed", states.removed),
            ("procedure", states.procedure),
            ("content", states.content),
        )
    }
    cells = []
    for j, layer in enumerate(s1.layers):
        for tau in taus:
            readings: dict[str, tuple[float | None, tuple[float, float] | None, int]] = {}
            for role, values in d2.items():
                rng = np.random.default_rng(
                    derive_seed(states.seed, "readmission", "uds", role, layer, f"tau={tau:g}")
                )
                readings[role] = _uds_reading(d1[:, j], values[:, j], tau, rng)
            value, _, n_ke = readings["removed"]
            cells.append(
                _cell(
                    model,
                    states.method,
                    states.seed,
                    (gated, n_ke >= 2, f"{n_ke} KE example(s)"),
                    layer=layer,
                    position="entity span",
                    setting=f"tau={tau:g}",
                    removed=value,
                    procedure=_reading(readings["procedure"]),
                    content=_reading(readings["content"]),
                )
            )
    return cells


def _reading(r: tuple[float | None, tuple[float, float] | None, int]) -> Reading | None:
    value, ci, _ = r
    return Reading(value=value, ci95=ci) if value is not None and ci is not None else None


# -- J-Access ----------------------------------------------------------------------------------------------------


def _jocc(
    hit: np.ndarray, silent: np.ndarray, hit_o: np.ndarray, hit_g: np.ndarray, idx: np.ndarray
) -> float:
    from remnant.latent.jaccess import jocc_ratio

    s = idx[silent[idx]]
    if s.size == 0:
        return math.nan
    jocc = jocc_ratio(float(hit[s].mean()), float(hit_o[s].mean()), float(hit_g[s].mean()))
    return math.nan if jocc is None else jocc


#: The states J-Access reads: the three Annex B.3 states and the anchors (θ_0 installed, θ_g never-modified).
JACCESS_ROLES = ("removed", "procedure", "content", "installed", "control")
#: The states a J-Access cell reports, normalised against the anchors.
JACCESS_READ = ("removed", "procedure", "content")


def _jaccess_role_reading(
    states: RunStates,
    role: str,
    hits: dict[str, Any],
    said: list[bool],
    probes: Sequence[Probe],
    setting: tuple[int, int, int],
) -> tuple[float | None, tuple[float, float]]:
    """One state's JOcc over its silent probes, with a bootstrap interval over probes seeded from the run's
    seed and the cell (``setting`` = layer, positions, k)."""
    from remnant.latent.jaccess import is_silent

    silent = np.asarray([is_silent(e, len(p.concept_ids)) for e, p in zip(said, probes, strict=True)])
    rng = np.random.default_rng(derive_seed(states.seed, "readmission", "j_access", role, *setting))
    value, ci = _bootstrap(
        lambda i: _jocc(hits[role], silent, hits["installed"], hits["control"], i), len(probes), rng
    )
    return (None if math.isnan(value) else value, ci)


def _jaccess_cell(
    states: RunStates,
    model: str,
    gated: bool,
    setting: tuple[int, int, int],
    readings: dict[str, tuple[float | None, tuple[float, float]]],
) -> Cell:
    """The cell of one (layer, positions, k): evaluable when the run cleared its gates and the anchors differ
    on the removed model's silent probes."""
    layer, positions, k = setting
    removed = readings["removed"][0]
    return _cell(
        model,
        states.method,
        states.seed,
        (gated, removed is not None, "anchors tie"),
        layer=layer,
        position=f"last {positions}",
        setting=f"k={k}",
        removed=removed,
        procedure=_jreading(readings["procedure"]),
        content=_jreading(readings["content"]),
    )


def jaccess_cells(
    states: RunStates, mcfg: LatentProbeConfig, model: str, gated: bool, params: dict[str, Any]
) -> list[Cell]:
    """J-Access (JOcc) per (layer, positions, k) for the removed model and both controls (module docstring):
    remnant's answer-level probes on the scored P facts, in the design's prompt format, read through the logit
    lens or, with ``lens = "jacobian"``, the installed model's Jacobian lens."""
    from remnant.latent.jaccess import AccessConfig, answer_probes, emitted_flags, read_access
    from remnant.latent.jacobian_lens import LensConfig, fit_lens
    from remnant.models.prompts import PromptFormat
    from remnant.studies.latent_probe import direction_config

    tokenizer = states.tokenizer
    fmt = PromptFormat.for_tokenizer(tokenizer, system_prompt=mcfg.system_prompt)
    probes = answer_probes(tokenizer, p_items(states.pack, mcfg), fmt)
    lens: JacobianLens | None = None
    if params.get("lens", "logit") == "jacobian":
        lens = fit_lens(states.installed, list(states.prompts), LensConfig())
    models = {role: getattr(states, role) for role in JACCESS_ROLES}
    said = {role: emitted_flags(m, tokenizer, probes) for role, m in models.items()}
    layers = direction_config(mcfg, states.seed).resolve_layers(states.installed)  # 25/50/75 % unless given
    cells = []
    for layer in layers:
        for positions in params.get("positions", JACCESS_POSITIONS):
            for k in params.get("ks", JACCESS_KS):
                acfg = AccessConfig(k=int(k), layers=(layer,), positions=int(positions))
                hits = {
                    role: np.asarray(
                        [
                            p.hit
                            for p in read_access(m, tokenizer, probes, lens, acfg, emitted=said[role]).probes
                        ]
                    )
                    for role, m in models.items()
                }
                setting = (layer, positions, k)
                readings = {
                    role: _jaccess_role_reading(states, role, hits, said[role], probes, setting)
                    for role in JACCESS_READ
                }
                cells.append(_jaccess_cell(states, model, gated, setting, readings))
    return cells


def _jreading(r: tuple[float | None, tuple[float, float]]) -> Reading | None:
    value, ci = r
    if value is None or math.isnan(ci[0]):
        return None
    return Reading(value=value, ci95=ci)


# -- the run -----------------------------------------------------------------------------------------------------

FITTED = {"direction": [], "uds": ["tau"], "j_access": ["k"]}


def run_cells(
    cfg: ReadmissionConfig,
    *,
    log: Log | None = None,
    states: CheckpointStore | None = None,
    records: Path | None = None,
    run_id: str = "readmission",
    progress: bool = True,
) -> Cells:
    """Read the configured estimator on every run of the latent-probe design, one engine cell per run
    (:mod:`remnant.studies.run_cells`): its states are built (kept in and reused from ``states`` when given) only
    when its cell is not in ``records`` (a records file, appended to; None: memory only)."""
    from remnant.studies.run_cells import Estimated, cells_from_readings, record_cells, study_runs

    lp = design_config(cfg)
    params = dict(cfg.estimator_params)
    cells_of = {"direction": direction_cells, "uds": uds_cells, "j_access": jaccess_cells}[cfg.estimator]

    def estimate_for(mcfg: LatentProbeConfig, model: str) -> Estimate:
        """The configured estimator's cells of one of ``model``'s runs (given its gates)."""
        return lambda run, gates: Estimated(cells_of(run, mcfg, model, all(gates.values()), params))

    cells = study_runs(
        "readmission", cfg.estimator, params, lp, estimate_for, log=log, states=states, progress=progress
    )
    cells_read, runs = cells_from_readings(*record_cells(cells, records, run_id, log))
    return Cells(
        estimator=cfg.estimator,
        fitted_hyperparameters=FITTED[cfg.estimator],
        cells=cells_read,
        runs=runs,
        provenance={
            "design": lp.model_dump(mode="json"),
            "estimator_params": params,
            "probes": "answer-level probes on P [R]" if cfg.estimator == "j_access" else None,
        },
    )


__all__ = ["design_config", "direction_cell", "direction_cells", "jaccess_cells", "run_cells", "uds_cells"]
