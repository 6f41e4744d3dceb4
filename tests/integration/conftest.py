"""Fixtures shared by the integration tests: one finished tiny assessment whose records the integrity tests tamper
with (records_fixtures.py), built once per session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from records_fixtures import assess_once  # noqa: E402


@pytest.fixture(scope="session")
def chained_run(tmp_path_factory: pytest.TempPathFactory, tiny_llama_dir: Path) -> Path:
    """A complete assessment written with chained records; copy it (records_fixtures.copy_run) before editing."""
    return assess_once(tmp_path_factory.mktemp("chained"), tiny_llama_dir)
