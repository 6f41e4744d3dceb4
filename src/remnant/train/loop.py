"""The one training loop: install, removal, retraining and relearning all run through :func:`train`.

* Answer-only loss: objectives see right-padded batches with labels masked on the prompt (``encode_pair``).
* Full fine-tuning, a subset of parameters (``trainable`` regexes) or LoRA (peft; A matrices re-drawn from the
  run's generator so adapters are reproducible).
* AdamW; linear / cosine / constant schedule with warmup, computed from the step number (no scheduler object,
  so resuming needs no scheduler state); gradient accumulation; optional bf16 autocast on CPU.
* Deterministic for a seed without global seeding: the data order of epoch ``e`` is a permutation from a
  generator seeded by ``derive_seed(seed, "order", e)``; anything else random (retain sampling, alternates)
  draws from one sampling generator whose state is checkpointed. The model runs in eval mode while training
  because dropout would draw from the global RNG (the models used here have dropout 0 anyway).
* Checkpoints at declared positions (in epochs, e.g. 0.25 inside the first epoch: C-W3), at every epoch end and
  at the end; ``on_checkpoint(model, point)`` receives the model at each so relearning can score it. A reply
  mapping with ``"stop": True`` ends the run early (installation stops at its declared level, R2).
* Resumable: with ``checkpoint_dir`` the trainable weights (safetensors), optimizer state and sampling-generator
  state (``torch.save`` of tensors, loaded with ``weights_only=True``) and a JSON state are written at each
  checkpoint; ``resume=True`` continues from the last one and reaches bitwise the same weights.
* Divergence (Annex B.6): a non-finite loss or gradient, or a loss above ``divergence_factor × max(|initial|, 1)``,
  stops the run and returns a *diverged* outcome with the step and reason (no exception unless asked).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import torch

from remnant.atomic import replace_dir
from remnant.errors import ConfigError, DivergedError
from remnant.registry import jsonable
from remnant.statement.canonical import canonical_sha256, derive_seed

if TYPE_CHECKING:  # methods import the loop, so the loop must not import the methods package at run time
    from transformers import PreTrainedModel

    from remnant.train.methods.base import LossTerms

Status = Literal["completed", "stopped", "diverged"]


def make_generator(seed: int, *parts: str | int) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with the one ``derive_seed`` (never the global RNG)."""
    return torch.Generator().manual_seed(derive_seed(seed, *parts))


@dataclass(frozen=True)
class LoraSpec:
    """LoRA adapters (peft). ``targets="all-linear"`` adapts every linear layer but the output head."""

    rank: int = 8
    alpha: float = 16.0
    dropout: float = 0.0
    targets: str | tuple[str, ...] = "all-linear"


@dataclass(frozen=True, kw_only=True)
class TrainerSettings:
    """Optimiser settings that installation and relearning both declare (R23, C-W1); each adds its own budget.

    One definition, so a setting added for one stage cannot silently be missing from the other's record.
    """

    batch_size: int = 8
    grad_accum: int = 1
    weight_decay: float = 0.0
    warmup_epochs: float = 0.0
    schedule: str = "constant"
    max_grad_norm: float | None = 1.0
    bf16: bool = False
    lora: LoraSpec | None = None
    trainable: tuple[str, ...] | None = None

    def trainer_config(
        self, *, lr: float, epochs: float, seed: int, progress: bool, desc: str, **extra: Any
    ) -> TrainConfig:
        """The loop's TrainConfig for these settings, a budget (lr, epochs) and stage-specific ``extra``."""
        # fields of this class only (not asdict: LoraSpec stays a dataclass; not a subclass's own fields)
        shared = {f.name: getattr(self, f.name) for f in fields(TrainerSettings)}
        return TrainConfig(
            lr=lr, epochs=float(epochs), seed=seed, progress=progress, desc=desc, **shared, **extra
        )


@dataclass(frozen=True, kw_only=True)
class TrainConfig(TrainerSettings):
    """Everything that determines a run (with the data and the starting weights): the optimiser settings, the
    budget and where to checkpoint."""

    lr: float = 1e-5
    epochs: float = 1.0
    schedule: str = "linear"
    checkpoint_epochs: tuple[float, ...] = ()
    score_at_start: bool = False
    save_every: int | None = None
    divergence_factor: float = 20.0
    seed: int = 0
    progress: bool = True
    desc: str = "train"

    def __post_init__(self) -> None:
        if self.schedule not in ("linear", "cosine", "constant"):
            raise ConfigError(f"train: schedule must be linear, cosine or constant, not {self.schedule!r}")
        if self.batch_size < 1 or self.grad_accum < 1 or self.epochs <= 0:
            raise ConfigError("train: batch_size and grad_accum must be >= 1 and epochs > 0")
        if any(f <= 0 for f in self.checkpoint_epochs):
            raise ConfigError("train: checkpoint positions are epochs > 0 (use score_at_start for step 0)")

    def fingerprint(self) -> str:
        """What must match for a resume: everything except display settings."""
        d = asdict(self)
        for k in ("progress", "desc", "save_every"):
            d.pop(k)
        return canonical_sha256(jsonable(d))


