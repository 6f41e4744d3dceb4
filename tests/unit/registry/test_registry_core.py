"""The registry records name, version and every parameter, so a statement can name exactly what ran."""

from __future__ import annotations

import pytest

from remnant import registry
from remnant.errors import ConfigError


@registry.register("testkind", "dummy", "1.2")
class _Dummy:
    def __init__(self, budget: int = 8, temperature: float = 1.0, *, tag: str = "x") -> None:
        self.budget = budget
        self.temperature = temperature
        self.tag = tag


def test_create_records_every_default_and_given_param() -> None:
    made = registry.create("testkind", "dummy", {"budget": 32})
    assert made.budget == 32
    assert made.spec.to_dict() == {
        "kind": "testkind",
        "name": "dummy",
        "version": "1.2",
        "params": {"budget": 32, "temperature": 1.0, "tag": "x"},
    }


def test_unknown_parameter_is_refused_with_accepted_list() -> None:
    with pytest.raises(ConfigError, match="accepted parameters: budget, temperature, tag"):
        registry.bind("testkind", "dummy", {"budgte": 3})


def test_unknown_name_lists_choices() -> None:
    with pytest.raises(ConfigError, match="registered: dummy"):
        registry.get("testkind", "nope")


def test_registering_another_class_under_a_taken_name_fails() -> None:
    with pytest.raises(ValueError, match="already registered"):

        @registry.register("testkind", "dummy", "9")
        class _Other:  # noqa: F841
            pass


def test_defaults_lists_every_default() -> None:
    assert registry.defaults("testkind", "dummy") == {"budget": 8, "temperature": 1.0, "tag": "x"}
