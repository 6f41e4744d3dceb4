"""Building one job's checkpoints into the store: an install (P-pool strength or N-pool retain-only) or a removal.

The steps are the states builder's (:func:`remnant.states.builder.train_install`, ``train_removal``): nothing
here trains by itself. An install trains the base model on the pack's install split — all of it, or (``share``
< 1) the retained people and that share of the forget people (``share`` 0: the retain-only model, the N-pool). A
removal applies a registered method to its parent checkpoint, storing its final weights and every declared
intermediate checkpoint. A run that diverges is stored as a *diverged* outcome (Annex B.6), not an error; a build
that raises stores nothing, so a rerun builds it again. A job whose checkpoints are all stored and trusted
(pinned by the sweep's records, or built by this run: remnant.sweep.pins) is skipped; a stored checkpoint nothing
pins is built again. A build reports the pin (status, weights digest) of every checkpoint it stored, for the
driver to record (R23).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from remnant.sweep.context import WorkerContext
from remnant.sweep.pool import Job

if TYPE_CHECKING:
    import torch

    from remnant.train.loop import CheckpointPoint
    from remnant.train.methods.base import QA


@dataclass(frozen=True)
class BuildResult:
    """What building one job did: ``built``, ``reused`` (all stored before) or ``failed`` (with the error);
    ``pins``: checkpoint key -> pin (remnant.sweep.pins.Pin as JSON) of every checkpoint this call stored, its
    parents' included."""

    job: str
    status: str
    models: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    seconds: float = 0.0
    pins: dict[str, dict[str, object]] = field(default_factory=dict)


def _install_items(ctx: WorkerContext, share: float) -> tuple[QA, ...]:
    """The install split's QA items, keeping the first ``share`` of the forget people (by entity id)."""
    from remnant.train.data import as_qa

    pack = ctx.pack
    forget = sorted(e.id for e in pack.manifest.entities if e.role in ("forget_probe", "forget_relearn"))
    seen = set(forget[: round(share * len(forget))])
    items = [it for it in pack.split("install") if it.entity_id not in forget or it.entity_id in seen]
    return as_qa(items, ctx.attributes)


def _meta(ctx: WorkerContext, job: Job, point: str, **extra: object) -> dict[str, Any]:
    """The meta of ``job``'s checkpoint at ``point`` (its parent: the state the job starts from)."""
    from pathlib import Path

    from remnant.records import RECORDS_FILE

    model = next(m for m in ctx.pool.models if m.job == job.key and m.checkpoint == point)
    # where the pin will be recorded, so another sweep reusing the checkpoint can find it (remnant.sweep.pins);
    # the driver resolved the folder: a task never looks at the driver's disk
    built_by = {"records": str(Path(ctx.ws.out) / RECORDS_FILE), "run": ctx.ws.token}
    return {
        "key": model.state,
        "job": job.key,
        "checkpoint": point,
        "parent": None if job.parent is None else ctx.pool.model(job.parent).state,
        "model": model.id,
        **({"built_by": built_by} if ctx.ws.token else {}),
        **extra,
    }


def _build_install(ctx: WorkerContext, job: Job) -> dict[str, str]:
    from remnant.states.builder import train_install
    from remnant.sweep.weights import changed_tensors
    from remnant.train.install import InstallSpec

    recipe = dict(job.recipe)
    seed, share = int(recipe.pop("seed")), float(recipe.pop("share"))
    base = ctx.load_base()
    before = {k: v.detach().clone() for k, v in base.state_dict().items()}
    spec = InstallSpec(**{**recipe, "trainable": tuple(recipe["trainable"]) if recipe["trainable"] else None})
    items = _install_items(ctx, share)
    model, result = train_install(base, ctx.tokenizer(), items, spec, seed, ctx.fmt())
    built = {k: v for k, v in result.to_dict().items() if k not in ("outcome", "curve")}
    built.update(items=len(items), steps=result.steps, outcome_status=result.outcome.status)
    if result.outcome.diverged:
        return {"final": _diverged(ctx, job, "final", result.outcome.reason, build=built)}
    return {"final": _keep(ctx, job, "final", model, changed_tensors(model, before), build=built)}