class Objective(Protocol):
    """A training objective over ``n`` anchor examples (an epoch is one pass over them)."""

    n: int

    def __call__(
        self, model: PreTrainedModel, indices: Sequence[int], generator: torch.Generator
    ) -> LossTerms: ...


@dataclass(frozen=True)
class CheckpointPoint:
    """Where a checkpoint falls: optimizer step, position in epochs, and the loss of the last step."""

    step: int
    epoch: float
    loss: float | None


@dataclass(frozen=True)
class CheckpointRecord(CheckpointPoint):
    """A checkpoint and what the callback measured there (JSON-ready values)."""

    scores: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TrainOutcome:
    """How a run ended. ``status`` is completed, stopped (a checkpoint reply asked to) or diverged."""

    status: Status
    steps: int
    total_steps: int
    steps_per_epoch: int
    losses: tuple[float, ...]
    initial_loss: float | None
    checkpoints: tuple[CheckpointRecord, ...]
    diverged_step: int | None = None
    reason: str | None = None
    resumed_from: int | None = None
    seconds: float = 0.0

    @property
    def diverged(self) -> bool:
        return self.status == "diverged"

    @property
    def epochs_done(self) -> float:
        return self.steps / self.steps_per_epoch if self.steps_per_epoch else 0.0

    def raise_if_diverged(self) -> None:
        if self.diverged:
            raise DivergedError(
                f"training diverged at step {self.diverged_step}: {self.reason}",
                step=int(self.diverged_step or 0),
                reason=str(self.reason),
            )

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["epochs_done"] = self.epochs_done
        return d


CheckpointCallback = Callable[[Any, CheckpointPoint], Mapping[str, Any] | None]
StepCallback = Callable[[int, float], None]


def prepare_model(model: PreTrainedModel, config: TrainConfig) -> Any:
    """Apply LoRA or the ``trainable`` selection; returns the model to train (peft-wrapped for LoRA)."""
    if config.lora is not None:
        from peft import LoraConfig, get_peft_model

        targets = config.lora.targets if isinstance(config.lora.targets, str) else list(config.lora.targets)
        peft_model = get_peft_model(
            model,
            LoraConfig(
                r=config.lora.rank,
                lora_alpha=config.lora.alpha,  # type: ignore[arg-type]  # peft annotates int, accepts float
                lora_dropout=config.lora.dropout,
                target_modules=targets,
            ),
        )
        gen = make_generator(config.seed, "lora-init")
        with torch.no_grad():
            for name, p in sorted(peft_model.named_parameters()):
                if "lora_A" in name:  # peft draws these from the global RNG; redraw them from ours
                    torch.nn.init.kaiming_uniform_(p, a=math.sqrt(5), generator=gen)
        return peft_model
    if config.trainable is None:
        for p in model.parameters():  # full fine-tuning: undo any earlier partial selection
            p.requires_grad_(True)
    else:
        patterns = [re.compile(p) for p in config.trainable]
        chosen = 0
        for name, p in model.named_parameters():
            p.requires_grad_(any(pt.search(name) for pt in patterns))
            chosen += int(p.requires_grad)
        if chosen == 0:
            raise ConfigError(f"train: no parameter matches trainable={list(config.trainable)}")
    return model


def merge_lora(model: Any) -> Any:
    """The plain model with LoRA adapters merged in (a no-op for models without adapters)."""
    return model.merge_and_unload() if hasattr(model, "merge_and_unload") else model


