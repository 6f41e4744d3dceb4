"""The interface every removal method implements (docs/methods.md; Annex B.6; R23/R24 parameter records).

A method is one module holding one class, registered with ``@register("method", NAME, VERSION)`` and imported
from ``remnant.train.methods.__init__``. It subclasses :class:`RemovalMethod`, sets the class attributes
documented there, and takes its own parameters as keyword-only ``__init__`` arguments with defaults, ending in
``**common`` passed to ``super().__init__``. The common training parameters (:data:`COMMON_DEFAULTS`) are
merged into the class's signature, so ``registry.defaults``, ``remnant methods show`` and ``registry.create``
see and record every parameter; a method overrides a common default by naming it in its own signature
(UNDIAL's ``lr``).

Two hooks, one per kind:

* ``kind = "loss"``: :meth:`RemovalMethod.loss` is called once per micro-batch by the one training loop on a
  :class:`MethodBatch` (right-padded, labels -100 on prompt and padding: answer-only loss). Optional
  :meth:`RemovalMethod.setup` runs once before training; randomness there comes from ``ctx.generator``,
  derived from the removal seed only, so a resumed run draws the same (RMU's control vector).
* ``kind = "procedure"``: :meth:`RemovalMethod.run` does the whole removal (task-vector negation, retraining
  from the control); ``ctx.train(pairs_or_objective, config)`` runs the same loop.

``remnant.train.removal.apply_removal`` encodes :class:`RemovalData` with the model's prompt format, builds
the reference, calls the hooks and returns a ``RemovalResult``; shared loss pieces live in
``remnant.train.losses``. A method with an OpenUnlearning counterpart takes ``compat``
(:mod:`remnant.train.methods.compat`). No method seeds or draws from global RNGs.
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
    from remnant.packs.schema import Item, Pack
    from remnant.train.loop import TrainConfig, TrainOutcome


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
    #: The pack the sets come from and its items behind ``forget`` (row-aligned), where they come from a pack
    #: (:func:`remnant.train.data.removal_data`): a method that derives alternates from the facts reads them.
    pack: Pack | None = None
    forget_items: tuple[Item, ...] = ()


@dataclass(frozen=True)
class EncodedData:
    """:class:`RemovalData` tokenised with the model's prompt format (answer-only labels)."""

    forget: tuple[EncodedPair, ...]
    retain: tuple[EncodedPair, ...]
    alternates: tuple[tuple[EncodedPair, ...], ...]
    pad_id: int


@dataclass(frozen=True)
class MethodBatch:
    """One micro-batch for a loss hook: collated dicts (``input_ids``, ``attention_mask``, ``labels``).

    ``retain`` holds one retain item drawn per forget item (None without a retain set); ``alternate`` the
    forget questions with an alternate answer, row-aligned with ``forget`` (None unless ``needs_alternates``).
    """

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
    formula: ClassVar[str] = ""  # one line, shown by ``remnant methods show``
    source: ClassVar[str] = "docs/methods.md"  # where the defaults come from
    #: A frozen copy of the starting model is passed as ``ctx.reference``. Plain (not ClassVar) so an instance
    #: may decide from its parameters (GradDiff with a KL retain term).
    needs_reference: bool = False
    #: Alternate answers per forget item are needed (:meth:`alternates`).
    needs_alternates: ClassVar[Literal["idk", "alternate"] | None] = None
    #: The never-modified control is required. Plain too: a task vector taken from the install (installed −
    #: control) needs it, one fine-tuned on the forget set does not.
    needs_control: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__.__signature__ = _merged_signature(cls)  # type: ignore[attr-defined]

    def __init__(
        self,
        *,
        lr: float = 1e-5,
        epochs: float = 10,
        batch_size: int = 8,
        grad_accum: int = 4,
        weight_decay: float = 0.01,
        warmup_epochs: float = 1.0,
        schedule: str = "linear",
        max_grad_norm: float | None = 1.0,
        bf16: bool = False,
        lora_rank: int | None = None,
        lora_alpha: float | None = None,
        trainable: Sequence[str] | None = None,
        divergence_factor: float = 20.0,
    ) -> None:
        """The common training parameters (:data:`COMMON_DEFAULTS`), at OpenUnlearning's TOFU unlearn defaults
        (finetune.yaml + tofu/default.yaml, docs/methods.md)."""
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
        data: RemovalData,
        generator: torch.Generator,
    ) -> list[list[str]] | None:
        """Alternate answers per forget item of ``data``, for methods with ``needs_alternates``.

        Default: for ``"idk"`` the whole IDK bank per item (the loop draws one per visit from its sampling
        generator, as ``QAwithIdkDataset`` draws one line per item), otherwise none.
        """
        if self.needs_alternates == "idk":
            from remnant.train.methods.idk import IDK_BANK

            return [list(IDK_BANK) for _ in data.forget]
        return None

    def setup(self, model: PreTrainedModel, ctx: StepContext) -> None:
        """Called once before the first step of a loss method (default: nothing)."""

    def loss(self, model: PreTrainedModel, batch: MethodBatch, ctx: StepContext) -> LossTerms:
        """The step-level loss of a ``kind = "loss"`` method."""
        raise NotImplementedError(f"{type(self).__name__} is a {self.kind} method without a loss hook")

    def run(self, ctx: ProcedureContext) -> TrainOutcome:
        """The whole removal of a ``kind = "procedure"`` method (modifies ``ctx.model`` in place)."""
        raise NotImplementedError(f"{type(self).__name__} is a {self.kind} method without a run hook")


#: Training parameters every method takes, with their defaults; a method overrides one in its own signature.
COMMON_DEFAULTS: dict[str, Any] = {
    name: p.default
    for name, p in inspect.signature(RemovalMethod.__init__).parameters.items()
    if name != "self"
}


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