@dataclass
class _Marks:
    """Snapshots of the trained weights at declared epochs (and the final LoRA adapter)."""

    epochs: dict[str, float]
    lora: bool
    taken: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)
    last_adapter: dict[str, torch.Tensor] | None = None

    def __call__(self, model: torch.nn.Module, point: CheckpointPoint) -> dict[str, object]:
        from remnant.sweep.weights import lora_tensors

        if self.lora:
            self.last_adapter = lora_tensors(model)
        if point.epoch > 0:
            per_epoch = round(point.step / point.epoch)
            for mark, epoch in self.epochs.items():
                if mark not in self.taken and point.step == max(1, round(epoch * per_epoch)):
                    snapshot = self.last_adapter if self.lora else _trainable_copy(model)
                    self.taken[mark] = snapshot or {}
        return {}


def _trainable_copy(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().to("cpu").clone() for n, p in model.named_parameters() if p.requires_grad}


def _diverged(ctx: WorkerContext, job: Job, point: str, reason: str | None, **extra: object) -> str:
    """Store the diverged outcome of ``job`` at ``point``: a meta without weights (Annex B.6)."""
    meta = _meta(ctx, job, point, status="diverged", reason=reason, **extra)
    ctx.store.put(meta["key"], lambda tmp: meta)
    return "diverged"


def _keep(
    ctx: WorkerContext,
    job: Job,
    point: str,
    model: torch.nn.Module,
    tensors: Any,
    lora: Mapping[str, object] | None = None,
    **extra: object,
) -> str:
    """Store ``model`` as ``job``'s checkpoint at ``point``: ``tensors``, its adapter (``lora``: the adapter's
    configuration) or what differs from the parent, with the digest of ``model``'s weights."""
    from remnant.models.identity import weights_digest_of
    from remnant.sweep.weights import save_checkpoint

    meta = _meta(ctx, job, point, status="ok", weights_digest=weights_digest_of(model), **extra)
    if lora is not None:
        meta["lora"] = lora
    save_checkpoint(ctx.store, meta["key"], meta, tensors, "delta" if lora is None else "lora")
    return "ok"


def _build_removal(ctx: WorkerContext, job: Job) -> dict[str, str]:
    from remnant import registry
    from remnant.states.builder import train_removal
    from remnant.sweep.weights import changed_tensors
    from remnant.train.data import removal_data

    method = registry.create("method", job.recipe["method"]["name"], job.recipe["method"]["params"])
    start = ctx.load_model(ctx.pool.model(str(job.parent)))
    before = {k: v.detach().clone() for k, v in start.state_dict().items()}
    marks = {m: float(m.split("=")[1]) for m in job.recipe["checkpoints"]}
    lora_spec = None
    if getattr(method, "lora_rank", None) is not None and method.kind != "procedure":
        cfg = method.train_config(seed=int(job.recipe["seed"]))
        lora_spec = {
            "rank": cfg.lora.rank,
            "alpha": cfg.lora.alpha,
            "targets": cfg.lora.targets,
            "seed": cfg.seed,
        }
    snap = _Marks(marks, lora_spec is not None)
    overrides = {"checkpoint_epochs": tuple(sorted(marks.values()))} if marks else None
    model, result = train_removal(
        method,
        copy.deepcopy(start),
        ctx.tokenizer(),
        removal_data(ctx.pack, ctx.attributes),
        seed=int(job.recipe["seed"]),
        fmt=ctx.fmt(),
        control=ctx.load_base() if method.needs_control else None,
        overrides=overrides,
        on_checkpoint=snap,
    )
    statuses: dict[str, str] = {}
    for mark in marks:
        if mark not in snap.taken:
            why = f"the run ended at step {result.outcome.steps} before {mark} ({result.outcome.status})"
            statuses[mark] = _diverged(ctx, job, mark, why)
            continue
        snapshot = snap.taken[mark]
        if lora_spec is not None:
            # rebuild the checkpoint's merged weights from its adapter for the digest: what loading will give
            from remnant.sweep.weights import merge_adapter, wrap_lora

            ckpt, tensors = merge_adapter(wrap_lora(copy.deepcopy(start), lora_spec), snapshot), snapshot
        else:
            ckpt = copy.deepcopy(start)
            ckpt.load_state_dict(snapshot, strict=False)
            tensors = changed_tensors(ckpt, before)
        statuses[mark] = _keep(ctx, job, mark, ckpt, tensors, lora_spec)
    if result.outcome.diverged:
        statuses["final"] = _diverged(ctx, job, "final", result.outcome.reason)
        return statuses
    last = snap.last_adapter if lora_spec is not None else changed_tensors(model, before)
    statuses["final"] = _keep(ctx, job, "final", model, last, lora_spec)
    return statuses


