"""The ``actpert`` attack: self-steering by the entity signal the embedding noise destroys (seed 003, Algorithm 1).

Per probe: locate the target entity's tokens in the rendered prompt, compute ``δ_l`` from ``n_perturbations``
noisy passes (generator seeded from the run seed and item id, so identical noise on every state: C-Q4), then
greedy-generate once per strength α in the sweep with ``α·δ_l`` injected at block ``l``. The item counts as
recovered when any strength recovers it — a best-of-``len(strengths)`` attack, as the seed's sweep is; every
setting's output and score is kept in ``extra`` so a single-setting rate can be recomputed from the records.

Where a probe names no entity, or the name is not in the prompt, the question's own tokens are perturbed
instead, and ``positions_source`` says so ([R]: the seed perturbs "tokens related to the unlearning target").
σ is ``noise_scale`` itself (``noise_mode="absolute"``, the seed's 0.01) or ``noise_scale`` × the RMS entry of
the input embeddings (``"relative"``); the resolved absolute σ is recorded either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from remnant.attacks.actpert_core import (
    GeneratedMode,
    activation_delta,
    entity_positions,
    generate_with_delta,
    resolve_layer,
)
from remnant.attacks.base import Attack, AttackContext, ItemOutcome
from remnant.attacks.soft_prompt_core import embedding_rms
from remnant.errors import ConfigError
from remnant.registry import register
from remnant.score.probe import Probe


@register("attack", "actpert", "1")
class ActPert(Attack):
    """Activation perturbation: embedding noise on the entity, the clean-minus-noisy difference injected."""

    name = "actpert"
    version = "1"
    surface = "inference_time"
    paper = "Chen et al., 'Does Machine Unlearning Truly Remove Knowledge?', arXiv 2505.23270 (seed 003)"
    formats = ("free_text", "multiple_choice")
    provenance = "R"
    smoke_params: ClassVar[dict[str, Any]] = {"n_perturbations": 2, "strengths": (1.0, 4.0)}

    def __init__(
        self,
        layer: int | None = None,
        layer_fraction: float = 0.4,
        noise_scale: float = 0.01,
        noise_mode: Literal["absolute", "relative"] = "absolute",
        n_perturbations: int = 10,
        strengths: Sequence[float] = (0.5, 1.0, 2.0, 4.0),
        generated: GeneratedMode = "last",
    ) -> None:
        if noise_mode not in ("absolute", "relative"):
            raise ConfigError(f"actpert: noise_mode must be 'absolute' or 'relative', not {noise_mode!r}")
        if generated not in ("none", "last", "mean"):
            raise ConfigError(f"actpert: generated must be none, last or mean, not {generated!r}")
        if noise_scale < 0 or n_perturbations < 1 or not strengths:
            raise ConfigError("actpert: noise_scale ≥ 0, n_perturbations ≥ 1 and a non-empty strength sweep")
        if not 0.0 <= layer_fraction < 1.0:
            raise ConfigError("actpert: layer_fraction must be in [0, 1)")
        self.layer, self.layer_fraction = layer, layer_fraction
        self.noise_scale, self.noise_mode = noise_scale, noise_mode
        self.n_perturbations = n_perturbations
        self.strengths = tuple(float(s) for s in strengths)
        self.generated: GeneratedMode = generated

    def _positions(self, tok: Any, ids: list[int], probe: Probe) -> tuple[list[int], str]:
        if probe.entity:
            found = entity_positions(tok, ids, probe.entity)
            if found:
                return found, "entity"
        return entity_positions(tok, ids, probe.question), "question"

    def run(self, ctx: AttackContext, probes: Sequence[Probe]) -> list[ItemOutcome]:
        model, tok = ctx.model, ctx.tokenizer
        layer = resolve_layer(model, self.layer, self.layer_fraction)
        rms = embedding_rms(model)
        sigma = self.noise_scale * (rms if self.noise_mode == "relative" else 1.0)
        out: list[ItemOutcome] = []
        for probe in probes:
            ids = ctx.prompt_ids(probe)
            positions, source = self._positions(tok, ids, probe)
            if not positions:
                raise ConfigError(f"actpert: item {probe.item_id}: no prompt tokens to perturb")
            delta = activation_delta(
                model,
                ids,
                positions,
                layer=layer,
                sigma=sigma,
                n_perturbations=self.n_perturbations,
                generator=ctx.generator(self.name, probe.item_id, device="cpu"),
            )
            settings: list[dict[str, Any]] = []
            for alpha in self.strengths:
                new = generate_with_delta(
                    model,
                    tok,
                    ids,
                    delta,
                    layer=layer,
                    strength=alpha,
                    generated=self.generated,
                    max_new_tokens=ctx.max_new_tokens,
                )
                text = tok.decode(new, skip_special_tokens=True)
                kappa, willing = ctx.scorer.score(probe, text)
                settings.append({"strength": alpha, "kappa": kappa, "willing": willing, "output": text})
            chosen = next((s for s in settings if s["kappa"]), settings[0])
            extra = {
                "layer": layer,
                "noise_mode": self.noise_mode,
                "noise_scale": self.noise_scale,
                "sigma_abs": sigma,
                "embedding_rms": rms,
                "positions": positions,
                "positions_source": source,
                "tries": len(settings),
                "chosen_strength": chosen["strength"],
                "settings": settings,
                "seed": ctx.derive_seed(self.name, probe.item_id),
            }
            out.append(
                ItemOutcome(probe.item_id, chosen["output"], chosen["kappa"], chosen["willing"], extra)
            )
        return out
