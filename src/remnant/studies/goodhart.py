"""``remnant study goodhart``: remove a target while also minimising an audit, then attack (the J-Access paper, Test 3).

On a base (never-modified) model and a Class D pack: install the pack (R2), then for every penalty weight λ and
seed run the base removal method with λ × the audit surrogate (:mod:`.goodhart_objective`), read the real audit
on the result (J-Access: JOcc between the installed and never-modified anchors on the scored P probes; UDS with
the installed model as full and the never-modified one as retain), score κ on P and on the retained items, and
relearn the result and the never-modified control on R (held-out entities, §4.2, C-W5) to read how much of the
removed gap comes back. :func:`remnant.studies.goodhart_core.summarise` reads the trend. The states, data and
recipes are the latent-probe design's (:mod:`remnant.studies.latent_probe_states`, presets ``tiny`` and ``cpu``),
every state from the one states builder (:mod:`remnant.states.builder`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from remnant.studies.config import GoodhartConfig
from remnant.studies.goodhart_core import GoodhartResult, GoodhartRow, summarise
from remnant.studies.latent_probe_states import (
    installed_state,
    load_study,
    p_items,
    rate_of,
    recovery,
    relearned,
    removal_method,
    removal_state,
)

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from remnant.latent.jacobian_lens import JacobianLens
    from remnant.states.store import CheckpointStore

Log = Callable[[str], None]

#: Audit and surrogate settings per preset (tiny: the test model's 2 blocks and 512-word vocabulary).
AUDIT_DEFAULTS: dict[str, dict[str, Any]] = {
    "tiny": {"k": 20, "positions": 4, "lens": "logit", "tau": 0.05, "probe_batch": 4},
    "cpu": {"k": 10, "positions": 8, "lens": "logit", "tau": 0.05, "probe_batch": 8},
}


class _Setup:
    """The data and scorers shared by every (λ, seed) run: the latent-probe design's study
    (:func:`remnant.studies.latent_probe_states.load_study`); :meth:`install` adds its installed state at the
    first seed, when the first run not yet recorded needs it."""

    def __init__(
        self,
        cfg: GoodhartConfig,
        model: str,
        pack_dir: str | None,
        states: CheckpointStore | None,
        progress: bool = True,
    ) -> None:
        from remnant.packs.schema import load_pack
        from remnant.studies.latent_probe import resolve_config

        overrides = {**cfg.design, "methods": [cfg.base_method]}
        self.design = d = resolve_config([model], preset=cfg.preset, overrides=overrides).for_model(model)
        pack = load_pack(pack_dir) if pack_dir is not None else None
        self.study = study = load_study(model, d, pack, states, progress)
        self.tokenizer, self.control, self.fmt = study.tokenizer, study.control, study.fmt
        self.pack = study.pack
        self.p_items = p_items(self.pack, d)
        self.forget_items = [it for it in self.pack.split("removal") if it.attribute in set(d.attributes)]
        self.lens: JacobianLens | None = None  # the installed model's Jacobian lens, fitted on first use

    def install(self, seed: int) -> None:
        """The pack installed into the control (R2) at ``seed``, with its κ on P and on the retained items."""
        self.installed_state = installed_state(self.study, seed)
        self.installed = self.installed_state.model
        self.installed_p = rate_of(self.study.score_p(self.installed))
        self.installed_r = rate_of(self.study.score_retain(self.installed))


def _surrogate(cfg: GoodhartConfig, s: _Setup, params: dict[str, Any]) -> tuple[Any, str]:
    """The audit surrogate over the forget items, aligned with the removal data's order."""
    from remnant.latent.uds import n_blocks
    from remnant.studies.goodhart_objective import AccessSurrogate, PatchSurrogate

    layers = list(params.get("layers") or s.design.layers or range(n_blocks(s.installed)))
    if cfg.audit == "j_access":
        from remnant.latent.jaccess import answer_probes

        probes = answer_probes(s.tokenizer, s.forget_items, s.fmt)
        lens = _lens(s, params)
        matrices = lens.matrices if lens is not None else None
        return AccessSurrogate(probes, layers, int(params["positions"]), matrices), (
            f"soft maximum over layers {layers} and the last {params['positions']} prompt positions of the "
            f"log concept-token mass through the {params['lens']} lens, mean over forget probes (floored at 1e-6)"
        )
    from remnant.latent.inputs import encode_example, examples_from_items
    from remnant.latent.uds import UDSConfig, stage1
    from remnant.train.removal import frozen_copy

    by_id = {e.idx: e for e in examples_from_items(s.forget_items)}
    encoded = [
        encode_example(s.tokenizer, by_id[it.id], "chat", s.design.system_prompt) if it.id in by_id else None
        for it in s.forget_items
    ]
    s1 = stage1(
        s.installed,
        s.control,
        s.tokenizer,
        list(by_id.values()),
        UDSConfig(layers=tuple(layers), prompt_format="chat", system_prompt=s.design.system_prompt),
    )
    tau = float(params["tau"])
    ke = [
        layer for j, layer in enumerate(s1.layers) if sum(r[j] for r in s1.d1) / max(len(s1.d1), 1) > tau
    ] or list(s1.layers)
    return PatchSurrogate(frozen_copy(s.installed), encoded, ke), (
        f"mean entity log-prob of the frozen installed model with the trained model's block output patched over "
        f"the entity span at KE layers {ke} (mean Δ1 > {tau:g}), forget examples"
    )