def _stored(ctx: WorkerContext, job: Job) -> dict[str, str] | None:
    """The status of each of the job's models when every checkpoint is stored and trusted (pinned, or built by
    this run: remnant.sweep.pins), else None (the job is built, replacing what nothing pins)."""
    out: dict[str, str] = {}
    for m in ctx.pool.models:
        if m.job == job.key:
            meta = ctx.trusted_meta(m.state)
            if meta is None:
                return None
            out[m.id] = meta.status
    return out


def _pins(ctx: WorkerContext, job: Job) -> dict[str, dict[str, object]]:
    """The pins of the checkpoints ``job`` just stored: this build's own measurement, for the driver to record.
    A checkpoint this sweep had pinned (its store entry lost or untrusted) must be rebuilt to the same weights:
    the sweep's recorded cells were measured on those (R23)."""
    from remnant.errors import IntegrityError
    from remnant.sweep.pins import pin_of

    out: dict[str, dict[str, object]] = {}
    for m in ctx.pool.models:
        if m.job != job.key:
            continue
        pin = pin_of(ctx.store.meta(m.state))
        pinned = ctx.ws.pins.get(m.state)
        if pinned is not None and pinned != pin:
            raise IntegrityError(
                f"{ctx.store.where(m.state)}: rebuilding {m.id} gave other weights than the ones the records of "
                f"the sweep in {ctx.ws.out} pin, and its recorded cells were measured on those (use a new --out)",
                requirement="R23",
            )
        out[m.state] = pin.model_dump(mode="json")
    return out


def build_job(ctx: WorkerContext, job_key: str) -> BuildResult:
    """Build ``job_key``'s checkpoints (its parent's first) unless stored. A diverged run is a stored outcome;
    an exception (out of memory, a bug) propagates to the executor, which retries the task and then records it
    as failed, and nothing is stored."""
    job = ctx.pool.jobs[job_key]
    if job.kind in ("base", "folder"):
        return BuildResult(job_key, "reused", {m: "ok" for m in job.models})
    stored = _stored(ctx, job)
    if stored is not None:
        return BuildResult(job_key, "reused", stored)
    start = time.perf_counter()
    pins: dict[str, dict[str, object]] = {}
    if job.parent is not None:
        parent = build_job(ctx, ctx.pool.model(job.parent).job)
        pins.update(parent.pins)
        if parent.status == "failed" or parent.models.get(job.parent) != "ok":
            why = f"its parent {job.parent} was not built ({parent.error or parent.models.get(job.parent)})"
            return BuildResult(job_key, "failed", error=why, pins=pins)
    with ctx.store.lock(job_key):
        stored = _stored(ctx, job)
        if stored is not None:
            return BuildResult(job_key, "reused", stored, pins=pins)
        statuses = _build_install(ctx, job) if job.kind == "install" else _build_removal(ctx, job)
        pins.update(_pins(ctx, job))
    models = {m.id: statuses[m.checkpoint] for m in ctx.pool.models if m.job == job_key}
    return BuildResult(job_key, "built", models, seconds=time.perf_counter() - start, pins=pins)


__all__ = ["BuildResult", "build_job"]
