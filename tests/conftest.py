"""Session-wide test configuration.

Fixtures that build tiny random models live in ``tests/fixtures_models.py`` (imported here) so that the real
loading code runs on a saved folder; slow tests (marked ``slow``) use SmolLM2-135M-Instruct from the package
registry through the zoo cache.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from fixtures_models import *  # noqa


def pytest_configure(config: pytest.Config) -> None:
    """One intra-op thread per xdist worker: `make test` runs two workers on two cores, and torch's default of
    one thread per core in each worker oversubscribes the machine (calibrated:
    docs/calibration.md#test-threads). The processes a test starts (the command line, the demo, a killed
    training run) inherit one thread too, through ``OMP_NUM_THREADS``, for the same reason. Torch is only
    imported here when a worker would import it anyway."""
    if os.environ.get("PYTEST_XDIST_WORKER") is not None:
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        import torch

        torch.set_num_threads(1)


#: The end-to-end file that builds the shared SmolLM2 states (install, NPO) and relearns them, collected first, and
#: the files that read those states, collected just before ``tests/unit/`` (largest first). ``make test`` hands
#: files to its two workers in collection order (``--dist loadfile --no-loadscope-reorder``): one worker builds the
#: states while the other runs the end-to-end files that need none, the contract and the integration tests; it
#: reaches the state readers about when the states exist (the latent file's own installs need only the install),
#: and the many small unit files that follow keep both workers busy to the end instead of one long file alone.
FIRST_FILES = ("tests/e2e/test_e2e_train.py",)
STATE_READERS = (
    "tests/e2e/test_e2e_latent.py",
    "tests/e2e/test_e2e_classd.py",
    "tests/e2e/test_e2e_battery.py",
)


def _rank(path: str) -> int:
    if path in FIRST_FILES:
        return 0
    if path in STATE_READERS:
        return 2 + STATE_READERS.index(path)
    return 2 + len(STATE_READERS) if path.startswith("tests/unit/") else 1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put :data:`FIRST_FILES` first and :data:`STATE_READERS` before ``tests/unit/``, in those orders; every other
    test keeps its place (a stable sort, the same on every worker, as pytest-xdist requires)."""
    items.sort(key=lambda item: _rank(item.nodeid.split("::", 1)[0]))


@pytest.fixture
def training_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every install (``"install"``) and removal (``"removal"``) the states builder trains from here on, in order:
    what a test of resume counts to show that recorded work was not trained again."""
    from remnant.states import builder

    calls: list[str] = []

    def counted(step: str, real: Any) -> Any:
        def train(*args: Any, **kwargs: Any) -> Any:
            calls.append(step)
            return real(*args, **kwargs)

        return train

    monkeypatch.setattr(builder, "train_install", counted("install", builder.train_install))
    monkeypatch.setattr(builder, "train_removal", counted("removal", builder.train_removal))
    return calls


#: Session-scoped fixtures whose models every test on a worker shares; a hook left on one changes later tests.
SHARED_MODEL_FIXTURES = ("tiny_llama", "latent_states")
_HOOK_DICTS = (
    "_forward_hooks",
    "_forward_pre_hooks",
    "_backward_hooks",
    "_backward_pre_hooks",
)
#: Bookkeeping torch keeps next to the hook dicts, keyed by the same handle ids.
_HOOK_SIDE_DICTS = (
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_forward_pre_hooks_with_kwargs",
)


def _shared_modules(value: Any) -> list[Any]:
    """The torch modules held by a shared fixture value (a ModelState, a module, or a dict of them)."""
    if isinstance(value, dict):
        return [m for v in value.values() for m in _shared_modules(v)]
    model = getattr(value, "model", value)
    return [model] if hasattr(model, "named_modules") else []


def leftover_hooks(model: Any) -> list[str]:
    """``module.kind[n]`` for every hook dict of ``model``'s modules that is not empty."""
    return [
        f"{name or '<root>'}.{kind}[{len(hooks)}]"
        for name, module in model.named_modules()
        for kind in _HOOK_DICTS
        if (hooks := getattr(module, kind, None))
    ]


def _clear_hooks(model: Any) -> None:
    for module in model.modules():
        for kind in (*_HOOK_DICTS, *_HOOK_SIDE_DICTS):
            getattr(module, kind, {}).clear()
        # transformers installs its output-capture hooks once per model and remembers it in this flag.
        vars(module).pop("_output_capturing_hooks_installed", None)


@pytest.fixture(autouse=True)
def _shared_models_keep_no_hooks(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the test that leaves a forward/backward hook on a shared session model, then clear it so the
    leak is reported once, where it happens, instead of breaking an unrelated later test on the same worker."""
    yield
    leaks: list[str] = []
    for fixture in SHARED_MODEL_FIXTURES:
        if fixture not in request.fixturenames:
            continue
        for model in _shared_modules(request.getfixturevalue(fixture)):
            found = leftover_hooks(model)
            leaks += found
            if found:
                _clear_hooks(model)
    if leaks:
        pytest.fail(f"hooks left on a shared session model: {', '.join(leaks)}", pytrace=False)
