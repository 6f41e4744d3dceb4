"""Run a registered removal method on a model: encode its data, build the reference, call its hook (R23, R24).

``apply_removal`` is the single entry point used by installation controls, the assessment and the demo. It
returns the post-removal model (LoRA adapters merged) and a :class:`RemovalResult` that records the method's
registered name, version and every parameter, the seed, and how training ended. A diverged removal is a
result with ``status == "diverged"``, not an exception, so an assessment records the cell and carries on
(Annex B.6).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from remnant.models.prompts import EncodedPair, PromptFormat, encode_pair, pad_id
from remnant.train.loop import (
    CheckpointCallback,
    TrainConfig,
    TrainOutcome,
    make_generator,
    merge_lora,
    prepare_model,
    train,
)
from remnant.train.methods.base import (
    EncodedData,
    ProcedureContext,
    RemovalData,
    RemovalMethod,
    StepContext,
)
from remnant.train.objectives import MethodObjective, PairsObjective

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


@dataclass(frozen=True)
class RemovalResult:
    """What a removal run records: the component (name, version, params), seed and training outcome."""

    method: Mapping[str, object]
    seed: int
    outcome: TrainOutcome

    @property
    def status(self) -> str:
        return self.outcome.status

    def to_dict(self) -> dict[str, object]:
        return {"method": dict(self.method), "seed": self.seed, "outcome": self.outcome.to_dict()}


def encode_data(tokenizer: PreTrainedTokenizerBase, fmt: PromptFormat, data: RemovalData) -> EncodedData:
    """Tokenise forget, retain and alternates with answer-only labels."""
    forget = tuple(encode_pair(tokenizer, q.question, q.answer, fmt) for q in data.forget)
    retain = tuple(encode_pair(tokenizer, q.question, q.answer, fmt) for q in data.retain)
    if data.alternates and len(data.alternates) != len(data.forget):
        raise ValueError(f"{len(data.alternates)} alternate-answer lists for {len(data.forget)} forget items")
    alts = tuple(
        tuple(encode_pair(tokenizer, q.question, a, fmt) for a in answers)
        for q, answers in zip(data.forget, data.alternates, strict=False)
    )
    return EncodedData(forget=forget, retain=retain, alternates=alts, pad_id=pad_id(tokenizer))


def frozen_copy(model: Any) -> Any:
    """A deep copy in eval mode with gradients off (the reference model of NPO/DPO/UNDIAL/RMU)."""
    ref = copy.deepcopy(model)
    ref.eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def _spec(method: RemovalMethod) -> dict[str, object]:
    spec = getattr(method, "spec", None)
    if spec is not None:
        return dict(spec.to_dict())
    return {
        "kind": "method",
        "name": getattr(method, "registry_name", type(method).__name__),
        "version": getattr(method, "registry_version", "unregistered"),
        "params": {k: v for k, v in vars(method).items() if not k.startswith("_") and k != "spec"},
    }


def apply_removal(
    method: RemovalMethod,
    model: Any,
    tokenizer: Any,
    data: RemovalData,
    *,
    seed: int,
    fmt: PromptFormat | None = None,
    control: Any | None = None,
    progress: bool = False,
    checkpoint_dir: str | Path | None = None,
    resume: bool = False,
    overrides: Mapping[str, object] | None = None,
    on_checkpoint: CheckpointCallback | None = None,
) -> tuple[Any, RemovalResult]:
    """Apply ``method`` to ``model`` (modified in place) and return the post-removal model and its record.

    ``overrides`` replace loop settings that are not method parameters (checkpoint positions, save_every).
    ``on_checkpoint`` receives the model at each checkpoint; replying ``{"stop": True}`` ends the removal there
    (a removal declared to stop at a forget level, as installation stops at its declared level, R2).
    """
    fmt = fmt or PromptFormat.for_tokenizer(tokenizer)
    if method.needs_control and control is None:
        raise ValueError(f"method {_spec(method)['name']!r} needs the never-modified control model")
    if method.needs_alternates and not data.alternates:
        alts = method.alternates(model, tokenizer, fmt, data, make_generator(seed, "alternates"))
        if alts is None:
            raise ValueError(f"method {_spec(method)['name']!r} needs alternate answers and supplied none")
        data = replace(data, alternates=tuple(tuple(a) for a in alts))
    encoded = encode_data(tokenizer, fmt, data)
    reference = frozen_copy(model) if method.needs_reference else None
    config = method.train_config(
        seed=seed, progress=progress, desc=_spec(method)["name"], **(overrides or {})
    )
    # both kinds train with this run's checkpointing and callback
    loop = partial(train, checkpoint_dir=checkpoint_dir, resume=resume, on_checkpoint=on_checkpoint)
    if method.kind == "procedure":

        def run_loop(objective: Any, cfg: TrainConfig) -> TrainOutcome:
            if isinstance(objective, Sequence) and all(isinstance(p, EncodedPair) for p in objective):
                objective = PairsObjective(objective, encoded.pad_id)
            wrapped = prepare_model(ctx.model, cfg)
            out = loop(wrapped, objective, cfg)
            ctx.model = merge_lora(wrapped)
            return out

        ctx = ProcedureContext(
            model=model,
            tokenizer=tokenizer,
            fmt=fmt,
            data=encoded,
            control=control,
            reference=reference,
            generator=make_generator(seed, "procedure"),
            config=config,
            train=run_loop,
        )
        outcome = method.run(ctx)
        result_model = ctx.model
    else:
        wrapped = prepare_model(model, config)
        sctx = StepContext(reference=reference, generator=make_generator(seed, "setup"))
        method.setup(wrapped, sctx)
        outcome = loop(wrapped, MethodObjective(method, encoded, sctx), config)
        result_model = merge_lora(wrapped)
    result_model.eval()
    return result_model, RemovalResult(method=_spec(method), seed=seed, outcome=outcome)


__all__ = ["RemovalResult", "apply_removal", "encode_data", "frozen_copy"]
