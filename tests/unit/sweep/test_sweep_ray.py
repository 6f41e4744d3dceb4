"""The Ray executor on the tiny pool: the same records as the local executor, a killed worker included.

One module, one local Ray (``num_cpus=2``, not local mode: tasks run in worker processes, as on a cluster),
started once: Ray's start-up costs more than the tiny pool does. Skipped where ray is not installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sweep_fixtures import comparable, tiny_spec, write_spec

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    # "local": a Ray of its own even while another test's cluster runs on this machine (Ray's default would join
    # the cluster started last, and refuse num_cpus there)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_ray_tasks_give_the_local_records_even_when_a_worker_dies(
    tmp_path: Path, tiny_llama_dir: Path, local_ray: None
) -> None:
    from remnant.records import RECORDS_FILE, CellRecord, Reading, RecordStore
    from remnant.sweep.driver import run_sweep
    from remnant.sweep.executors import LocalExecutor, RayExecutor
    from remnant.sweep.prepare import prepare

    local_spec = write_spec(tmp_path / "a", tiny_spec(tiny_llama_dir, tmp_path / "a" / "store"))
    ray_spec = write_spec(
        tmp_path / "b", tiny_spec(tiny_llama_dir, tmp_path / "b" / "store")
    )  # its own store
    local = prepare(local_spec, out=tmp_path / "a" / "out")
    run_sweep(local, tmp_path / "a" / "out", LocalExecutor(1, threads=1), say=lambda m: None)
    remote = prepare(ray_spec, out=tmp_path / "b" / "out")
    executor = RayExecutor(1, address=None, gpus=1.0, cpus=1)
    assert executor.options == {"num_cpus": 1}  # no GPU here: the task asks for its CPU thread instead
    fault = (
        f"exit:{tmp_path / 'fired'}:never-retain-s0 [nf4] kappa"  # the worker process dies before this cell
    )
    summary = run_sweep(remote, tmp_path / "b" / "out", executor, say=lambda m: None, fault=fault)
    assert (tmp_path / "fired").is_file() and summary.failed_tasks == []
    assert summary.computed == len(remote.cells)
    records = RecordStore(tmp_path / "b" / "out" / RECORDS_FILE).read()
    keys = [
        r.cell_key for r in records if isinstance(r, CellRecord | Reading)
    ]  # an audit cell writes readings
    assert len(set(keys)) == len(
        {c.key for c in remote.cells}
    )  # each cell once: the retry skipped what was in
    assert comparable(tmp_path / "a" / "out" / RECORDS_FILE) == comparable(
        tmp_path / "b" / "out" / RECORDS_FILE
    )


def test_a_worker_under_another_remnant_version_fails_its_tasks_naming_both_versions(
    tmp_path: Path, tiny_llama_dir: Path, local_ray: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import remnant
    from remnant.records import RECORDS_FILE
    from remnant.sweep.driver import run_sweep
    from remnant.sweep.executors import RayExecutor
    from remnant.sweep.prepare import prepare

    prepared = prepare(
        write_spec(tmp_path, tiny_spec(tiny_llama_dir, tmp_path / "store")), out=tmp_path / "out"
    )
    worker_version = remnant.__version__
    monkeypatch.setattr(remnant, "__version__", "9.9.9")  # the driver's; the workers import the installed one
    summary = run_sweep(prepared, tmp_path / "out", RayExecutor(0, address=None, gpus=1.0, cpus=1), say=print)
    assert sorted(summary.failed_tasks) == sorted(m.id for m in prepared.pool.models)
    text = (tmp_path / "out" / RECORDS_FILE).read_text()
    assert f"this Ray worker runs remnant {worker_version} but the driver runs remnant 9.9.9" in text
    assert not any((tmp_path / "store" / "ckpt").glob("*/meta.json"))  # nothing was built


class _Submitted:
    """A Ray remote function stand-in: records each submission's arguments after the workspace."""

    def __init__(self, name: str, calls: dict[str, tuple[object, ...]]) -> None:
        self.name, self.calls = name, calls

    def options(self, **_: object) -> _Submitted:
        return self

    def remote(self, _ws: object, key: str, *rest: object) -> str:
        self.calls[f"{self.name}:{key}"] = rest
        return f"{self.name}:{key}"


def test_a_removal_is_given_its_install_build_as_a_ray_argument_not_a_lock_to_wait_on(
    tmp_path: Path, tiny_llama_dir: Path
) -> None:
    """Ray starts a task only once its ObjectRef arguments exist: a removal's build gets its install's build, a
    model's task its builds, so no task waits on the store's lock holding a GPU (R14)."""
    from types import SimpleNamespace

    from remnant.sweep.driver import workspace
    from remnant.sweep.executors import RayExecutor
    from remnant.sweep.prepare import prepare

    prepared = prepare(
        write_spec(tmp_path, tiny_spec(tiny_llama_dir, tmp_path / "store")), out=tmp_path / "out"
    )
    calls: dict[str, tuple[object, ...]] = {}
    executor = RayExecutor.__new__(RayExecutor)
    vars(executor).update(  # a cluster of CPUs only, and submissions recorded instead of run
        ray=SimpleNamespace(cluster_resources=lambda: {"CPU": 2.0}, put=lambda ws: "ws"),
        build=_Submitted("build", calls),
        task=_Submitted("task", calls),
    )
    executor.gpus, executor.cpus, executor.retries, executor.runtime_env = 1.0, 1, 0, {}
    executor.say, executor._on_cpu = (lambda m: None), None
    pool = prepared.pool
    removal = next(m for m in pool.models if pool.jobs[m.job].kind == "removal")
    install = pool.model(pool.jobs[removal.job].parent or "").job
    refs = [pool.model(r).job for r in sorted(set(pool.references.values()))]  # the audits' references
    deps = executor._deps(pool, workspace(prepared, tmp_path / "out"), removal.id, {}, {})
    assert pool.jobs[install].kind == "install"
    assert calls[f"build:{removal.job}"] == (f"build:{install}",)  # after its install, through Ray
    assert calls[f"build:{install}"] == ()  # an install starts from the base: nothing to wait for
    assert deps == [f"build:{removal.job}", *(f"build:{j}" for j in refs if pool.jobs[j].kind != "base")]
    assert len(deps) >= 2  # the tiny pool's retain reference is an install of its own


@pytest.mark.parametrize(
    ("address", "num_cpus", "expected"),
    [
        (None, 2, {"address": "local", "num_cpus": 2}),  # docs/sweep.md: without --address, a local Ray
        (None, None, {"address": "local"}),
        ("auto", 2, {"address": "auto"}),  # joining a cluster: its resources are the cluster's
    ],
)
def test_without_an_address_the_executor_starts_its_own_ray(
    monkeypatch: pytest.MonkeyPatch, address: str | None, num_cpus: int | None, expected: dict[str, object]
) -> None:
    """Ray's own default (no address) joins the cluster started last on the machine and then refuses num_cpus;
    the executor asks for a local Ray unless an address is given."""
    from remnant.sweep.executors import RayExecutor

    calls: list[dict[str, object]] = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kwargs: calls.append(kwargs))
    RayExecutor(1, address=address, gpus=1.0, cpus=1, num_cpus=num_cpus)
    assert [{k: v for k, v in c.items() if k in ("address", "num_cpus")} for c in calls] == [expected]