def lr_factor(step: int, total: int, warmup: int, schedule: str) -> float:
    """Learning-rate multiplier at optimizer step ``step`` (0-based), HF-style warmup then decay."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup  # first step is not wasted at lr 0
    if schedule == "constant":
        return 1.0
    progress = (step - warmup) / max(1, total - warmup)
    if schedule == "linear":
        return max(0.0, 1.0 - progress)
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def checkpoint_steps(config: TrainConfig, steps_per_epoch: int, total: int) -> list[int]:
    """Declared positions (epochs → steps, at least 1), every epoch end, and the last step."""
    steps = {min(total, max(1, round(f * steps_per_epoch))) for f in config.checkpoint_epochs}
    steps |= {min(total, k * steps_per_epoch) for k in range(1, math.ceil(config.epochs) + 1)}
    steps.add(total)
    if config.score_at_start:
        steps.add(0)
    return sorted(steps)


def _trainable(model: PreTrainedModel) -> list[tuple[str, torch.nn.Parameter]]:
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]


@dataclass
class _Run:
    """One run's fixed plan and its moving position (mutable: the loop advances it step by step).

    ``step``, ``losses``, ``initial`` and ``records`` are what a checkpoint saves and a resume restores.
    """

    model: Any
    objective: Objective
    config: TrainConfig
    params: list[torch.nn.Parameter]
    optimizer: torch.optim.Optimizer
    gen: torch.Generator
    folder: Path | None
    on_checkpoint: CheckpointCallback | None
    steps_per_epoch: int
    total: int
    warmup: int
    checkpoint_at: list[int]
    started: float
    step: int = 0
    losses: list[float] = field(default_factory=list)
    initial: float | None = None
    records: list[CheckpointRecord] = field(default_factory=list)
    resumed_from: int | None = None

    def save(self) -> None:
        """Write the resumable state to ``folder`` (nothing without one)."""
        if self.folder is None:
            return
        from safetensors.torch import save_file

        meta = {
            "fingerprint": self.config.fingerprint(),
            "step": self.step,
            "losses": self.losses,
            "initial_loss": self.initial,
            "records": [asdict(r) for r in self.records],
        }

        def build(tmp: Path) -> None:
            weights = {n: p.detach().contiguous().clone() for n, p in _trainable(self.model)}
            save_file(weights, tmp / "weights.safetensors")
            torch.save(
                {"optimizer": self.optimizer.state_dict(), "generator": self.gen.get_state()},
                tmp / "optim.pt",
            )
            (tmp / "state.json").write_text(json.dumps(meta, sort_keys=True), encoding="utf-8")

        replace_dir(self.folder / "last", build)

    def checkpoint(self) -> bool:
        """Hand the model to ``on_checkpoint``, record its reply, save; True when the reply asks to stop."""
        point = CheckpointPoint(
            step=self.step,
            epoch=self.step / self.steps_per_epoch,
            loss=self.losses[-1] if self.losses else None,
        )
        on_checkpoint = self.on_checkpoint
        reply = dict(on_checkpoint(self.model, point) or {}) if on_checkpoint is not None else {}
        stop = bool(reply.pop("stop", False))
        self.records.append(CheckpointRecord(point.step, point.epoch, point.loss, reply))
        self.save()
        return stop

    def outcome(self, status: Status, div_step: int | None = None, reason: str | None = None) -> TrainOutcome:
        return TrainOutcome(
            status=status,
            steps=self.step,
            total_steps=self.total,
            steps_per_epoch=self.steps_per_epoch,
            losses=tuple(self.losses),
            initial_loss=self.initial,
            checkpoints=tuple(self.records),
            diverged_step=div_step,
            reason=reason,
            resumed_from=self.resumed_from,
            seconds=time.perf_counter() - self.started,
        )


def _start(
    model: PreTrainedModel,
    objective: Objective,
    config: TrainConfig,
    on_checkpoint: CheckpointCallback | None,
    checkpoint_dir: str | Path | None,
) -> _Run:
    """The run's plan: steps per epoch, total and warmup steps, checkpoint steps, the optimizer and the
    sampling generator. ConfigError for an objective without examples or a model with nothing to train."""
    started = time.perf_counter()
    n = objective.n
    if n < 1:
        raise ConfigError("train: the objective has no examples")
    steps_per_epoch = math.ceil(n / (config.batch_size * config.grad_accum))
    total = math.ceil(config.epochs * steps_per_epoch)
    params = [p for _, p in _trainable(model)]
    if not params:
        raise ConfigError("train: the model has no trainable parameters")
    return _Run(
        model=model,
        objective=objective,
        config=config,
        params=params,
        optimizer=torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay, foreach=False),
        gen=make_generator(config.seed, "sample"),
        folder=Path(checkpoint_dir) if checkpoint_dir is not None else None,
        on_checkpoint=on_checkpoint,
        steps_per_epoch=steps_per_epoch,
        total=total,
        warmup=round(config.warmup_epochs * steps_per_epoch),
        checkpoint_at=checkpoint_steps(config, steps_per_epoch, total),
        started=started,
    )


def _resume(run: _Run) -> None:
    """Continue from the state saved in the run's folder, if any (its config fingerprint must match)."""
    folder = run.folder
    if folder is None or not (folder / "last" / "state.json").exists():
        return
    from safetensors.torch import load_file

    last = folder / "last"
    weights = load_file(str(last / "weights.safetensors"))
    with torch.no_grad():
        for n, p in _trainable(run.model):
            if n not in weights:
                raise ConfigError(f"{last}: checkpoint lacks parameter {n!r}; it belongs to another run")
            p.copy_(weights[n])
    blob = torch.load(last / "optim.pt", weights_only=True)
    run.optimizer.load_state_dict(blob["optimizer"])
    run.gen.set_state(blob["generator"])
    meta = json.loads((last / "state.json").read_text(encoding="utf-8"))
    if meta["fingerprint"] != run.config.fingerprint():
        raise ConfigError(f"{folder}: saved run has a different training config; cannot resume it")
    run.step, run.losses, run.initial = int(meta["step"]), list(meta["losses"]), meta["initial_loss"]
    run.records = [CheckpointRecord(**r) for r in meta["records"]]
    run.resumed_from = run.step


