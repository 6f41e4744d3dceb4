"""remnant.models.device: a device is well formed and present on this machine, or one ConfigError naming where it
was given (R24). The GPU branches run here on any machine by making torch report 0, 1 or 2 CUDA devices."""

from __future__ import annotations

import pytest
import torch

from remnant.errors import ConfigError
from remnant.models.device import check_device


def _gpus(monkeypatch: pytest.MonkeyPatch, count: int, mps: bool = False) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)


@pytest.mark.parametrize(
    ("count", "name", "resolved"),
    [
        (0, "cpu", "cpu"),
        (0, "auto", "cpu"),
        (2, "auto", "cuda"),
        (2, "cuda", "cuda"),
        (2, "cuda:1", "cuda:1"),
        (2, "cpu", "cpu"),
    ],
)
def test_present_devices_resolve(
    monkeypatch: pytest.MonkeyPatch, count: int, name: str, resolved: str
) -> None:
    _gpus(monkeypatch, count)
    assert check_device(name, where="--device") == resolved


@pytest.mark.parametrize(
    ("count", "mps", "name", "message"),
    [
        (0, False, "cuda", "'cuda': this machine has no CUDA device"),
        (0, False, "cuda:0", "'cuda:0': this machine has no CUDA device"),
        (2, False, "cuda:2", "'cuda:2': this machine has 2 CUDA device(s): cuda:0 to cuda:1"),
        (1, False, "cuda:99", "'cuda:99': this machine has 1 CUDA device(s): cuda:0 to cuda:0"),
        (1, False, "mps", "'mps': this machine has no MPS device"),
        (0, True, "gpu", "'gpu': not a device; give auto, cpu, mps, cuda or cuda:N"),
        (0, True, "cuda:-1", "not a device"),
        (0, True, "CPU", "not a device"),
        (0, True, "", "not a device"),
    ],
)
def test_absent_or_malformed_devices_are_refused_naming_where(
    monkeypatch: pytest.MonkeyPatch, count: int, mps: bool, name: str, message: str
) -> None:
    _gpus(monkeypatch, count, mps)
    with pytest.raises(ConfigError) as err:
        check_device(name, where="c.toml: field 'models.device'")
    text = str(err.value)
    assert text.startswith("c.toml: field 'models.device' ") and message in text and text.endswith("(R24)")


def test_mps_where_present(monkeypatch: pytest.MonkeyPatch) -> None:
    _gpus(monkeypatch, 0, mps=True)
    assert check_device("mps", where="--device") == "mps"
