"""Where tasks run: in this process (``local``, the base install), or as Ray tasks (``ray``, ``remnant[ray]``).

Both run the same task (:func:`remnant.sweep.measure.measure_model`: one per model) and hand the driver the same
stream of ``(model, item)`` pairs, where an item is a build result, a finished cell, or a :class:`TaskFailed`.
Neither writes a record: the driver is the only writer. A Ray task reads nothing of the driver's disk: the
workspace carries the pack and TOFU view, and checkpoints move through the store (a folder, or an ``s3://`` or
``gs://`` URI on a cluster without a shared disk; docs/sweep.md, "Running on a cluster").

A task that raises, or whose worker dies (killed or out of memory), is run again up to the spec's ``retries``
times, skipping the cells it already delivered; after the last try the executor yields :class:`TaskFailed` and
the driver records the model's remaining cells as *failed*: nothing a task does stops the sweep. A Ray task asks
for ``gpus_per_task`` GPUs while the cluster has GPUs when it is submitted, else ``cpus_per_task`` CPUs (and as
many torch threads); the local executor uses the GPU when torch sees one, else ``cpus_per_task`` threads, so both
give the same numbers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from remnant.sweep.context import Workspace

if TYPE_CHECKING:
    from remnant.sweep.build import BuildResult
    from remnant.sweep.measure import CellOutput, TaskDone
    from remnant.sweep.pool import Pool


@dataclass(frozen=True)
class TaskFailed:
    """A task that failed on every try: the error of the last one."""

    error: str
    tries: int


Item = Any  # BuildResult | CellOutput | TaskFailed


def _error(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:2000]


def _delivered(item: object, seen: set[str]) -> None:
    key = getattr(item, "key", None)
    if isinstance(key, str) and hasattr(item, "records"):
        seen.add(key)


class LocalExecutor:
    """Tasks one after another in this process (module docstring)."""

    name = "local"

    def __init__(self, retries: int, *, threads: int) -> None:
        self.retries = retries
        self.threads = threads

    def workspace(self, ws: Workspace) -> Workspace:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
        return dataclasses.replace(ws, device=device, threads=self.threads if device == "cpu" else 0)

    def run(self, ws: Workspace, tasks: list[tuple[str, frozenset[str]]]) -> Iterator[tuple[str, Item]]:
        from remnant.sweep.measure import measure_model

        ws = self.workspace(ws)
        for model_id, done in tasks:
            seen = set(done)
            for attempt in range(self.retries + 1):
                try:
                    for item in measure_model(ws, model_id, frozenset(seen)):
                        _delivered(item, seen)
                        yield model_id, item
                    break
                except (KeyboardInterrupt, SystemExit, GeneratorExit):
                    raise
                except BaseException as exc:  # a crashed or out-of-memory task is an outcome
                    if attempt == self.retries:
                        yield model_id, TaskFailed(_error(exc), attempt + 1)

    def close(self) -> None:
        return None


#: The environment variable the driver's ``runtime_env`` sets to its remnant version; every Ray task checks it.
VERSION_ENV = "REMNANT_DRIVER_VERSION"


def _check_version() -> None:
    """Refuse to run under another remnant than the driver's: a mixed cluster would give records the driver's
    version did not compute (R23). The task fails, naming both versions; it is never silent."""
    import os

    import remnant

    driver = os.environ.get(VERSION_ENV, "unknown (no runtime_env)")
    if driver != remnant.__version__:
        raise RuntimeError(
            f"this Ray worker runs remnant {remnant.__version__} but the driver runs remnant {driver}: install "
            "the driver's version on every node (docs/sweep.md, Running on a cluster)"
        )


def _ray_build(ws: Workspace, job_key: str, *parents: object) -> BuildResult:
    """Build one job into the store; ``parents`` (its parent job's build, resolved by Ray) only order it."""
    from remnant.sweep.build import build_job

    _check_version()
    ctx = ws.open()
    ctx.apply_threads()
    return build_job(ctx, job_key)


def _ray_task(
    ws: Workspace, model_id: str, done: frozenset[str], *builds: object
) -> Iterator[BuildResult | CellOutput | TaskDone]:
    """Measure one model; ``builds`` (its jobs' builds, resolved by Ray) make Ray start it only once they are
    stored, so no task holds a GPU while it waits for another's build."""
    from remnant.sweep.measure import measure_model

    _check_version()
    yield from measure_model(ws, model_id, done)


class RayExecutor:
    """One Ray build task per job and one measuring task per model, streaming its cells back (module docstring).

    Each job's build is a task of its own, given its parent job's build as an argument (an ObjectRef): Ray runs a
    removal after its parent install and a model's measuring task after its builds, so nothing waits on the
    store's lock while holding a GPU. Resources are read from the cluster at each submission, and ``say`` tells
    when tasks fall back to CPU. Every task checks the driver's remnant version in its ``runtime_env``.
    """

    name = "ray"

    def __init__(
        self,
        retries: int,
        *,
        address: str | None,
        gpus: float,
        cpus: int,
        num_cpus: int | None = None,
        say: Callable[[str], None] | None = None,
    ) -> None:
        import ray

        import remnant

        self.owns_ray = not ray.is_initialized()  # shut down at close only a Ray this executor started
        if self.owns_ray:
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if address is None and num_cpus is not None:
                kwargs["num_cpus"] = num_cpus
            # no address: a new local Ray, as documented; Ray's own default would join whichever cluster was
            # started last on this machine (and refuse --num-cpus there); ``--address auto`` joins one
            ray.init(address=address or "local", **kwargs)
        self.ray = ray
        self.retries = retries
        self.gpus, self.cpus = gpus, cpus
        self.say = say or (lambda message: None)
        self.runtime_env = {"env_vars": {VERSION_ENV: remnant.__version__}}
        self.task = ray.remote(_ray_task)
        self.build = ray.remote(_ray_build)
        self._on_cpu: bool | None = None

    @property
    def options(self) -> dict[str, float]:
        """The resources a task submitted now asks for: a GPU while the cluster has one, else CPUs."""
        has_gpu = float(self.ray.cluster_resources().get("GPU", 0.0)) > 0.0  # type: ignore[no-untyped-call]
        return {"num_gpus": self.gpus, "num_cpus": 1} if has_gpu else {"num_cpus": self.cpus}

    def _placed(self, refs: dict[str, Any], ws: Workspace, label: str) -> tuple[dict[str, float], Any]:
        """The options of a task submitted now and its workspace (put in the object store once per device)."""
        options = self.options
        device = "cuda" if "num_gpus" in options else "cpu"
        if (device == "cpu") != self._on_cpu:  # said at the first task and whenever the cluster changes
            self._on_cpu = device == "cpu"
            now = (
                f"no GPU now: from {label} on, tasks run on CPU"
                if self._on_cpu
                else "GPUs: tasks ask for one"
            )
            self.say(f"the Ray cluster has {now}")
        if device not in refs:
            threads = 0 if device == "cuda" else self.cpus
            refs[device] = self.ray.put(dataclasses.replace(ws, device=device, threads=threads))
        return options, refs[device]

    def _build_ref(
        self, pool: Pool, job_key: str, ws: Workspace, refs: dict[str, Any], builds: dict[str, Any]
    ) -> Any:
        """The ObjectRef of ``job_key``'s build task (submitted once, after its parent's), None for a job that
        builds nothing (the base, a folder)."""
        job = pool.jobs[job_key]
        if job.kind in ("base", "folder"):
            return None
        if job_key not in builds:
            parents = [] if job.parent is None else [pool.model(job.parent).job]
            deps = [r for r in (self._build_ref(pool, j, ws, refs, builds) for j in parents) if r is not None]
            options, ws_ref = self._placed(refs, ws, f"build {job_key[:12]}")
            # a build is idempotent (the store keeps one copy): Ray reruns it when it raises or its worker dies
            build = self.build.options(
                max_retries=self.retries, retry_exceptions=True, runtime_env=self.runtime_env, **options
            )
            builds[job_key] = build.remote(ws_ref, job_key, *deps)
        return builds[job_key]

    def _deps(
        self, pool: Pool, ws: Workspace, model_id: str, refs: dict[str, Any], builds: dict[str, Any]
    ) -> list[Any]:
        """The builds ``model_id``'s measuring task waits for: its own job's and (audits) the references'."""
        jobs = [pool.model(model_id).job]
        if ws.spec.get("suite", {}).get("audits"):
            jobs += [pool.model(ref).job for ref in sorted(set(pool.references.values()))]
        return [r for r in (self._build_ref(pool, j, ws, refs, builds) for j in jobs) if r is not None]

    def run(self, ws: Workspace, tasks: list[tuple[str, frozenset[str]]]) -> Iterator[tuple[str, Item]]:
        from remnant.sweep.pool import Pool

        pool = Pool.from_dict(ws.pool)
        refs: dict[str, Any] = {}  # device -> the workspace in the object store
        builds: dict[str, Any] = {}  # job -> its build task
        seen = {model_id: set(done) for model_id, done in tasks}
        deps = {model_id: self._deps(pool, ws, model_id, refs, builds) for model_id, _ in tasks}
        building = {ref: job for job, ref in builds.items()}
        tries = dict.fromkeys(seen, 1)
        live: dict[Any, str] = {}

        def submit(model_id: str) -> None:
            options, ws_ref = self._placed(refs, ws, model_id)
            task = self.task.options(max_retries=0, runtime_env=self.runtime_env, **options).remote(
                ws_ref, model_id, frozenset(seen[model_id]), *deps[model_id]
            )
            live[task] = model_id

        for model_id, _ in tasks:
            submit(model_id)
        while live or building:
            ready, _ = self.ray.wait([*building, *live], num_returns=1)
            if ready[0] in building:
                job = building.pop(ready[0])
                try:
                    result = self.ray.get(ready[0])
                except Exception:  # failed on every try: the tasks that depend on it fail and report it
                    continue
                yield pool.jobs[job].models[0], result
                continue
            gen = ready[0]
            model_id = live[gen]
            try:
                item = self.ray.get(next(gen))  # type: ignore[arg-type]
            except StopIteration:
                del live[gen]
                continue
            except Exception as exc:  # the task raised, or its worker died: retry or report
                del live[gen]
                if tries[model_id] <= self.retries:
                    tries[model_id] += 1
                    submit(model_id)
                else:
                    yield model_id, TaskFailed(_error(exc), tries[model_id])
                continue
            _delivered(item, seen[model_id])
            yield model_id, item

    def close(self) -> None:
        if self.owns_ray:
            self.ray.shutdown()


__all__ = ["VERSION_ENV", "LocalExecutor", "RayExecutor", "TaskFailed"]
