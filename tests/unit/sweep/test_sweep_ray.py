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
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
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
