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


@pytest.mark.parametrize(
    ("kind", "base"),
    [
        ("metric", "remnant.metrics.base:Metric"),
        ("audit", "remnant.engine.audit_base:Audit"),
        ("attack", "remnant.attacks.base:Attack"),
        ("method", "remnant.train.methods.base:RemovalMethod"),
    ],
)
def test_a_class_that_does_not_subclass_its_kinds_base_is_refused(kind: str, base: str) -> None:
    class Loose:
        pass

    with pytest.raises(TypeError) as caught:
        registry.register(kind, "loose", "1")(Loose)
    message = str(caught.value)
    assert f"{kind} 'loose'" in message and f"{Loose.__qualname__} does not subclass {base}" in message
    assert "K4" in message and (kind, "loose") not in registry._ENTRIES


def test_the_base_is_matched_by_module_and_name_not_by_name_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    from remnant.metrics.base import Metric

    for kind in registry.KIND_PACKAGES:  # built-ins registered first: a module imported under the copy never
        registry.names(kind)  # registers again once the copy is dropped (later tests would see none)
    monkeypatch.setattr(registry, "_ENTRIES", dict(registry._ENTRIES))
    lookalike = type("Metric", (), {"__module__": "somewhere.else"})
    with pytest.raises(TypeError, match="does not subclass remnant.metrics.base:Metric"):
        registry.register("metric", "lookalike", "1")(type("Fake", (lookalike,), {}))
    real: type[Metric] = registry.register("metric", "subclassed", "1")(type("Real", (Metric,), {}))
    assert registry.get("metric", "subclassed") is real
