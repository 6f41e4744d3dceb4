"""ActPert: self-steering by the entity signal the embedding noise destroys (seed 003 §3, Algorithm 1) —
``actpert`` (one declared strength) and ``actpert_sweep`` (best of several strengths).

Per probe: locate the target entity's tokens in the rendered prompt, compute ``δ_l`` from ``n_perturbations``
noisy passes (generator seeded from the run seed and item id, so identical noise on every state: C-Q4), then
generate with ``strength·δ_l`` injected at block ``l`` (:mod:`remnant.attacks.actpert_core`).

``actpert`` injects δ at the one declared ``strength`` (default 1: Algorithm 1 adds δ itself, unscaled). The seed
states no strength sweep, so a best-of-k over strengths is a different, stronger attack: ``actpert_sweep``
generates once per strength and counts an item as recovered when any strength recovers it, keeping every
setting's output and score in ``extra`` so a single-strength rate can be recomputed from the records.

Where a probe names no entity, or the name is not in the prompt, the question's own tokens are perturbed
instead, and ``positions_source`` says so ([R]: the seed perturbs "tokens related to the unlearning target").
σ is ``noise_scale`` itself (``noise_mode="absolute"``, the seed's 0.01, Appendix D) or ``noise_scale`` × the
RMS entry of the input embeddings (``"relative"``); the resolved absolute σ is recorded either way. The layer
defaults to 40 % of the depth (the seed's layer 12 of 32).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from remnant.attacks.actpert_core import (
    GeneratedMode,
    activation_delta,
    entity_positions,
    resolve_layer,
    steering,
)
from remnant.attacks.base import Attack, AttackContext, GenerationInput, ItemOutcome
from remnant.attacks.soft_prompt_core import embedding_rms
from remnant.errors import ConfigError
from remnant.registry import register
from remnant.score.probe import Probe

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

NoiseMode = Literal["absolute", "relative"]
#: The seed key of the noise draw, shared by both variants: the sweep at strength α injects the same δ as
#: ``actpert`` at α.
NOISE_KEY = "actpert"


class _ActPert(Attack):
    """δ per probe, injected at each of :meth:`strengths` (one generation input per strength)."""

    surface = "inference_time"
    paper = "Chen et al., 'Does Machine Unlearning Truly Remove Knowledge?', arXiv 2505.23270 (seed 003)"
    formats = ("free_text", "multiple_choice")
    provenance = "R"

    def _setup(
        self,
        layer: int | None,
        layer_fraction: float,
        noise_scale: float,
        noise_mode: NoiseMode,
        n_perturbations: int,
        generated: GeneratedMode,
    ) -> None:
        if noise_mode not in ("absolute", "relative"):
            raise ConfigError(f"{self.name}: noise_mode must be 'absolute' or 'relative', not {noise_mode!r}")
        if generated not in ("none", "last", "mean"):
            raise ConfigError(f"{self.name}: generated must be none, last or mean, not {generated!r}")
        if noise_scale < 0 or n_perturbations < 1:
            raise ConfigError(f"{self.name}: noise_scale ≥ 0 and n_perturbations ≥ 1")
        if not 0.0 <= layer_fraction < 1.0:
            raise ConfigError(f"{self.name}: layer_fraction must be in [0, 1)")
        self.layer, self.layer_fraction = layer, layer_fraction
        self.noise_scale, self.noise_mode = noise_scale, noise_mode
        self.n_perturbations = n_perturbations
        self.generated: GeneratedMode = generated

    def strengths(self) -> tuple[float, ...]:
        raise NotImplementedError

    def _positions(self, tok: PreTrainedTokenizerBase, ids: list[int], probe: Probe) -> tuple[list[int], str]:
        if probe.entity:
            found = entity_positions(tok, ids, probe.entity)
            if found:
                return found, "entity"
        return entity_positions(tok, ids, probe.question), "question"

    def generation_inputs(
        self, ctx: AttackContext, probes: Sequence[Probe]
    ) -> list[tuple[GenerationInput, ...]]:
        """Per probe, the plain prompt with ``α·δ`` steering, one input per strength α."""
        model, tok = ctx.model, ctx.tokenizer
        layer = resolve_layer(model, self.layer, self.layer_fraction)
        rms = embedding_rms(model)
        sigma = self.noise_scale * (rms if self.noise_mode == "relative" else 1.0)
        out: list[tuple[GenerationInput, ...]] = []
        for probe in probes:
            ids = ctx.prompt_ids(probe)
            positions, source = self._positions(tok, ids, probe)
            if not positions:
                raise ConfigError(f"{self.name}: item {probe.item_id}: no prompt tokens to perturb")
            delta = activation_delta(
                model,
                ids,
                positions,
                layer=layer,
                sigma=sigma,
                n_perturbations=self.n_perturbations,
                generator=ctx.generator(NOISE_KEY, probe.item_id, device="cpu"),
            )
            extra = {
                "layer": layer,
                "noise_mode": self.noise_mode,
                "noise_scale": self.noise_scale,
                "sigma_abs": sigma,
                "embedding_rms": rms,
                "positions": positions,
                "positions_source": source,
                "seed": ctx.derive_seed(NOISE_KEY, probe.item_id),
            }
            out.append(
                tuple(
                    GenerationInput(
                        tuple(ids),
                        steering=steering(delta, layer, alpha, self.generated),
                        extra={**extra, "strength": alpha},
                    )
                    for alpha in self.strengths()
                )
            )
        return out


@register("attack", "actpert", "2")
class ActPert(_ActPert):
    """Activation perturbation at one declared strength: embedding noise on the entity, ``strength·δ`` injected."""

    name = "actpert"
    version = "2"
    smoke_params: ClassVar[dict[str, Any]] = {"n_perturbations": 2}

    def __init__(
        self,
        layer: int | None = None,
        layer_fraction: float = 0.4,
        noise_scale: float = 0.01,
        noise_mode: NoiseMode = "absolute",
        n_perturbations: int = 10,
        strength: float = 1.0,
        generated: GeneratedMode = "last",
    ) -> None:
        self._setup(layer, layer_fraction, noise_scale, noise_mode, n_perturbations, generated)
        self.strength = float(strength)

    def strengths(self) -> tuple[float, ...]:
        return (self.strength,)


@register("attack", "actpert_sweep", "1")
class ActPertSweep(_ActPert):
    """ActPert at each strength of a sweep; an item is recovered when any strength recovers it (best-of-k)."""

    name = "actpert_sweep"
    version = "1"
    smoke_params: ClassVar[dict[str, Any]] = {"n_perturbations": 2, "strengths": (1.0, 4.0)}

    def __init__(
        self,
        layer: int | None = None,
        layer_fraction: float = 0.4,
        noise_scale: float = 0.01,
        noise_mode: NoiseMode = "absolute",
        n_perturbations: int = 10,
        strengths: Sequence[float] = (0.5, 1.0, 2.0, 4.0),
        generated: GeneratedMode = "last",
    ) -> None:
        self._setup(layer, layer_fraction, noise_scale, noise_mode, n_perturbations, generated)
        if not strengths:
            raise ConfigError("actpert_sweep: a non-empty strength sweep")
        self._strengths = tuple(float(s) for s in strengths)

    def strengths(self) -> tuple[float, ...]:
        return self._strengths

    def best_of(
        self, ctx: AttackContext, probe: Probe, tries: Sequence[GenerationInput], outputs: Sequence[str]
    ) -> ItemOutcome:
        """The first strength that recovers the item (else the first), every setting kept in ``extra``."""
        settings: list[dict[str, Any]] = []
        for inp, text in zip(tries, outputs, strict=True):
            kappa, willing = ctx.scorer.score(probe, text)
            settings.append(
                {"strength": inp.extra["strength"], "kappa": kappa, "willing": willing, "output": text}
            )
        chosen = next((s for s in settings if s["kappa"]), settings[0])
        extra = {k: v for k, v in tries[0].extra.items() if k != "strength"}
        extra.update(tries=len(settings), chosen_strength=chosen["strength"], settings=settings)
        return ItemOutcome(probe.item_id, chosen["output"], chosen["kappa"], chosen["willing"], extra)


__all__ = ["ActPert", "ActPertSweep"]