def _lens(s: _Setup, params: dict[str, object]) -> JacobianLens | None:
    """The installed model's Jacobian lens (fitted once, on the retained questions), or None for the logit lens."""
    if params.get("lens", "logit") != "jacobian":
        return None
    if s.lens is None:
        from remnant.latent.jacobian_lens import LensConfig, fit_lens
        from remnant.models.prompts import render_prompt_ids

        prompts = [render_prompt_ids(s.tokenizer, q.question, s.fmt) for q in s.study.data.retain]
        s.lens = fit_lens(s.installed, prompts, LensConfig())
    return s.lens


def _audit(cfg: GoodhartConfig, s: _Setup, removed: PreTrainedModel, params: dict[str, Any]) -> float | None:
    """The real audit on the removed model (J-Access JOcc, or UDS) over the scored P items."""
    if cfg.audit == "j_access":
        from remnant.latent.jaccess import AccessConfig, answer_probes, j_occ, read_access

        probes = answer_probes(s.tokenizer, s.p_items, s.fmt)
        layers = tuple(params.get("layers") or s.design.layers or ())
        acfg = AccessConfig(k=int(params["k"]), layers=layers or None, positions=int(params["positions"]))
        lens = _lens(s, params)
        reads = [read_access(m, s.tokenizer, probes, lens, acfg) for m in (removed, s.installed, s.control)]
        return j_occ(*reads).jocc
    from remnant.latent.inputs import examples_from_items
    from remnant.latent.uds import UDSConfig, uds

    ucfg = UDSConfig(tau=float(params["tau"]), prompt_format="chat", system_prompt=s.design.system_prompt)
    return uds(s.installed, s.control, removed, s.tokenizer, examples_from_items(s.p_items), ucfg).score


