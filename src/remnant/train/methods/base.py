"""The interface every removal method implements (docs/methods.md; Annex B.6; R23/R24 parameter records).

A removal method is one small module holding one class, registered with ``@register("method", NAME, VERSION)``
and imported from ``remnant.train.methods.__init__``. It subclasses :class:`RemovalMethod` and declares:

* class attributes: ``kind`` (``"loss"`` or ``"procedure"``), ``formula`` (one line, shown by ``remnant methods
  show``), ``source`` (where its defaults come from), ``needs_reference`` (a frozen copy of the starting model is
  built and passed in), ``needs_alternates`` (``None``, ``"idk"`` or ``"alternate"``: alternate answers per forget
  item, see :meth:`RemovalMethod.alternates`), ``needs_control`` (the never-modified control model is required);
* its own parameters as keyword-only ``__init__`` arguments with defaults, ending in ``**common`` which it passes
  to ``super().__init__``. The common training parameters (:data:`COMMON_DEFAULTS`: lr, epochs, batch, ...) are
  merged into the class's signature automatically, so ``registry.defaults("method", NAME)`` and ``remnant methods
  show NAME`` list every parameter and ``registry.create`` records every value. A method overrides a common
  default by naming it in its own signature (UNDIAL: ``lr: float = 1e-4``) and passing it on.

Two hooks, one per kind:

* ``kind = "loss"``: :meth:`RemovalMethod.loss` ``(model, batch, ctx) -> LossTerms`` is called once per
  micro-batch by the one training loop (``remnant.train.loop``). ``batch.forget`` is a right-padded collated
  batch (``input_ids``, ``attention_mask``, ``labels`` with -100 on prompt and padding: answer-only loss) of
  forget items; ``batch.retain`` holds one retain item drawn per forget item (the loop's generator; None when
  the data has no retain set); ``batch.alternate`` holds, row-aligned with ``batch.forget``, the same questions
  with an alternate answer (IDK or generated), None unless ``needs_alternates``. ``ctx.reference`` is the
  frozen starting model (eval mode, no grad) when ``needs_reference``. Optional :meth:`RemovalMethod.setup`
  runs once before training (e.g. RMU draws its control vector there from ``ctx.generator``, which is derived
  from the removal seed only, so a resumed run draws the same vector).
* ``kind = "procedure"``: :meth:`RemovalMethod.run` ``(ctx) -> TrainOutcome`` does the whole removal (task-vector
  negation, retraining from the control). ``ctx.train(pairs_or_objective, config)`` runs the same loop.

Data: :class:`RemovalData` (plain question/answer text: forget = the removal split, retain = installed items
that must stay, alternates = per forget item). ``remnant.train.removal.apply_removal`` encodes it with the
model's prompt format (``remnant.models.prompts.encode_pair``), builds the reference, calls the hooks, and
returns a :class:`remnant.train.removal.RemovalResult`. Shared loss pieces (per-sequence NLL, mean NLL, retain
NLL/KL, log-ratio against the reference) live in ``remnant.train.losses``.

OpenUnlearning parity: a method with an OpenUnlearning counterpart takes ``compat`` (``"remnant"``, the default,
or ``"openunlearning"``; :mod:`remnant.train.methods.compat`), recorded like every parameter. Under
``"openunlearning"`` its loss on a collated batch equals their trainer's ``compute_loss``, quirks included; where
the default differs, the method's docstring says how in one line and ``docs/methods.md`` tabulates it.

Determinism: no method seeds or draws from global RNGs; randomness comes from ``ctx.generator``.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from remnant.models.prompts import EncodedPair, PromptFormat
    from remnant.train.loop import TrainConfig, TrainOutcome

#: Training parameters every method takes (OpenUnlearning TOFU unlearn defaults: finetune.yaml + tofu/default.yaml,
#: docs/methods.md). Per-method overrides sit in the method's own signature.
COMMON_DEFAULTS: dict[str, Any] = {
    "lr": 1e-5,
    "epochs": 10,
    "batch_size": 8,
    "grad_accum": 4,
    "weight_decay": 0.01,
    "warmup_epochs": 1.0,
    "schedule": "linear",
    "max_grad_norm": 1.0,
    "bf16": False,
    "lora_rank": None,
    "lora_alpha": None,
    "trainable": None,
    "divergence_factor": 20.0,
}


@dataclass(frozen=True)
class QA:
    """One question with the answer a method trains toward or away from."""

    question: str
    answer: str


@dataclass(frozen=True)
class RemovalData:
    """What a removal sees: forget (removal split), retain (installed items that must stay), alternates.

    ``alternates[i]`` are alternate answers to ``forget[i].question`` (empty tuple: the method's
    :meth:`RemovalMethod.alternates` hook supplies them when it ``needs_alternates``).
    """

    forget: tuple[QA, ...]
    retain: tuple[QA, ...] = ()
    alternates: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class EncodedData:
    """:class:`RemovalData` tokenised with the model's prompt format (answer-only labels)."""

    forget: tuple[EncodedPair, ...]
    retain: tuple[EncodedPair, ...]
    alternates: tuple[tuple[EncodedPair, ...], ...]
    pad_id: int


