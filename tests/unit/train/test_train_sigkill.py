"""A training run killed with SIGKILL (no cleanup, no exception handler) resumes to the uninterrupted weights.

The in-process kill test in ``test_train_loop.py`` raises an exception; this one kills a real child process at
step 5 so that only what the loop wrote atomically to disk survives (R23: a crash costs at most the cell
in flight).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch
from _train_tiny import fresh, pairs, qa, same, weights

from remnant.models import load_model
from remnant.train.loop import TrainConfig, train
from remnant.train.objectives import PairsObjective

CONFIG = {"lr": 3e-3, "epochs": 3, "batch_size": 4, "grad_accum": 1, "save_every": 1, "progress": False}

CHILD = """
import os, signal, sys
sys.path[:0] = [{tests!r}, {unit_train!r}]
import torch
torch.set_num_threads(1)
from _train_tiny import pairs, qa
from remnant.models import load_model
from remnant.train.loop import TrainConfig, train
from remnant.train.objectives import PairsObjective
state = load_model({model!r})
obj = PairsObjective(pairs(state.tokenizer, qa("install")[:16]), int(state.tokenizer.pad_token_id))
def die(step, loss):
    if step == 5:
        os.kill(os.getpid(), signal.SIGKILL)
train(state.model, obj, TrainConfig(**{config!r}), on_step=die, checkpoint_dir={ckpt!r})
"""


def _objective(state: Any) -> PairsObjective:
    return PairsObjective(pairs(state.tokenizer, qa("install")[:16]), int(state.tokenizer.pad_token_id))


def test_sigkilled_run_resumes_to_the_uninterrupted_weights(tiny_llama_dir: Path, tmp_path: Path) -> None:
    tests = Path(__file__).resolve().parents[2]
    ckpt = tmp_path / "ckpt"
    code = CHILD.format(
        tests=str(tests),
        unit_train=str(Path(__file__).parent),
        model=str(tiny_llama_dir),
        config=CONFIG,
        ckpt=str(ckpt),
    )
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    assert any(ckpt.iterdir())  # the child got far enough to leave a checkpoint behind

    state = load_model(tiny_llama_dir)
    obj = _objective(state)
    reference = fresh(state)
    ref = train(reference, obj, TrainConfig(**CONFIG))
    resumed = fresh(state)  # a new process starts from the original weights and the checkpoint folder
    out = train(resumed, obj, TrainConfig(**CONFIG), checkpoint_dir=ckpt, resume=True)
    assert out.resumed_from is not None and 0 < out.resumed_from <= 5
    assert out.losses == ref.losses
    assert same(weights(resumed), weights(reference))
    assert not torch.equal(next(iter(weights(resumed).values())), next(iter(weights(fresh(state)).values())))
