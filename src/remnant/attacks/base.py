"""The attack interface every attack module implements (Standard §4.3, C-Q1..C-Q4).

An attack is a class with its metadata as class attributes (garak's idea), registered with
``@register("attack", name, version)`` so that ``registry.create`` records every parameter (K4, R23). An attack
that does not apply to a target's response format says why, recorded as *not applicable*, never as withstood
(C-Q2). It runs on one model state through an :class:`AttackContext` that carries no hint of which state it is:
the engine runs the same attack, probes, seeds and scorer on each (C-Q4; :mod:`remnant.engine.attack`). Its
generation inputs are exposed so seed 003's ROUGE scoring decodes from exactly what κ was scored on
(:mod:`remnant.attacks.rouge_scoring`).

Randomness comes only from generators derived from the context's seed and the attack's own keys
(:meth:`AttackContext.generator`); there is no global seeding. Weight-transform attacks must not mutate the
caller's model (work on a copy, or restore it exactly). Adding an attack: docs/extending.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import torch

from remnant.attacks.decoding import GenerationInput, greedy_texts
from remnant.models.device import model_device
from remnant.models.prompts import PromptFormat, render_prompt_ids
from remnant.score.probe import RESPONSE_FORMATS, Probe, ResponseFormat
from remnant.score.scorer import Scorer
from remnant.standard.vocabulary import Surface
from remnant.statement.canonical import derive_seed

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

Track = Literal["W", "Q"]


@dataclass(frozen=True)
class ItemOutcome:
    """One probe's result under one attack on one state.

    ``kappa`` is a bool for a scored output, or a probability in [0, 1] for analytic attacks (``output`` is then
    None). ``willing`` is None where no output exists to judge. ``extra`` holds attack-specific detail
    (samples' hit counts, the prefill used, seeds), JSON-ready.
    """

    item_id: str
    output: str | None
    kappa: bool | float
    willing: bool | None
    extra: Mapping[str, object] = field(default_factory=dict)

    @property
    def is_analytic(self) -> bool:
        return not isinstance(self.kappa, bool)


@dataclass(frozen=True)
class AttackContext:
    """Everything an attack may use on one model state. Carries no label of the state (C-Q4).

    ``demonstrations`` are retain items (many-shot, the retain-demonstration ICL variants);
    ``target_demonstrations`` are question/answer items *about the target* that are not scored (e.g. the
    removal split's items on the probed entities): seed 003's ICL draws its demonstrations about the forgotten
    subject (:mod:`remnant.attacks.icl`), and uses the other probes when none are given. ``context_limit``
    caps prompt length in tokens (None: the model config's ``max_position_embeddings``).
    """

    model: Any
    tokenizer: Any
    fmt: PromptFormat
    seed: int
    demonstrations: tuple[Probe, ...] = ()
    scorer: Scorer = field(default_factory=Scorer)
    max_new_tokens: int = 32
    batch_size: int = 16
    context_limit: int | None = None
    target_demonstrations: tuple[Probe, ...] = ()

    def with_model(
        self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase | None = None
    ) -> AttackContext:
        """The same context (seed, data, scorer, budgets) on another model state (C-Q4)."""
        return replace(self, model=model, tokenizer=tokenizer if tokenizer is not None else self.tokenizer)

    @property
    def device(self) -> torch.device:
        return model_device(self.model)

    def derive_seed(self, *keys: str | int) -> int:
        return derive_seed(self.seed, *keys)

    def generator(self, *keys: str | int, device: torch.device | str | None = None) -> torch.Generator:
        """A fresh generator seeded from the run seed and ``keys`` (e.g. attack name, item id, sample)."""
        gen = torch.Generator(device=device if device is not None else self.device)
        gen.manual_seed(self.derive_seed(*keys))
        return gen

    def max_context(self) -> int:
        if self.context_limit is not None:
            return self.context_limit
        limit = getattr(self.model.config, "max_position_embeddings", None)
        return int(limit) if limit else 2048

    def prompt_ids(
        self, probe: Probe, *, prefill: str | None = None, fmt: PromptFormat | None = None
    ) -> list[int]:
        """The probe's rendered prompt ids (lettered options for multiple choice), ending at the answer."""
        return render_prompt_ids(self.tokenizer, probe.rendered_question(), fmt or self.fmt, prefill)


class Attack:
    """Base class of every attack. Subclasses set the class attributes and implement :meth:`run`."""

    name: ClassVar[str] = ""
    surface: ClassVar[Surface] = "inference_time"
    version: ClassVar[str] = "0"
    paper: ClassVar[str] = ""
    formats: ClassVar[tuple[ResponseFormat, ...]] = RESPONSE_FORMATS
    tracks: ClassVar[tuple[Track, ...]] = ("W", "Q")
    #: V read in code, N from the paper's text, R reconstructed (docs/latent.md).
    provenance: ClassVar[str] = "R"
    #: False for arms that are reported but never decide (e.g. C-W6's relearning on scored items).
    adjudicating: ClassVar[bool] = True
    #: Parameters small enough for the contract test on the tiny model (a few seconds); empty = defaults.
    smoke_params: ClassVar[dict[str, Any]] = {}
    #: Set by ``registry.create``: the name, version and every parameter this instance was built with.
    spec: Any = None

    def applicable(self, target_format: str, track: str | None = None) -> str | None:
        """None when the attack is defined for ``target_format`` (and ``track``, if given); else the reason
        it is not applicable (C-Q2: recorded as not applicable, never as withstood)."""
        if target_format not in RESPONSE_FORMATS:
            return f"unknown response format {target_format!r} (known: {', '.join(RESPONSE_FORMATS)})"
        if target_format not in self.formats:
            return (
                f"{self.name} is defined for {', '.join(self.formats)} responses, not {target_format} (C-Q2)"
            )
        if track is not None and track not in self.tracks:
            return (
                f"{self.name} ({self.surface}) is admitted under track(s) {', '.join(self.tracks)}, "
                f"not {track} (R0.2, C2)"
            )
        return None

    #: False where :meth:`run`'s output is not the greedy generation of :meth:`generation_inputs` (sampling).
    greedy_output: ClassVar[bool] = True

    def generation_inputs(
        self, ctx: AttackContext, probes: Sequence[Probe]
    ) -> list[tuple[GenerationInput, ...]]:
        """Per probe, in probe order, the inputs its generations start from: one per try (several only for a
        best-of-k variant). Where the attack spends its budget (suffix search, soft prompt, ActPert's δ)."""
        raise NotImplementedError(f"attack {self.name} does not expose its generation inputs")

    def generation_scope(self, ctx: AttackContext) -> AbstractContextManager[Any]:
        """A context every generation of this attack runs inside (quantization swaps weights in it)."""
        return nullcontext()

    def greedy_texts(
        self, ctx: AttackContext, inputs: Sequence[Sequence[GenerationInput]]
    ) -> list[list[str]]:
        """Greedy generations of every try of every probe (call inside :meth:`generation_scope`)."""
        flat = [inp for tries in inputs for inp in tries]
        texts = greedy_texts(
            ctx.model, ctx.tokenizer, flat, max_new_tokens=ctx.max_new_tokens, batch_size=ctx.batch_size
        )
        flat_texts = iter(texts)
        return [[next(flat_texts) for _ in tries] for tries in inputs]

    def run(self, ctx: AttackContext, probes: Sequence[Probe]) -> list[ItemOutcome]:
        """One outcome per probe, in probe order, on the context's model state: the greedy generations of the
        probe's generation inputs, scored (:meth:`best_of`). Sampling attacks override it."""
        with self.generation_scope(ctx):
            inputs = self.generation_inputs(ctx, probes)
            texts = self.greedy_texts(ctx, inputs)
        return [self.best_of(ctx, *row) for row in zip(probes, inputs, texts, strict=True)]

    def best_of(
        self, ctx: AttackContext, probe: Probe, tries: Sequence[GenerationInput], outputs: Sequence[str]
    ) -> ItemOutcome:
        """One probe's outcome from the greedy generation of each of its tries: of its one try, scored (κ and w,
        R6); an attack with several tries per probe (best-of-k) defines how they combine."""
        if len(tries) != 1:
            raise RuntimeError(f"attack {self.name} has several tries per probe and must define best_of")
        kappa, willing = ctx.scorer.score(probe, outputs[0])
        return ItemOutcome(probe.item_id, outputs[0], kappa, willing, dict(tries[0].extra))

    def describe(self) -> dict[str, object]:
        """Metadata and parameters, JSON-ready (what a record names: K4, R23)."""
        return {
            "name": self.name,
            "version": self.version,
            "surface": self.surface,
            "paper": self.paper,
            "formats": list(self.formats),
            "tracks": list(self.tracks),
            "provenance": self.provenance,
            "adjudicating": self.adjudicating,
            "params": self.spec.to_dict()["params"] if self.spec is not None else {},
        }


def no_attack(ctx: AttackContext, probes: Sequence[Probe]) -> list[ItemOutcome]:
    """The unattacked baseline: the plain question, greedy (the reference for C-Q3); :class:`Unattacked`'s run."""
    return Unattacked().run(ctx, probes)


class Unattacked(Attack):
    """The plain question as an :class:`Attack` (seed 003's "Base" column), so it can be scored like one.

    Not registered: it is the reference every attack is compared with, not an attack a battery can enable.
    :func:`no_attack` is its :meth:`run`.
    """

    name = "none"
    version = "1"
    paper = "the unattacked baseline (C-Q3 reference; seed 003 'Base')"
    provenance = "V"

    def generation_inputs(
        self, ctx: AttackContext, probes: Sequence[Probe]
    ) -> list[tuple[GenerationInput, ...]]:
        return [(GenerationInput(tuple(ctx.prompt_ids(p))),) for p in probes]


__all__ = [
    "Attack",
    "AttackContext",
    "GenerationInput",
    "ItemOutcome",
    "Probe",
    "Track",
    "Unattacked",
    "no_attack",
]