@dataclass(frozen=True)
class MethodBatch:
    """One micro-batch for a loss hook: collated dicts (``input_ids``, ``attention_mask``, ``labels``)."""

    forget: dict[str, torch.Tensor]
    retain: dict[str, torch.Tensor] | None
    alternate: dict[str, torch.Tensor] | None
    forget_index: tuple[int, ...]


@dataclass
class StepContext:
    """What a loss hook may use besides the model and batch. ``state`` holds what ``setup`` prepared."""

    reference: Any | None
    generator: torch.Generator
    state: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LossTerms:
    """The loss to back-propagate and its logged parts (floats, e.g. ``{"forget": .., "retain": ..}``)."""

    loss: torch.Tensor
    parts: Mapping[str, float] = field(default_factory=dict)


@dataclass
class ProcedureContext:
    """What a whole-procedure method receives. It modifies ``model`` in place and returns the loop outcome.

    ``control`` is the never-modified model (None unless given), ``reference`` a frozen copy of the starting
    model when ``needs_reference``; ``train(objective_or_pairs, config)`` runs the one training loop on
    ``model`` with this run's checkpointing, progress and seed.
    """

    model: Any
    tokenizer: Any
    fmt: PromptFormat
    data: EncodedData
    control: PreTrainedModel | None
    reference: Any | None
    generator: torch.Generator
    config: TrainConfig
    train: Any  # Callable[[Any, TrainConfig], TrainOutcome]; kept Any to avoid a torch import at type level


def _merged_signature(cls: type) -> inspect.Signature:
    """The subclass's own keyword parameters plus every common one it does not override."""
    own = inspect.signature(cls.__dict__["__init__"])
    params = [p for p in own.parameters.values() if p.kind is not p.VAR_KEYWORD]
    names = {p.name for p in params}
    for name, default in COMMON_DEFAULTS.items():
        if name not in names:
            params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default))
    return own.replace(parameters=params)


