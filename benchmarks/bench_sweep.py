"""Pools of models: K tiny models on 2 Ray workers against 1, and how a sweep's cost grows with the pool's size.

Both figures run the real sweep (:func:`remnant.sweep.driver.run_sweep`: build each model into a fresh
content-addressed store, then measure it: two field metrics, κ on P, retain κ, UDS, as it is and under NF4) on
pools of the test suite's tiny random Llama: the full install and a retain-only install (the references) and K
NPO removals at K learning rates. The speed-up times the same pool on a local Ray with 1 CPU and with 2
(``cpus_per_task = 1``, so one task per CPU), alternately, each run on a fresh store; Ray's start and the
workers' first import of torch are outside the timing (a warm-up task per worker), as a long sweep amortises them.
The growth runs the local executor on pools of increasing K. Writes the ``sweep`` section of RESULTS.md.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import parser, setup, table, write_section  # noqa: E402

METHOD = """
[[removal.methods]]
name = "npo"
params = {{ epochs = 2, batch_size = 4, grad_accum = 1, warmup_epochs = 0.0 }}
grid = {{ lr = [{lrs}] }}
"""


def spec_text(model: Path, store: Path, k: int) -> str:
    """The tiny pool with ``k`` removals (module docstring)."""
    lrs = ", ".join(f"{(i + 1) * 1e-4:g}" for i in range(k))
    return f"""
kind = "generated"
name = "bench-{k}"
include_base = false
[base]
model = "{model}"
[pack]
mint = {{ entities = 8, controls = 2, seed = 3, general = false, truth_ratio_options = true }}
attributes = ["home_town"]
[install]
max_epochs = 2
lr = 1e-3
batch_size = 8
[removal]
seeds = [0]
{METHOD.format(lrs=lrs)}
[perturbations.relearn]
enabled = false
[suite]
metrics = ["forget_Q_A_Prob", "forget_truth_ratio"]
audits = ["uds"]
max_new_tokens = 8
[resources]
store = "{store}"
cpus_per_task = 1
retries = 0
"""


def run_once(root: Path, model: Path, k: int, executor: Any) -> tuple[float, int]:
    """Seconds to build and measure the ``k`` pool on a fresh store, and the cells it computed."""
    from remnant.sweep.driver import run_sweep
    from remnant.sweep.prepare import prepare

    folder = Path(tempfile.mkdtemp(dir=root))
    spec = folder / "spec.toml"
    spec.write_text(spec_text(model, folder / "store", k))
    prepared = prepare(spec, out=folder / "out")
    start = time.perf_counter()
    summary = run_sweep(prepared, folder / "out", executor, say=lambda m: None)
    return time.perf_counter() - start, summary.computed


def _warm(ray: Any, workers: int) -> None:
    @ray.remote(num_cpus=1)
    def warm() -> int:
        import peft  # noqa: F401
        import transformers  # noqa: F401

        import remnant.sweep.measure  # noqa: F401
        from remnant import registry

        for kind in registry.KIND_PACKAGES:  # every registered component's package: what a task imports first
            registry.names(kind)
        time.sleep(1.0)  # held, so each warm-up lands on its own worker
        return 0

    ray.get([warm.remote() for _ in range(workers)])


def ray_time(root: Path, model: Path, k: int, workers: int) -> float:
    import ray

    from remnant.sweep.executors import RayExecutor

    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    try:
        _warm(ray, workers)
        seconds, _ = run_once(root, model, k, RayExecutor(0, address=None, gpus=1.0, cpus=1))
    finally:
        ray.shutdown()
    return seconds


def speedup(root: Path, model: Path, k: int, repeats: int) -> tuple[float, float]:
    """Median seconds on 1 and on 2 Ray workers, timed alternately."""
    one: list[float] = []
    two: list[float] = []
    for _ in range(repeats):
        one.append(ray_time(root, model, k, 1))
        two.append(ray_time(root, model, k, 2))
    return statistics.median(one), statistics.median(two)


def growth(root: Path, model: Path, sizes: list[int]) -> list[tuple[int, int, float, int]]:
    """(K, models, seconds, cells) of the local executor for each pool size."""
    from remnant.sweep.executors import LocalExecutor

    out = []
    for k in sizes:
        seconds, cells = run_once(root, model, k, LocalExecutor(0, threads=1))
        out.append((k, k + 2, seconds, cells))
    return out


def loads_per_task(root: Path, model: Path, k: int) -> tuple[float, float]:
    """Model loads per task (from disk: a folder, or a base model and a stored chain) on the local executor,
    without the worker's model cache (every task loading afresh, as before remnant.states.cache) and with it."""
    import remnant.states.cache as cache
    from remnant.sweep.executors import LocalExecutor

    out = []
    for budget in (0, cache.DEFAULT_MB * 2**20):
        cache._WORKER = cache.ModelCache(budget=budget)
        run_once(root, model, k, LocalExecutor(0, threads=1))
        out.append(cache._WORKER.loads / (k + 2))
    cache._WORKER = None
    return out[0], out[1]


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--models", type=int, default=24, help="removals K in the Ray pool (default 24)")
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 8, 16, 24], help="K of the growth runs")
    p.add_argument("--loads-only", action="store_true", help="print the loads per task and stop")
    args = p.parse_args()
    setup(args)
    from fixtures_models import build_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model = build_tiny_model("llama", root / "tiny")
        before, after = loads_per_task(root, model, args.sizes[0])
        print(
            f"model loads per task (K={args.sizes[0]}): {before:.2f} without the worker cache, {after:.2f} with it"
        )
        if args.loads_only:
            return
        rows = growth(root, model, args.sizes)
        one, two = speedup(root, model, args.models, args.repeats)
    k = args.models
    body = table(
        ["pool (models)", "cells", "1 Ray worker", "2 Ray workers", "speed-up"],
        [[f"{k + 2}", f"{(k + 2) * 8}", f"{one:.1f} s", f"{two:.1f} s", f"**{one / two:.2f}×**"]],
    )
    base = rows[0][2] / rows[0][1]
    body += "\n\n" + table(
        ["K removals", "models", "cells", "local executor", "per model", "per model vs the smallest pool"],
        [
            [str(kk), str(n), str(c), f"{s:.1f} s", f"{s / n:.2f} s", f"{s / n / base:.2f}"]
            for kk, n, s, c in rows
        ],
    )
    body += (
        f"\n\nTiny random Llama (2 layers, hidden 64); each pool is the full install, a retain-only install and K "
        f"NPO removals, built into a fresh store and measured as it is and under NF4 (two field metrics, κ on P, "
        f"retain κ, UDS: 8 cells a model). Ray: a local Ray with 1 or 2 CPUs and one CPU per task, median of "
        f"{args.repeats} alternated runs, Ray's start and each worker's first import outside the timing. The "
        f"references are built by the first two tasks and every removal waits for the full install (its parent), "
        f"so the 2-worker pool has a serial start; per-model cost is flat in K when the growth is linear. "
        f"Model loads per task (K={args.sizes[0]}, local executor): {before:.2f} with every task loading afresh, "
        f"{after:.2f} with the worker's model cache (remnant.states.cache). "
        f"Reproduce: `.venv/bin/python benchmarks/bench_sweep.py --models {k} --sizes "
        f"{' '.join(map(str, args.sizes))} --repeats {args.repeats}`."
    )
    write_section("sweep", "Sweeps: 2 Ray workers vs 1, and cost vs pool size", body, write=not args.no_write)


if __name__ == "__main__":
    main()
