"""J-Access's workspace band, chosen on held-out calibration entities (the J-Access paper). Non-adjudicating.

The paper reads "a mid-to-late workspace band selected on held-out calibration entities" and defers the rule to
its Appendix A, which is not available. Ours [R]: the candidates are the contiguous runs of at least
``min_width`` of the lens's source layers inside the mid-to-late ``region`` (fractions of depth); on the
calibration probes (people the original model θ_0 learned and the retain-only model θ_g did not, none of them
audited) each candidate's anchor gap ``A_k(θ_0) − A_k(θ_g)`` is computed (eqs. 3 and 5, every calibration probe
with a non-empty C_i counted), and the band with the largest gap is chosen — ties to the wider band, then the
earlier. The band is where the concept surfaces in a model that knows it and not in one that never saw it; choosing
it on other entities keeps the audited probes out of the choice. The selection is recorded with the result
(:class:`~remnant.latent.jaccess.BandSelection`).

Eq. 3's ∃ over layers makes a band's ``a_i`` the OR of its layers' hits, so each calibration probe is read once
per anchor, layer by layer (:func:`~remnant.latent.jaccess.layer_hits`), and every candidate is scored from those.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from remnant.errors import ConfigError
from remnant.latent.cache import model_digest
from remnant.latent.jaccess import AccessConfig, BandCandidate, BandSelection, Probe, band_layers, layer_hits
from remnant.latent.jacobian_lens import JacobianLens

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@dataclass(frozen=True)
class BandRule:
    """The calibration's search space: the mid-to-late ``region`` (fractions of depth) and the narrowest band."""

    region: tuple[float, float] = (0.25, 0.9)
    min_width: int = 3

    def describe(self) -> str:
        lo, hi = self.region
        return (
            f"[R] the contiguous run of >= {self.min_width} lens source layers within {lo:g}-{hi:g} of depth that "
            "maximises A(θ_0) − A(θ_g) on the calibration probes (ties: the wider, then the earlier band)"
        )


def candidate_bands(layers: Sequence[int], min_width: int) -> list[list[int]]:
    """Every contiguous run (in ``layers``' sorted order) of at least ``min_width`` layers; the whole list when it
    holds fewer."""
    ordered = sorted(set(layers))
    width = max(1, min(min_width, len(ordered)))
    return [ordered[i:j] for i in range(len(ordered)) for j in range(i + width, len(ordered) + 1)]


def _rate(hits: Sequence[Mapping[int, bool]], band: Sequence[int]) -> float:
    return sum(any(h[layer] for layer in band) for h in hits) / len(hits)


def choose_band(
    layers: Sequence[int],
    hits_original: Sequence[Mapping[int, bool]],
    hits_retain: Sequence[Mapping[int, bool]],
    min_width: int,
) -> tuple[list[int], list[BandCandidate]]:
    """The band of largest anchor gap (ties: wider, then earlier) and every candidate, from per-probe, per-layer
    hits of the original and retain-only models on the same calibration probes."""
    if not hits_original or len(hits_original) != len(hits_retain):
        raise ValueError("choose_band: need the same, non-empty calibration probes read under both anchors")
    candidates: list[BandCandidate] = []
    best: tuple[float, int, int] | None = None
    chosen: list[int] = []
    for band in candidate_bands(layers, min_width):
        a_o, a_r = _rate(hits_original, band), _rate(hits_retain, band)
        candidates.append(BandCandidate(first=band[0], last=band[-1], access_original=a_o, access_retain=a_r))
        key = (a_o - a_r, len(band), -band[0])
        if best is None or key > best:
            best, chosen = key, band
    return chosen, candidates


def _check_held_out(calibration: Sequence[Probe], audited: Sequence[Probe]) -> list[str]:
    """The calibration entities, refused if any is unknown or audited (the J-Access paper: held-out entities)."""
    unnamed = [p.idx for p in calibration if p.entity is None]
    if unnamed:
        raise ConfigError(
            f"J-Access band calibration: probes {unnamed[:3]} name no entity; calibration probes must say which "
            "entity they are about so that none of them is audited (jaccess_probes.identity_probes does)",
            requirement="C-H7",
        )
    entities = sorted({str(p.entity) for p in calibration})
    shared = set(entities) & {p.entity for p in audited if p.entity is not None}
    same_prompt = {p.prompt_ids for p in calibration} & {p.prompt_ids for p in audited}
    if shared or same_prompt:
        raise ConfigError(
            "J-Access band calibration: the calibration probes must be about entities that are not audited "
            f"(shared entities {sorted(shared)[:5]}, {len(same_prompt)} identical prompts)",
            requirement="C-H7",
        )
    return entities


def select_band(
    original: PreTrainedModel,
    retain: PreTrainedModel,
    calibration: Sequence[Probe],
    original_lens: JacobianLens | None,
    retain_lens: JacobianLens | None,
    cfg: AccessConfig,
    rule: BandRule | None = None,
    *,
    audited: Sequence[Probe] = (),
) -> BandSelection:
    """Choose the band on ``calibration`` probes (held-out entities) read under both anchors, each through the
    lens the audit reads it with; ``audited`` are the probes the band will be applied to (checked disjoint)."""
    rule = rule or BandRule()
    entities = _check_held_out(calibration, audited)
    counted = [p for p in calibration if p.concept_ids]
    if not counted:
        raise ConfigError(
            "J-Access band calibration: no calibration probe has a concept token (C_i empty after filtering)",
            requirement="C-H7",
        )
    region_cfg = replace(cfg, band=rule.region, layers=None)
    region = sorted(
        set(band_layers(original, region_cfg, original_lens))
        & set(band_layers(retain, region_cfg, retain_lens))
    )
    if not region:
        raise ConfigError("J-Access band calibration: the region holds none of the lenses' source layers")
    hits_o = [layer_hits(original, p, region, original_lens, cfg) for p in counted]
    hits_r = [layer_hits(retain, p, region, retain_lens, cfg) for p in counted]
    chosen, candidates = choose_band(region, hits_o, hits_r, rule.min_width)
    a_o, a_r = _rate(hits_o, chosen), _rate(hits_r, chosen)
    return BandSelection(
        rule=rule.describe(),
        region=region,
        min_width=rule.min_width,
        chosen=chosen,
        gap=a_o - a_r,
        calibration_entities=entities,
        n_calibration_probes=len(counted),
        k=cfg.k,
        positions=f"last {cfg.positions} prompt positions",
        original_model=model_digest(original),
        retain_model=model_digest(retain),
        lens_model=original_lens.model if original_lens is not None else None,
        candidates=candidates,
    )


__all__ = ["BandRule", "candidate_bands", "choose_band", "select_band"]
