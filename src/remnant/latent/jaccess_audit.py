"""The registered J-Access audits (the J-Access paper). Non-adjudicating: no figure here moves a verdict or tier (C-H6).

``j_access`` is the paper's audit: one Jacobian lens fitted on the original model θ_0 reads every model (the paper
does not refit after unlearning), the band is chosen on held-out calibration entities
(:mod:`remnant.latent.jaccess_band`), and over several audited models each one's access above the retain-only
anchor is Holm-adjusted (:mod:`remnant.latent.jaccess_grid`). The caller passes the paper's identity-level probes
(:mod:`remnant.latent.jaccess_probes`). ``j_access_refit`` is the paper's robustness variant (every model read
through its own refitted J), ``logit_lens_access`` its comparator (J = I).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from remnant.engine.audit_base import Audit, AuditInputs, Figure
from remnant.errors import ConfigError
from remnant.latent.jaccess import (
    AccessConfig,
    BandSelection,
    JAccessResult,
    Probe,
    band_layers,
    drop_generic,
    token_hit_rates,
)
from remnant.latent.jaccess_band import BandRule, select_band
from remnant.latent.jaccess_grid import JAccessGrid, read_grid
from remnant.latent.jacobian_lens import JacobianLens, LensConfig, fit_lens
from remnant.registry import register

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

LensFor = Callable[[Any], JacobianLens | None]


def _probe_level(probes: Sequence[Probe]) -> str | None:
    levels = sorted({p.level for p in probes} - {"unspecified"})
    return levels[0] if len(levels) == 1 else ("mixed: " + " | ".join(levels) if levels else None)


@register("audit", "j_access", "2.0")
class JAccessAudit(Audit):
    """JOcc between the original and retain-only anchors (the J-Access paper, eq. 6), read as the paper reads it.

    ``decoder="fixed"`` (default) reads every model through the original model's J, fitted once; ``"own"`` refits
    per model (prefer the named ``j_access_refit``). ``band_rule="calibrated"`` (default) chooses the band inside
    the depth fractions ``band`` on ``calibration`` probes (other entities than the audited ones; runs of at least
    ``min_band_width`` layers); ``"fixed"`` reads all of ``band``. With ``generic_max`` and ``decoys`` (questions
    about people outside the forget set), a concept token that enters the original model's top-k on more than that
    share of the decoys is dropped from every C_i (audited and calibration) first: docs/latent.md's per-token
    baseline. ``alpha`` is the Holm family-wise error rate of :meth:`run_many`.
    """

    family = "jaccess"
    references = ("full", "retain")
    jacobian = True

    def __init__(
        self,
        k: int = 10,
        band: tuple[float, float] = (0.25, 0.9),
        positions: int = 8,
        max_new_tokens: int = 32,
        target_layer: int | None = None,
        max_seq_len: int = 128,
        skip_first: int = 16,
        dim_batch: int = 8,
        decoder: str = "fixed",
        generic_max: float | None = None,
        band_rule: str = "calibrated",
        min_band_width: int = 3,
        alpha: float = 0.05,
    ) -> None:
        if decoder not in ("own", "fixed"):
            raise ConfigError(
                f"j_access: decoder must be 'fixed' or 'own', not {decoder!r}", requirement="C-H7"
            )
        if band_rule not in ("calibrated", "fixed"):
            raise ConfigError(
                f"j_access: band_rule must be 'calibrated' or 'fixed', not {band_rule!r}", requirement="C-H7"
            )
        if generic_max is not None and not 0.0 <= generic_max <= 1.0:
            raise ConfigError(
                f"j_access: generic_max is a share of decoy prompts in [0, 1], not {generic_max}",
                requirement="C-H7",
            )
        if min_band_width < 1 or not 0.0 < alpha < 1.0:
            raise ConfigError(
                f"j_access: min_band_width must be >= 1 and alpha in (0, 1), not {min_band_width}, {alpha}",
                requirement="C-H7",
            )
        self.access = AccessConfig(k=k, band=band, positions=positions, max_new_tokens=max_new_tokens)
        self.lens = LensConfig(
            target_layer=target_layer, max_seq_len=max_seq_len, skip_first=skip_first, dim_batch=dim_batch
        )
        self.decoder = decoder
        self.generic_max = generic_max
        self.band_rule = band_rule
        self.band = BandRule(region=band, min_width=min_band_width)
        self.alpha = alpha

    def run(
        self,
        audited: PreTrainedModel,
        original: PreTrainedModel,
        retain: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        probes: Sequence[Probe],
        lens_prompts: Sequence[Sequence[int]] = (),
        *,
        decoys: Sequence[Sequence[int]] = (),
        calibration: Sequence[Probe] = (),
        lens: JacobianLens | None = None,
        cache_dir: Path | str | None = None,
    ) -> JAccessResult:
        """J-Access of one audited model (:meth:`run_many` with one model; its p-value is unadjusted)."""
        return (
            self.run_many(
                {"audited": audited},
                original,
                retain,
                tokenizer,
                probes,
                lens_prompts,
                decoys=decoys,
                calibration=calibration,
                lens=lens,
                cache_dir=cache_dir,
            )
            .rows[0]
            .result
        )

    def read(self, state: Any, references: Mapping[str, Any], inputs: AuditInputs) -> list[Figure]:
        """The audited state and both anchors through one lens (the J-Access paper)."""
        from remnant.latent.block import figure_reading

        full, ref, d = references["full"], references["retain"], inputs.data
        r = self.run(
            state.model,
            full.model,
            ref.model,
            inputs.tokenizer,
            d["probes"],
            d["lens_prompts"],
            decoys=d.get("decoys", ()),
            calibration=d.get("calibration", ()),
            cache_dir=inputs.cache_dir,
        )
        update = {"audited_model": state.digest, "original_model": full.digest, "retain_model": ref.digest}
        r = r.model_copy(update=update)
        details: dict[str, Any] = {k: getattr(r, k) for k in DETAILS}
        if r.band_selection is not None:
            details["band_selection"] = r.band_selection.model_dump(mode="json")
        return [figure_reading(self.registry_name, state.role, r, inputs.labels, details)]

    def run_many(
        self,
        audited: Mapping[str, object],
        original: PreTrainedModel,
        retain: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        probes: Sequence[Probe],
        lens_prompts: Sequence[Sequence[int]] = (),
        *,
        decoys: Sequence[Sequence[int]] = (),
        calibration: Sequence[Probe] = (),
        lens: JacobianLens | None = None,
        cache_dir: Path | str | None = None,
    ) -> JAccessGrid:
        """J-Access of every audited model against the same anchors, probes, decoder and band, Holm-adjusted.

        The original model's lens is fitted once (or ``lens`` is used: a lens already fitted on the reference
        model, e.g. for checkpoints audited in several calls) and the band is chosen once, for all the models.
        """
        lens_for = self._lenses(original, lens_prompts, lens, cache_dir)
        probes, calibration = self._specific(original, lens_for(original), probes, calibration, decoys)
        cfg, selection = self._band(original, retain, probes, calibration, lens_for)
        update = {"band_selection": selection, "probe_level": _probe_level(probes)}
        return read_grid(
            audited, original, retain, tokenizer, probes, cfg, lens_for, alpha=self.alpha, update=update
        )

    def _lenses(
        self,
        original: PreTrainedModel,
        prompts: Sequence[Sequence[int]],
        given: JacobianLens | None,
        cache_dir: Path | str | None,
    ) -> LensFor:
        """Model -> the lens it is read through, each lens fitted at most once."""
        if given is not None and (self.decoder != "fixed" or not self.jacobian):
            raise ConfigError(
                "j_access: a given lens is the fixed decoder; it cannot be used with decoder='own' or the logit lens",
                requirement="C-H7",
            )
        fitted: dict[int, JacobianLens] = {id(original): given} if given is not None else {}

        def own(model: PreTrainedModel) -> JacobianLens:
            if id(model) not in fitted:
                fitted[id(model)] = fit_lens(model, prompts, self.lens_config(model), cache_dir=cache_dir)
            return fitted[id(model)]

        def lens_for(model: PreTrainedModel) -> JacobianLens | None:
            if not self.jacobian:
                return None
            return own(original) if self.decoder == "fixed" else own(model)

        return lens_for

    def lens_config(self, model: PreTrainedModel) -> LensConfig:
        """The lens this audit fits on ``model``: on the blocks of the band's region only. The fixed band, the
        calibrated band's candidates and the generic-token screen read no other block, and each J_l does not
        depend on which others are fitted, so the backward passes stop at the region's lowest block instead of
        the first (on SmolLM2's 30 blocks: sources 8-26 instead of 0-27)."""
        if self.lens.source_layers is not None:
            return self.lens
        sources, target = self.lens.resolve(model)
        in_region = band_layers(model, replace(self.access, band=self.band.region, layers=None), None)
        region = tuple(layer for layer in sources if layer in in_region)
        return replace(self.lens, source_layers=region, target_layer=target) if region else self.lens

    def _specific(
        self,
        original: PreTrainedModel,
        original_lens: JacobianLens | None,
        probes: Sequence[Probe],
        calibration: Sequence[Probe],
        decoys: Sequence[Sequence[int]],
    ) -> tuple[list[Probe], list[Probe]]:
        """The probes (and calibration probes) without generic concept tokens, when ``generic_max`` is set."""
        if self.generic_max is None:
            return list(probes), list(calibration)
        if not decoys:
            raise ConfigError(
                "j_access: generic_max needs decoy prompts (questions outside the forget set)",
                requirement="C-H7",
            )
        concepts = sorted(set().union(*(p.concept_ids for p in (*probes, *calibration))))
        rates = token_hit_rates(original, decoys, concepts, original_lens, self.access)
        return drop_generic(probes, rates, self.generic_max), drop_generic(
            calibration, rates, self.generic_max
        )

    def _band(
        self,
        original: PreTrainedModel,
        retain: PreTrainedModel,
        probes: Sequence[Probe],
        calibration: Sequence[Probe],
        lens_for: LensFor,
    ) -> tuple[AccessConfig, BandSelection | None]:
        """The readout settings with the band fixed (depth fractions) or chosen on the calibration probes."""
        if self.band_rule == "fixed":
            return self.access, None
        if not calibration:
            raise ConfigError(
                "j_access: band_rule='calibrated' chooses the band on calibration probes about held-out entities "
                "(the J-Access paper); pass calibration=[...] (e.g. jaccess_probes for the forget_relearn people) or "
                "band_rule='fixed'",
                requirement="C-H7",
            )
        selection = select_band(
            original,
            retain,
            calibration,
            lens_for(original),
            lens_for(retain),
            self.access,
            self.band,
            audited=probes,
        )
        return replace(self.access, layers=tuple(selection.chosen)), selection


#: The counts and settings behind a J-Access figure, copied into its reading (C-H7b).
DETAILS = (
    "jocc_clipped",
    "access_audited",
    "access_original",
    "access_retain",
    "retain_gap",
    "retain_gap_ci95",
    "p_above_retain",
    "n_probes",
    "n_silent",
    "k",
    "layers",
    "decoder",
    "probe_level",
    "provenance",
)


@register("audit", "j_access_refit", "1.0")
class JAccessRefitAudit(JAccessAudit):
    """``j_access`` with the lens refitted on every model, "to account for possible representation shift"."""

    def __init__(
        self,
        k: int = 10,
        band: tuple[float, float] = (0.25, 0.9),
        positions: int = 8,
        max_new_tokens: int = 32,
        target_layer: int | None = None,
        max_seq_len: int = 128,
        skip_first: int = 16,
        dim_batch: int = 8,
        generic_max: float | None = None,
        band_rule: str = "calibrated",
        min_band_width: int = 3,
        alpha: float = 0.05,
    ) -> None:
        super().__init__(
            k=k,
            band=band,
            positions=positions,
            max_new_tokens=max_new_tokens,
            target_layer=target_layer,
            max_seq_len=max_seq_len,
            skip_first=skip_first,
            dim_batch=dim_batch,
            decoder="own",
            generic_max=generic_max,
            band_rule=band_rule,
            min_band_width=min_band_width,
            alpha=alpha,
        )


@register("audit", "logit_lens_access", "2.0")
class LogitLensAccessAudit(JAccessAudit):
    """The J-Access pipeline with J = I (the paper's logit-lens comparator); ``decoder`` has no effect."""

    jacobian = False


__all__ = ["JAccessAudit", "JAccessRefitAudit", "LogitLensAccessAudit"]
