"""One contract over every registered measurement (docs/extending.md; contract_cases.py says which and how built).

For each, on the tiny model:

(a) its records validate and round-trip through the record store, carry its cell key, name, surface and state;
    its cell records count k <= n with a status (R19), and its smoke run records the statuses it should;
(b) its cell key: identical inputs give the identical key; changing any one input (a component parameter, the
    item list, the seed, …), the state's weights digest or its role changes it (``--resume`` and the shared
    cache reuse a cell only for identical inputs);
(c) resume: run twice on one store it computes once; a run killed before the cell (``before_cell`` raises)
    writes nothing of it, and the resumed run writes the same records (elapsed time aside).

A new registered component is covered here without editing this file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from contract_cases import (
    KEY_GAPS,
    UNREACHABLE_METRICS,
    FirstRuns,
    World,
    all_cases,
    audit_engine_exists,
    kind_of,
    metric_name_for,
)
from contract_checks import check_identical_key, check_records, check_resume, check_variant, first_run

from remnant import registry

CASES = all_cases()
BY_ID = {c.id: c for c in CASES}


def _variant_params() -> list[Any]:
    out = []
    for case in CASES:
        for variant in case.variants:
            gap = KEY_GAPS.get((kind_of(case.id), variant))
            marks = [pytest.mark.xfail(strict=True, reason=gap)] if gap else []
            out.append(pytest.param(case.id, variant, id=f"{case.id}-{variant}", marks=marks))
    return out


def test_every_registered_component_is_a_case() -> None:
    # the registries are the list: a component the engine cannot run must fail here, not be skipped silently
    for name in registry.names("attack"):
        assert f"attack:{name}" in BY_ID
    for name in registry.names("utility"):
        assert f"utility:{name}" in BY_ID
    for risk in registry.names("classd"):
        assert f"classd:{risk}/direct" in BY_ID
    assert "classd:linkability/likelihood" in BY_ID
    for handler in registry.names("metric"):
        assert (f"metric:{handler}" in BY_ID) != (handler in UNREACHABLE_METRICS), handler
    # an unreachable handler is one no named metric uses; when one gains a name it must become a case
    assert all(metric_name_for(h) is None for h in UNREACHABLE_METRICS)
    assert {"relearning:relearning", "classd_relearning:battery"} <= set(BY_ID)


def test_every_registered_audit_is_a_case() -> None:
    assert audit_engine_exists()
    for name in registry.names("audit"):
        assert f"audit:{name}" in BY_ID, f"audit {name} has no contract case (contract_cases.audit_cases)"


@pytest.mark.parametrize("case_id", list(BY_ID))
def test_records_validate_and_carry_the_cell(
    case_id: str, world: World, first_runs: FirstRuns, tmp_path: Path
) -> None:
    case = BY_ID[case_id]
    check_records(case, world, *first_run(case, world, first_runs, tmp_path))


@pytest.mark.parametrize("case_id", list(BY_ID))
def test_identical_inputs_identical_key_and_the_state_is_in_it(case_id: str, world: World) -> None:
    check_identical_key(BY_ID[case_id], world)


@pytest.mark.parametrize(("case_id", "variant"), _variant_params())
def test_each_input_changes_the_key(case_id: str, variant: str, world: World) -> None:
    check_variant(BY_ID[case_id], world, variant)


@pytest.mark.parametrize("case_id", list(BY_ID))
def test_resume_computes_once_and_an_interrupted_run_resumes_identically(
    case_id: str, world: World, first_runs: FirstRuns, tmp_path: Path
) -> None:
    case = BY_ID[case_id]
    check_resume(case, world, *first_run(case, world, first_runs, tmp_path), tmp_path)
