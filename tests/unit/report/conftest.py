"""Fixtures of the report tests; the statement, facts and manifest builders they share are report_helpers.py
(a uniquely named module: ``from conftest import ...`` would pick whichever conftest pytest loaded first)."""

from __future__ import annotations

import pytest

from remnant.packs import ClassDSpec, Pack, mint_class_d


@pytest.fixture(scope="session")
def small_pack() -> Pack:
    return mint_class_d(ClassDSpec(entities=8, controls=2, seed=1))
