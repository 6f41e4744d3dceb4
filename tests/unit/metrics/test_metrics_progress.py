"""``remnant eval --no-progress`` prints no progress bar at all: transformers' "Loading weights" bar and
huggingface_hub's bars are off while the model loads, and their process-wide switches are as they were after
(R23: the eval output is the record; stderr carries only what the user asked for)."""

from __future__ import annotations

from pathlib import Path

import pytest
from metrics_data import write_tofu_folder

from remnant.cli import main

LOADING = "Loading weights"


def _eval_stderr(model: Path, data: Path, out: Path, capfd: pytest.CaptureFixture[str], *extra: str) -> str:
    argv = ["eval", str(model), "--data", str(data), "--out", str(out), "--metrics", "forget_Q_A_Prob"]
    capfd.readouterr()
    assert main([*argv, *extra]) == 0
    return capfd.readouterr().err


def test_no_progress_silences_the_loading_bar_and_restores_the_switches(
    tiny_llama_dir: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import importlib

    from transformers.utils import logging as hf_logging

    hub = importlib.import_module("huggingface_hub.utils.tqdm")
    data = write_tofu_folder(tmp_path / "tofu")
    before = (hf_logging.is_progress_bar_enabled(), dict(hub.progress_bar_states))
    quiet = _eval_stderr(tiny_llama_dir, data, tmp_path / "quiet", capfd, "--no-progress")
    assert LOADING not in quiet
    assert (hf_logging.is_progress_bar_enabled(), dict(hub.progress_bar_states)) == before
    # the same run with progress shows the bar: the assertion above is about --no-progress, not the model
    assert hf_logging.is_progress_bar_enabled() and not hub.are_progress_bars_disabled()
    assert LOADING in _eval_stderr(tiny_llama_dir, data, tmp_path / "loud", capfd)


def test_a_quiet_load_puts_back_switches_that_were_already_off(tiny_llama_dir: Path) -> None:
    """Switches set before the load (transformers' bars off, one hub group off) are as they were after it."""
    import importlib

    from transformers.utils import logging as hf_logging

    from remnant.models.load import load_model

    hub = importlib.import_module("huggingface_hub.utils.tqdm")
    saved = dict(hub.progress_bar_states)
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    hub.progress_bar_states.clear()
    hub.progress_bar_states.update({"_global": True, "huggingface_hub.http_get": False})
    try:
        load_model(tiny_llama_dir, progress=False)
        assert not hf_logging.is_progress_bar_enabled()
        assert hub.progress_bar_states == {"_global": True, "huggingface_hub.http_get": False}
    finally:
        hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]
        hub.progress_bar_states.clear()
        hub.progress_bar_states.update(saved)
