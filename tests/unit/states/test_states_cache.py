"""A worker's model cache (remnant.states.cache): each state is loaded once per process and run, shared with
later readers, evicted least recently used first within its byte budget."""

from __future__ import annotations

import pytest
import torch

from remnant.states.cache import ModelCache, model_bytes, worker_cache


def _model(n: int) -> torch.nn.Module:
    return torch.nn.Linear(n, n, bias=False)  # n*n float32 weights: 4*n*n bytes


def test_a_state_is_loaded_once_and_shared() -> None:
    cache = ModelCache(budget=10_000)
    made: list[int] = []

    def load() -> torch.nn.Module:
        made.append(1)
        return _model(10)

    first = cache.get("run", "full", load)
    assert cache.get("run", "full", load) is first and len(made) == 1
    assert (cache.loads, cache.hits) == (1, 1)


def test_the_least_recently_used_goes_first_within_the_budget() -> None:
    assert model_bytes(_model(10)) == 400
    cache = ModelCache(budget=1000)  # two of 400 bytes fit, not three
    a = cache.get("run", "a", lambda: _model(10))
    cache.get("run", "b", lambda: _model(10))
    assert cache.get("run", "a", lambda: _model(10)) is a  # a is now the most recent
    cache.get("run", "c", lambda: _model(10))  # evicts b
    assert cache.get("run", "a", lambda: _model(10)) is a
    cache.get("run", "b", lambda: _model(10))
    assert cache.loads == 4 and cache.hits == 2


def test_a_state_over_the_budget_and_another_runs_states_are_loaded_again() -> None:
    cache = ModelCache(budget=300)
    big = cache.get("run", "big", lambda: _model(10))
    assert cache.get("run", "big", lambda: _model(10)) is not big  # 400 bytes > 300: never kept
    small = ModelCache(budget=1000)
    kept = small.get("run-1", "a", lambda: _model(10))
    assert small.get("run-2", "a", lambda: _model(10)) is not kept and small.loads == 2


def test_the_budget_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import remnant.states.cache as module

    monkeypatch.setattr(module, "_WORKER", None)
    monkeypatch.setenv("REMNANT_MODEL_CACHE_MB", "3")
    assert worker_cache().budget == 3 * 2**20 and worker_cache() is worker_cache()


def test_a_budget_that_is_not_a_number_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import remnant.states.cache as module
    from remnant.errors import ConfigError

    monkeypatch.setattr(module, "_WORKER", None)
    monkeypatch.setenv("REMNANT_MODEL_CACHE_MB", "lots")
    with pytest.raises(ConfigError, match=r"REMNANT_MODEL_CACHE_MB='lots': not a whole number.*R23"):
        worker_cache()
