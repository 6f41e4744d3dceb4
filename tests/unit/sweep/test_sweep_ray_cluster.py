"""A sweep on a multi-node Ray cluster without a shared disk (``ray.cluster_utils.Cluster``: a head that runs no
task and two worker nodes, each with its own ``REMNANT_HOME``), its checkpoint store on object storage (moto's S3
server, started by the test). Every Ray worker process refuses, through an audit hook (``ray_guard``), any file
operation under the driver's sweep folder: the spec, pack, TOFU view and cell plan travel with the tasks, the
checkpoints through the store. A worker killed before a cell loses only its task, which is retried; the records
equal a local run's field for field.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sweep_fixtures import comparable, tiny_spec, write_spec

from fixtures_s3 import BUCKET, _moto_server, s3  # noqa: F401 - fixtures

ray = pytest.importorskip("ray")

_AWS = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")


@pytest.fixture
def cluster(s3: Any, tmp_path: Path) -> Iterator[tuple[Any, list[Path]]]:  # noqa: F811 - the fixture
    """A head (no CPU: no task runs on it) and two worker nodes; yields the cluster and each worker node's
    ``REMNANT_HOME``."""
    import os

    import ray_guard
    from ray.cluster_utils import Cluster

    homes = [tmp_path / f"node{i}-home" for i in range(2)]
    env = {
        **{name: os.environ[name] for name in _AWS},  # the standard AWS settings, as a node would have them
        "REMNANT_TEST_FORBIDDEN": str(tmp_path / "sweep"),
        "REMNANT_TEST_GUARD_LOG": str(tmp_path / "guard.log"),
    }
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    for home in homes:
        c.add_node(num_cpus=1, resources={"remnant_worker": 1}, env_vars={**env, "REMNANT_HOME": str(home)})
    ray.cloudpickle.register_pickle_by_value(ray_guard)  # the workers cannot import the tests folder
    ray.init(
        address=c.address,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"worker_process_setup_hook": ray_guard.guard},
    )
    try:
        yield c, homes
    finally:
        ray.shutdown()
        c.shutdown()  # type: ignore[no-untyped-call]


def test_a_cluster_without_a_shared_disk_gives_the_local_records(
    cluster: tuple[Any, list[Path]], tmp_path: Path, tiny_llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from remnant.records import RECORDS_FILE, CellRecord, Reading, RecordStore
    from remnant.sweep.driver import run_sweep
    from remnant.sweep.executors import LocalExecutor, RayExecutor
    from remnant.sweep.prepare import prepare

    monkeypatch.setenv("REMNANT_HOME", str(tmp_path / "local-home"))
    text = tiny_spec(tiny_llama_dir, tmp_path / "store")
    local = prepare(write_spec(tmp_path / "a", text), out=tmp_path / "local")
    run_sweep(local, tmp_path / "local", LocalExecutor(1, threads=1), say=lambda m: None)
    monkeypatch.setenv("REMNANT_HOME", str(tmp_path / "driver-home"))

    uri = f"s3://{BUCKET}/cluster"
    remote = prepare(
        write_spec(tmp_path / "b", text.replace(str(tmp_path / "store"), uri)), out=tmp_path / "sweep"
    )
    said: list[str] = []
    executor = RayExecutor(1, address=None, gpus=1.0, cpus=1, say=said.append)
    assert not executor.owns_ray and executor.options == {"num_cpus": 1}  # no GPU in this cluster
    fault = f"exit:{tmp_path / 'fired'}:never-retain-s0 [nf4] kappa"  # a worker process dies before this cell
    summary = run_sweep(remote, tmp_path / "sweep", executor, say=said.append, fault=fault)

    assert not (tmp_path / "guard.log").exists(), (tmp_path / "guard.log").read_text()
    assert (tmp_path / "fired").is_file() and summary.failed_tasks == []
    assert any("no GPU now" in m for m in said)  # the fall-back to CPU is said, not silent
    records = RecordStore(tmp_path / "sweep" / RECORDS_FILE).read()
    keys = [r.cell_key for r in records if isinstance(r, CellRecord | Reading)]
    assert len(set(keys)) == len({c.key for c in remote.cells}) == summary.computed  # each cell once
    assert comparable(tmp_path / "local" / RECORDS_FILE) == comparable(tmp_path / "sweep" / RECORDS_FILE)
    # the tasks' inputs and checkpoints landed in the worker nodes' own homes, none in the driver's
    assert any((home / "sweep-inputs").is_dir() for home in cluster[1])
    assert not (tmp_path / "driver-home" / "sweep-inputs").exists()
    # the guard is live in the workers: a task that reads the driver's records is refused and logged
    peek = ray.remote(lambda path: Path(path).read_bytes()).options(num_cpus=1)
    with pytest.raises(ray.exceptions.RayTaskError, match="touched the driver's sweep folder"):
        ray.get(peek.remote(str(tmp_path / "sweep" / RECORDS_FILE)))
    assert (tmp_path / "guard.log").read_text().startswith("open ")
    # resources are read at each submission: a GPU node that joins later is asked for by the next task
    cluster[0].add_node(num_cpus=1, num_gpus=1)
    for _ in range(100):  # the head's view of the cluster follows within a second or so
        if ray.cluster_resources().get("GPU"):
            break
        time.sleep(0.1)
    assert executor.options == {"num_gpus": 1.0, "num_cpus": 1}
