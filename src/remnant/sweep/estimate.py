"""``remnant sweep plan``'s figures: models, cells, time on this CPU and on a GPU, and disk, before anything runs.

Time is counted in floating-point work: a forward pass costs 2·P FLOPs a token (P parameters), a training step
(2 + 4·f)·P a token (f: the share of parameters trained, LoRA about 1 %), a greedy token
:data:`GENERATION_FACTOR` times a scored one; the work of each build and measurement follows from the pack's
sizes, the recipes and the suite (installs are counted at their epoch ceiling, so the figure is an upper bound
there). This CPU's speed is measured on the spot (a float32 matmul), scaled by :data:`CPU_EFFICIENCY` — the share
of the matmul peak remnant's passes reach here (SmolLM2 forwards were measured at about 0.7 of it); a GPU is
assumed to run :data:`GPU_FLOPS` with :data:`GPU_STEP_OVERHEAD` seconds of launch overhead a step. Disk counts
what a missing checkpoint stores: the parameters its recipe trains (a delta), or its LoRA adapter.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from remnant.sweep.cells import NF4, RELEARN, perturbations
from remnant.sweep.pool import Job

if TYPE_CHECKING:
    from remnant.sweep.prepare import Prepared
    from remnant.sweep.spec import ExistingSpec, GeneratedSpec
    from remnant.sweep.suite import SuiteData

#: Share of this CPU's measured float32 matmul rate that model passes reach (calibrated on the CPU preset).
CPU_EFFICIENCY = 0.5
#: Greedy generation costs this many scored tokens per generated token (one sequence step at a time).
GENERATION_FACTOR = 2.0
#: Assumed effective GPU rate (a datacenter GPU on small models) and per-step overhead.
GPU_FLOPS = 50e12
GPU_STEP_OVERHEAD = 0.03
#: Prompt tokens a chat template adds around one question and answer (SmolLM2's, with an empty system turn).
TEMPLATE_TOKENS = 24
#: Seconds to load a checkpoint chain from disk (per GB of weights).
LOAD_SECONDS_PER_GB = 2.0


def use_threads(threads: int) -> None:
    """Run this process's torch work on ``threads`` CPU threads (the plan's estimate and the local executor)."""
    import torch

    torch.set_num_threads(threads)


def cpu_flops(seconds: float = 0.3) -> float:
    """This CPU's float32 matmul rate (FLOP/s) over about ``seconds``, at torch's current thread count."""
    import torch

    a = torch.randn(384, 384)
    b = torch.randn(384, 384)
    reps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        reps += 1
    return 2 * 384**3 * reps / (time.perf_counter() - start)


@dataclass
class Work:
    """FLOPs and optimiser steps of one unit of work."""

    flops: float = 0.0
    steps: int = 0

    def add(self, flops: float, steps: int = 0) -> None:
        self.flops += flops
        self.steps += steps

    def train(
        self, sizes: Sizes, items: int, epochs: float, batch: int, share: float, mult: float = 1.0
    ) -> None:
        """``epochs`` over ``items`` in batches of ``batch``, training ``share`` of the parameters."""
        steps = math.ceil(epochs * math.ceil(max(items, 1) / batch))
        self.add(mult * (2 + 4 * share) * sizes.params * sizes.tokens * batch * steps, steps)

    def seconds(self, rate: float, overhead: float) -> float:
        return self.flops / rate + overhead * self.steps


@dataclass(frozen=True)
class Sizes:
    """What the work depends on: parameters (counts and 2-D shapes by name), item counts and tokens per item."""

    params: int
    weights_bytes: int
    tokens: float
    install: int
    forget: int
    retain_train: int
    sequences: int
    rouge_rows: int
    blocks: int
    probes: int
    retain_probes: int
    examples: int
    counts: dict[str, int]
    matrices: dict[str, tuple[int, int]]

    def share(self, patterns: list[str] | None) -> float:
        """The share of the parameters that ``patterns`` (regexes; None: all) train."""
        total = sum(self.counts.values()) or 1
        if not patterns:
            return 1.0
        regexes = [re.compile(p) for p in patterns]
        return sum(n for name, n in self.counts.items() if any(r.search(name) for r in regexes)) / total


def _trained(job: Job, sizes: Sizes) -> tuple[float, int]:
    """The share of the parameters ``job`` trains and its LoRA rank (0: none)."""
    if job.kind == "install":
        return sizes.share(job.recipe["trainable"]), 0
    p = job.recipe["method"]["params"]
    rank = int(p["lora_rank"]) if p.get("lora_rank") else 0
    return (0.01 if rank else sizes.share(p.get("trainable"))), rank


def _build_work(job: Job, sizes: Sizes) -> Work:
    work = Work()
    if job.kind == "install":
        r = job.recipe
        items = (
            sizes.install
            if float(r["share"]) >= 1
            else sizes.retain_train + round(float(r["share"]) * sizes.forget)
        )
        batch = int(r["batch_size"]) * int(r["grad_accum"])
        work.train(sizes, items, int(r["max_epochs"]), batch, _trained(job, sizes)[0])
        work.add(2 * sizes.params * sizes.tokens * items * int(r["max_epochs"]))
    elif job.kind == "removal":
        p = job.recipe["method"]["params"]
        if p.get("vector_source") == "install":  # task arithmetic on stored weights: nothing trains
            return work
        batch = int(p.get("batch_size", 8)) * int(p.get("grad_accum", 1))
        epochs = float(p.get("epochs", 1) or 1)
        # forget and retain batches and a frozen reference's forward: about 2.5 training batches a step
        work.train(sizes, sizes.forget, epochs, batch, _trained(job, sizes)[0], 2.5)
    return work


def _measure_work(spec: GeneratedSpec | ExistingSpec, sizes: Sizes) -> Work:
    suite = spec.suite
    work = Work()
    fwd = 2 * sizes.params * sizes.tokens
    gen = 2 * sizes.params * GENERATION_FACTOR * suite.max_new_tokens
    for p in perturbations(spec):
        if suite.metrics:
            work.add(fwd * sizes.sequences + gen * sizes.rouge_rows)
        if suite.kappa:
            work.add(gen * sizes.probes)
        if suite.utility == "retain_kappa":
            work.add(gen * sizes.retain_probes)
        for name in suite.audits:
            layers = suite.audit_params.get(name, {}).get("layers") or range(sizes.blocks)
            work.add(fwd * sizes.examples * (len(layers) + 2))  # one patched pass a layer
        work.add(gen * sizes.probes * 2 * len(suite.attacks))
        if p == RELEARN:
            r = spec.perturbations.relearn
            work.train(sizes, sizes.forget, r.epochs, r.batch_size * r.grad_accum, sizes.share(r.trainable))
        if p == NF4:
            work.add(20 * sizes.params)
    return work


def checkpoint_bytes(job: Job, sizes: Sizes) -> int:
    """What storing a checkpoint of ``job`` writes: the trained parameters (a delta) or its LoRA adapter."""
    if job.kind not in ("install", "removal"):
        return 0
    share, rank = _trained(job, sizes)
    if rank:
        return 4 * rank * sum(a + b for name, (a, b) in sizes.matrices.items() if ".layers." in name)
    return int(share * sizes.weights_bytes)


@dataclass(frozen=True)
class ModelEstimate:
    """One model: seconds to build (0 when stored) and to measure, on this CPU and on a GPU; bytes to store."""

    model: str
    pool: str
    stored: bool
    cells: int
    cpu_build: float
    cpu_measure: float
    gpu_build: float
    gpu_measure: float
    disk: int


def estimate_models(prepared: Prepared, sizes: Sizes, rate: float) -> list[ModelEstimate]:
    """Per-model estimates (module docstring) at ``rate`` FLOP/s of this CPU."""
    spec, pool = prepared.spec, prepared.pool
    measure = _measure_work(spec, sizes)
    load = LOAD_SECONDS_PER_GB * sizes.weights_bytes / 1e9 * (3 if spec.suite.audits else 1)
    cells_of = Counter(cell.model for cell in prepared.cells)
    out: list[ModelEstimate] = []
    jobs_seen: set[str] = set()
    for model in pool.models:
        stored = model.path is not None or model.pool == "base" or prepared.store.has(model.state)
        first = model.job not in jobs_seen
        jobs_seen.add(model.job)
        job = pool.jobs[model.job]
        build = _build_work(job, sizes) if (first and not stored) else Work()
        out.append(
            ModelEstimate(
                model=model.id,
                pool=model.pool,
                stored=stored,
                cells=cells_of[model.id],
                cpu_build=build.seconds(rate * CPU_EFFICIENCY, 0.0),
                cpu_measure=measure.seconds(rate * CPU_EFFICIENCY, 0.0) + load,
                gpu_build=build.seconds(GPU_FLOPS, GPU_STEP_OVERHEAD),
                gpu_measure=measure.seconds(GPU_FLOPS, GPU_STEP_OVERHEAD) + load / 4,
                disk=0 if stored else checkpoint_bytes(job, sizes),
            )
        )
    return out


def model_shapes(prepared: Prepared) -> dict[str, tuple[int, ...]]:
    """Parameter shapes of the pool's base model (or its first folder), from the safetensors headers, or from its
    config.json alone while the weights are not there yet (a plan before the download)."""
    from pathlib import Path

    from remnant.models.arch import config_shapes
    from remnant.models.files import has_weights
    from remnant.states.store import parameter_shapes

    folder = prepared.base_path or next((Path(m.path) for m in prepared.pool.models if m.path), None)
    if folder is None:
        return {}
    return parameter_shapes(Path(folder)) if has_weights(Path(folder)) else config_shapes(Path(folder))


def _metric_reads(spec: GeneratedSpec | ExistingSpec, data: SuiteData) -> tuple[int, int]:
    """Scored sequences of the suite's field metrics (each split and answer field once: the shared pass) and
    rows they generate for (ROUGE)."""
    from remnant.metrics.catalogue import with_dependencies

    names = list(spec.suite.metrics) + ([spec.suite.utility] if spec.suite.utility != "retain_kappa" else [])
    reads: set[tuple[str, str]] = set()
    rouge = 0
    for defn in with_dependencies(names):
        for src in (defn.source, defn.holdout):
            if src is None:
                continue
            split = src.split.format(forget="forget", holdout="holdout")
            reads.add((split, src.answer_key))
            if defn.handler == "rouge":
                rouge += len(data.rows.get(split, ()))
    per = {"perturbed_answer": 5}
    return sum(len(data.rows.get(split, ())) * per.get(key, 1) for split, key in reads), rouge


def sizes_of(prepared: Prepared, shapes: dict[str, tuple[int, ...]]) -> Sizes:
    """The sizes the work depends on (module docstring), from the pack and the base model's headers."""
    from remnant.states.store import DTYPE_BYTES
    from remnant.sweep.suite import attribute_view

    spec, data = prepared.spec, prepared.data
    view = attribute_view(prepared.pack, spec.pack.attributes)
    install = view.split("install")
    forget = view.split("removal")
    sequences, rouge_rows = _metric_reads(spec, data)
    texts = [len(it.question) + len(it.answer) for it in install] or [80]
    params = sum(math.prod(s) for s in shapes.values())
    dtype = getattr(getattr(spec, "base", None), "dtype", "fp32")
    return Sizes(
        params=params,
        weights_bytes=params * DTYPE_BYTES.get(dtype, 4),
        tokens=sum(texts) / len(texts) / 4 + TEMPLATE_TOKENS,
        install=len(install),
        forget=len(forget),
        retain_train=len(install) - len(forget),
        sequences=sequences,
        rouge_rows=rouge_rows,
        blocks=len({m.group(1) for name in shapes if (m := re.search(r"\.layers\.(\d+)\.", name))}) or 1,
        probes=len(data.probes),
        retain_probes=len(data.retain_probes),
        examples=len(data.examples),
        counts={name: math.prod(shape) for name, shape in shapes.items()},
        matrices={n: (s[0], s[1]) for n, s in shapes.items() if len(s) == 2},
    )