class RemovalMethod:
    """Base class of removal methods (see the module docstring for the contract)."""

    kind: ClassVar[Literal["loss", "procedure"]] = "loss"
    formula: ClassVar[str] = ""
    source: ClassVar[str] = "docs/methods.md"
    #: Plain (not ClassVar) so an instance may decide from its parameters (GradDiff with a KL retain term).
    needs_reference: bool = False
    needs_alternates: ClassVar[Literal["idk", "alternate"] | None] = None
    #: Plain too: a task vector taken from the install (installed − control) needs the control, one fine-tuned
    #: on the forget set does not.
    needs_control: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__.__signature__ = _merged_signature(cls)  # type: ignore[attr-defined]

    def __init__(
        self,
        *,
        lr: float = COMMON_DEFAULTS["lr"],
        epochs: float = COMMON_DEFAULTS["epochs"],
        batch_size: int = COMMON_DEFAULTS["batch_size"],
        grad_accum: int = COMMON_DEFAULTS["grad_accum"],
        weight_decay: float = COMMON_DEFAULTS["weight_decay"],
        warmup_epochs: float = COMMON_DEFAULTS["warmup_epochs"],
        schedule: str = COMMON_DEFAULTS["schedule"],
        max_grad_norm: float | None = COMMON_DEFAULTS["max_grad_norm"],
        bf16: bool = COMMON_DEFAULTS["bf16"],
        lora_rank: int | None = COMMON_DEFAULTS["lora_rank"],
        lora_alpha: float | None = COMMON_DEFAULTS["lora_alpha"],
        trainable: Sequence[str] | None = COMMON_DEFAULTS["trainable"],
        divergence_factor: float = COMMON_DEFAULTS["divergence_factor"],
    ) -> None:
        self.lr = lr
        self.epochs = epochs
        self.batch_size = batch_size
        self.grad_accum = grad_accum
        self.weight_decay = weight_decay
        self.warmup_epochs = warmup_epochs
        self.schedule = schedule
        self.max_grad_norm = max_grad_norm
        self.bf16 = bf16
        self.lora_rank = lora_rank
        self.lora_alpha = lora_alpha
        self.trainable = tuple(trainable) if trainable is not None else None
        self.divergence_factor = divergence_factor

    # -- configuration -------------------------------------------------------------------------------------
    def train_config(self, *, seed: int, progress: bool = False, **overrides: Any) -> TrainConfig:
        """The loop configuration this method's common parameters describe (``overrides`` win)."""
        from remnant.train.loop import LoraSpec, TrainConfig

        lora = None
        if self.lora_rank is not None:
            lora = LoraSpec(rank=self.lora_rank, alpha=self.lora_alpha or 2.0 * self.lora_rank)
        # every common parameter is a TrainConfig field of the same name, but for the two LoRA ones
        values: dict[str, Any] = {k: getattr(self, k) for k in COMMON_DEFAULTS if not k.startswith("lora_")}
        values.update(lora=lora, seed=seed, progress=progress)
        values.update(overrides)
        return TrainConfig(**values)

    # -- hooks ---------------------------------------------------------------------------------------------
    def alternates(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        fmt: PromptFormat,
        forget: Sequence[QA],
        generator: torch.Generator,
    ) -> list[list[str]] | None:
        """Alternate answers per forget item, for methods with ``needs_alternates``.

        Default: for ``"idk"`` the whole IDK bank per item (the loop draws one per visit from its sampling
        generator, as ``QAwithIdkDataset`` draws one line per item), otherwise none.
        """
        if self.needs_alternates == "idk":
            from remnant.train.methods.idk import IDK_BANK

            return [list(IDK_BANK) for _ in forget]
        return None

    def setup(self, model: PreTrainedModel, ctx: StepContext) -> None:
        """Called once before the first step of a loss method (default: nothing)."""

    def loss(self, model: PreTrainedModel, batch: MethodBatch, ctx: StepContext) -> LossTerms:
        """The step-level loss of a ``kind = "loss"`` method."""
        raise NotImplementedError(f"{type(self).__name__} is a {self.kind} method without a loss hook")

    def run(self, ctx: ProcedureContext) -> TrainOutcome:
        """The whole removal of a ``kind = "procedure"`` method (modifies ``ctx.model`` in place)."""
        raise NotImplementedError(f"{type(self).__name__} is a {self.kind} method without a run hook")


__all__ = [
    "COMMON_DEFAULTS",
    "QA",
    "EncodedData",
    "LossTerms",
    "MethodBatch",
    "ProcedureContext",
    "RemovalData",
    "RemovalMethod",
    "StepContext",
]