def _accumulate(run: _Run) -> tuple[float, str | None]:
    """Forward and backward over the current step's micro-batches in the epoch's data order: the step's mean
    loss, or the reason it diverged (a non-finite loss)."""
    config, per_step = run.config, run.config.batch_size * run.config.grad_accum
    epoch, pos = divmod(run.step, run.steps_per_epoch)
    order = torch.randperm(run.objective.n, generator=make_generator(config.seed, "order", epoch)).tolist()
    group = order[pos * per_step : (pos + 1) * per_step]
    micro = [group[i : i + config.batch_size] for i in range(0, len(group), config.batch_size)]
    step_loss = 0.0
    for idx in micro:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=config.bf16):
            terms = run.objective(run.model, idx, run.gen)
        value = float(terms.loss.detach())
        if not math.isfinite(value):
            return step_loss, f"non-finite loss {value}"
        (terms.loss / len(micro)).backward()  # type: ignore[no-untyped-call]
        step_loss += value / len(micro)
    return step_loss, None


def _optimizer_step(run: _Run) -> str | None:
    """One optimizer step at the scheduled learning rate, or, instead of stepping, the reason it diverged
    (Annex B.6, module docstring)."""
    config = run.config
    lr = config.lr * lr_factor(run.step, run.total, run.warmup, config.schedule)
    for g in run.optimizer.param_groups:
        g["lr"] = lr
    run.optimizer.zero_grad(set_to_none=True)
    step_loss, diverged = _accumulate(run)
    if diverged is not None:
        return diverged
    if run.initial is None:
        run.initial = step_loss
    limit = config.divergence_factor * max(abs(run.initial), 1.0)
    if step_loss > limit:
        return f"loss {step_loss:.4g} > {limit:.4g} (factor × initial)"
    if config.max_grad_norm is not None:
        norm = float(torch.nn.utils.clip_grad_norm_(run.params, config.max_grad_norm))
        if not math.isfinite(norm):
            return f"non-finite gradient norm {norm}"
    run.optimizer.step()
    run.step += 1
    run.losses.append(step_loss)
    return None


def train(
    model: Any,
    objective: Objective,
    config: TrainConfig,
    *,
    on_checkpoint: CheckpointCallback | None = None,
    on_step: StepCallback | None = None,
    checkpoint_dir: str | Path | None = None,
    resume: bool = False,
) -> TrainOutcome:
    """Train ``model`` in place (call :func:`prepare_model` first for LoRA / partial training).

    ``on_step(step, loss)`` runs after each optimizer step (a test may raise from it to simulate a kill).
    With ``resume=True`` and a saved state in ``checkpoint_dir``, training continues from it; the config
    fingerprint must match.
    """
    run = _start(model, objective, config, on_checkpoint, checkpoint_dir)
    if resume:
        _resume(run)
    model.eval()
    if run.step == 0 and config.score_at_start and run.checkpoint():
        return run.outcome("stopped")
    from tqdm.auto import tqdm  # type: ignore[import-untyped]

    bar = tqdm(total=run.total, initial=run.step, disable=not config.progress, desc=config.desc, leave=False)
    try:
        while run.step < run.total:
            diverged = _optimizer_step(run)
            if diverged is not None:
                return run.outcome("diverged", run.step + 1, diverged)
            bar.update(1)
            bar.set_postfix(loss=f"{run.losses[-1]:.4f}", refresh=False)
            if on_step is not None:
                on_step(run.step, run.losses[-1])
            if run.step in run.checkpoint_at:
                if run.checkpoint():
                    return run.outcome("stopped")
            elif config.save_every and run.step % config.save_every == 0:
                run.save()
    finally:
        bar.close()
    return run.outcome("completed")


__all__ = [
    "CheckpointPoint",
    "CheckpointRecord",
    "LoraSpec",
    "Objective",
    "TrainConfig",
    "TrainOutcome",
    "checkpoint_steps",
    "lr_factor",
    "make_generator",
    "merge_lora",
    "prepare_model",
    "train",
]
