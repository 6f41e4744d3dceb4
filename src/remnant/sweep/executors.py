"""Where tasks run: in this process (``local``, the base install), or as Ray tasks (``ray``, ``remnant[ray]``).

Both run the same task (:func:`remnant.sweep.measure.measure_model`: one per model) and hand the driver the same
stream of ``(model, item)`` pairs, where an item is a build result, a finished cell, or a :class:`TaskFailed`.
Neither writes a record: the driver is the only writer.

A task that raises, or whose worker dies (a Ray worker killed or out of memory), is run again up to the spec's
``retries`` times, skipping the cells it already delivered; after the last try the executor yields
:class:`TaskFailed` with the error and the driver records the model's remaining cells as *failed*. Nothing a task
does stops the sweep. Ray tasks declare their resources: ``num_gpus = gpus_per_task`` where the cluster has GPUs
(the task then measures on its GPU), else ``num_cpus = cpus_per_task`` (and as many torch threads); the local
executor uses the GPU when torch sees one, else ``cpus_per_task`` threads, so both give the same numbers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from remnant.sweep.context import Workspace


@dataclass(frozen=True)
class TaskFailed:
    """A task that failed on every try: the error of the last one."""

    error: str
    tries: int


Item = Any  # BuildResult | CellOutput | TaskFailed


def _error(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:2000]


def _delivered(item: Any, seen: set[str]) -> None:
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
                except (
                    BaseException
                ) as exc:  # a crashed or out-of-memory task is an outcome (module docstring)
                    if attempt == self.retries:
                        yield model_id, TaskFailed(_error(exc), attempt + 1)

    def close(self) -> None:
        return None


def _ray_task(ws: Workspace, model_id: str, done: frozenset[str]) -> Iterator[Any]:
    from remnant.sweep.measure import measure_model

    yield from measure_model(ws, model_id, done)


class RayExecutor:
    """One Ray task per model, streaming its cells back (module docstring)."""

    name = "ray"

    def __init__(
        self, retries: int, *, address: str | None, gpus: float, cpus: int, num_cpus: int | None = None
    ) -> None:
        import ray

        self.owns_ray = not ray.is_initialized()  # shut down at close only a Ray this executor started
        if self.owns_ray:
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if address is None and num_cpus is not None:
                kwargs["num_cpus"] = num_cpus
            ray.init(address=address, **kwargs)
        self.ray = ray
        self.retries = retries
        has_gpu = float(ray.cluster_resources().get("GPU", 0.0)) > 0.0  # type: ignore[no-untyped-call]
        self.options: dict[str, Any] = {"num_gpus": gpus, "num_cpus": 1} if has_gpu else {"num_cpus": cpus}
        self.device = "cuda" if has_gpu else "cpu"
        self.threads = 0 if has_gpu else cpus
        self.task = ray.remote(_ray_task).options(max_retries=0, **self.options)

    def workspace(self, ws: Workspace) -> Workspace:
        return dataclasses.replace(ws, device=self.device, threads=self.threads)

    def run(self, ws: Workspace, tasks: list[tuple[str, frozenset[str]]]) -> Iterator[tuple[str, Item]]:
        ws = self.workspace(ws)
        seen = {model_id: set(done) for model_id, done in tasks}
        tries = dict.fromkeys(seen, 0)
        live: dict[Any, str] = {}
        for model_id, done in tasks:
            live[self.task.remote(ws, model_id, done)] = model_id
            tries[model_id] = 1
        while live:
            ready, _ = self.ray.wait(list(live), num_returns=1)
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
                    live[self.task.remote(ws, model_id, frozenset(seen[model_id]))] = model_id
                else:
                    yield model_id, TaskFailed(_error(exc), tries[model_id])
                continue
            _delivered(item, seen[model_id])
            yield model_id, item

    def close(self) -> None:
        if self.owns_ray:
            self.ray.shutdown()


__all__ = ["LocalExecutor", "RayExecutor", "TaskFailed"]
