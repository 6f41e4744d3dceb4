"""Session-wide test configuration.

Fixtures that build tiny random models live in ``tests/fixtures_models.py`` (imported here) so that the real
loading code runs on a saved folder; slow tests (marked ``slow``) use SmolLM2-135M-Instruct from the package
registry through the zoo cache.
"""

from __future__ import annotations

import os

import pytest

from fixtures_models import *  # noqa


def pytest_configure(config: pytest.Config) -> None:
    """One intra-op thread per xdist worker: `make test` runs two workers on two cores, and torch's default of
    one thread per core in each worker oversubscribes the machine (measured: a tiny-model run went from 0.7 s
    to 16 s under load). Torch is only imported here when a worker would import it anyway."""
    if os.environ.get("PYTEST_XDIST_WORKER") is not None:
        import torch

        torch.set_num_threads(1)
