"""Shared fixtures of the studies' tests: a planted synthetic pool (``_study_pools``) read once per module."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _study_pools import planted_pool

from remnant.results import PoolTable, load_pool


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> tuple[PoolTable, dict[str, Any], Path]:
    folder = tmp_path_factory.mktemp("pool")
    planted = planted_pool(folder)
    return load_pool(folder), planted, folder