def _one_run(
    cfg: GoodhartConfig,
    s: _Setup,
    surrogate: PreTrainedModel,
    weight: float,
    seed: int,
    params: dict[str, Any],
) -> GoodhartRow:
    import torch

    from remnant.studies.goodhart_objective import AuditPenalty

    base_params = {**s.design.method_params.get(cfg.base_method, {}), **cfg.method_params}
    base = removal_method(s.study, cfg.base_method, base_params)
    method = AuditPenalty(base, weight, surrogate, cfg.audit)
    what = f"removal {cfg.base_method} with the {cfg.audit} penalty"
    state = removal_state(
        s.study, method, s.installed_state, seed, "removed", f"goodhart-{weight:g}-s{seed}", what
    )
    removed, status = state.model, str(cast(dict[str, Any], state.record["removal"])["outcome"]["status"])
    removed_p = rate_of(s.study.score_p(removed))
    row: dict[str, Any] = {
        "weight": weight,
        "seed": seed,
        "status": status,
        "kappa_forget": removed_p,
        "kappa_forget_installed": s.installed_p,
        "kappa_retain": rate_of(s.study.score_retain(removed)),
        "kappa_retain_installed": s.installed_r,
        "audit": None,
        "surrogate_final": None,
        "relearned": None,
        "recovery": None,
        "control_relearned": None,
    }
    if status != "completed":
        return GoodhartRow(**row)
    row["audit"] = _audit(cfg, s, removed, params)
    with torch.no_grad():
        row["surrogate_final"] = float(surrogate(removed, range(len(s.forget_items))))
    row["relearned"], row["control_relearned"] = relearned(s.study, s.design, removed, seed)
    row["recovery"] = recovery(s.installed_p, removed_p, row["relearned"])
    return GoodhartRow(**row)


def run_goodhart(
    cfg: GoodhartConfig,
    model: str,
    *,
    pack: str | None = None,
    log: Log | None = None,
    states: CheckpointStore | None = None,
    progress: bool = True,
    records: Path | None = None,
    run_id: str = "goodhart",
) -> GoodhartResult:
    """Every (λ, seed) run and the reading (module docstring), one engine cell per run recorded in ``records``
    (appended to; None: in memory), so a rerun skips the recorded runs without installing or training anything;
    ``states``: where trained states are kept and reused by a later run of the same recipes."""
    from functools import cache

    from remnant.engine.measurement import StateView
    from remnant.studies.run_cells import RowMeasurement, record_cells, run_results

    say = log or (lambda _m: None)
    params = {**AUDIT_DEFAULTS[cfg.preset or "cpu"], **cfg.audit_params}
    setup = _Setup(cfg, model, pack, states, progress)

    @cache
    def surrogate() -> tuple[Any, str]:
        say(f"{model}: installing the pack")
        setup.install(min(cfg.seeds))
        return _surrogate(cfg, setup, params)

    def row(weight: float, seed: int) -> tuple[float | None, str]:
        penalty, description = surrogate()
        say(f"λ = {weight:g}, seed {seed}: removal with the {cfg.audit} penalty, audit, relearning")
        out = _one_run(cfg, setup, penalty, weight, seed, params)
        return out.audit, json.dumps({"row": out.model_dump(mode="json"), "surrogate": description})

    key = {
        "model": model,
        "pack": setup.pack.digest,
        "design": setup.design.model_dump(mode="json"),
        "base_method": cfg.base_method,
        "method_params": cfg.method_params,
        "installed_seed": min(cfg.seeds),
    }
    component: dict[str, object] = {"name": cfg.audit, "params": params}
    runs = [
        RowMeasurement(
            "goodhart",
            component,
            {**key, "weight": w, "seed": sd},
            f"λ = {w:g}, seed {sd}",
            partial(row, w, sd),
        )
        for w in cfg.weights
        for sd in cfg.seeds
    ]
    origin = StateView("post_removal", setup.study.builder.origin.state.digest)
    done = run_results(*record_cells(((run, origin) for run in runs), records, run_id, say), _recorded_row)
    rows = [row for row, _ in done]
    return GoodhartResult(
        config=cfg,
        surrogate=done[0][1] if done else "",
        rows=rows,
        provenance={
            "model": model,
            "pack": pack if pack is not None else "minted from the design's pack settings",
            "pack_digest": setup.pack.digest,
            "design": setup.design.model_dump(mode="json"),
            "audit_params": params,
        },
        **summarise(rows, cfg),
    )


def _recorded_row(text: str) -> tuple[GoodhartRow, str]:
    """A run's row and the surrogate's description, as :func:`run_goodhart` records them."""
    data = json.loads(text)
    return GoodhartRow.model_validate(data["row"]), str(data["surrogate"])


__all__ = ["AUDIT_DEFAULTS", "run_goodhart"]