def estimate(prepared: Prepared, *, rate: float | None = None) -> tuple[list[ModelEstimate], float]:
    """Per-model estimates and the CPU rate they assume (measured now unless given)."""
    rate = rate if rate is not None else cpu_flops()
    return estimate_models(prepared, sizes_of(prepared, model_shapes(prepared)), rate), rate


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def _unfetched_note(prepared: Prepared) -> list[str]:
    """A line saying the base model's weights are not there yet (priced from its config; keys provisional)."""
    from remnant.models.files import has_weights

    base = prepared.base_path
    if base is None or has_weights(base):
        return []
    return [
        f"base model {base}: no weights yet, priced from its config.json; the cell keys follow the weights' "
        "digest, so `sweep run` needs the weights (R2)"
    ]


def render_plan(prepared: Prepared, models: list[ModelEstimate], rate: float, threads: int) -> str:
    """``remnant sweep plan``'s text: the pool, its cells, time on this CPU and a GPU, disk."""
    pool, spec = prepared.pool, prepared.spec
    by_pool = Counter(m.pool for m in pool.models)
    perts = perturbations(spec)
    entries = len(prepared.cells) // max(len(pool.models) * len(perts), 1)
    building = sum(1 for m in models if not m.stored)
    disk = sum(m.disk for m in models)
    cpu = sum(m.cpu_build + m.cpu_measure for m in models)
    gpu = sum(m.gpu_build + m.gpu_measure for m in models)
    lines = _unfetched_note(prepared) + [
        f"pool {pool.name}: {len(pool.models)} models ("
        + ", ".join(f"{k} {v}" for k, v in sorted(by_pool.items()))
        + f"); perturbations {', '.join(perts)}; {entries} measurements each -> {len(prepared.cells)} cells",
        f"checkpoints: {building} to build, {len(models) - building} stored or given (store {prepared.store.uri})",
        f"disk: {disk / 1e9:.2f} GB of new checkpoints"
        + (f" (budget {spec.resources.disk_budget_gb} GB)" if spec.resources.disk_budget_gb else ""),
        f"estimated time, one task at a time: this CPU ({rate / 1e9:.0f} GFLOP/s fp32 matmul at {threads} "
        f"thread(s)) {_minutes(cpu)}; a GPU (assumed {GPU_FLOPS / 1e12:.0f} TFLOP/s effective) {_minutes(gpu)}"
        f" ({gpu / 3600:.1f} GPU-hours)",
        f"resources per task: {spec.resources.gpus_per_task:g} GPU while the cluster has GPUs when the task is "
        f"submitted, else {spec.resources.cpus_per_task} CPU thread(s) (on Ray, the run says when tasks fall "
        f"back to CPU); retries {spec.resources.retries}",
        "",
        "| model | pool | stored | cells | CPU build | CPU measure | GPU total | disk |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for e in models:
        lines.append(
            f"| {e.model} | {e.pool} | {'yes' if e.stored else 'no'} | {e.cells} | {_minutes(e.cpu_build)} "
            f"| {_minutes(e.cpu_measure)} | {_minutes(e.gpu_build + e.gpu_measure)} | {_size(e.disk)} |"
        )
    return "\n".join(lines) + "\n"


__all__ = [
    "CPU_EFFICIENCY",
    "GPU_FLOPS",
    "ModelEstimate",
    "Sizes",
    "Work",
    "checkpoint_bytes",
    "cpu_flops",
    "estimate",
    "estimate_models",
    "render_plan",
    "sizes_of",
]
