"""White-box audits — UDS, the Jacobian lens and J-Access, the logit lens, direction survival. Non-adjudicating.

Every measurement here is supplementary information under the Standard: it never contributes to a verdict or a
tier (C-H6), it is reported with its reference, states, layer and position and with its control figures or the
statement that controls were not run (C-H7; see :func:`remnant.latent.block.latent_block`), and no naive
topic probe is offered (C-H8). Readmission as adjudicating needs an amendment to the Standard (C-H9).

Registered audits (kind ``audit``; ``registry.create("audit", NAME, params)`` records every parameter):

* ``uds`` — two-stage patching score (seeds/000; algorithms.md §1), stage 1 cached by input digest;
* ``uds_no_retain`` — patch the unlearned model into the original, no retain model ([R], labelled);
* ``logit_lens_uds`` — the UDS paper's logit-lens baseline (§1.9);
* ``j_access`` / ``logit_lens_access`` — JOcc through each model's own Jacobian lens, or through J = I
  (seeds/002 eqs. 3–6); a measurement, never a training objective;
* ``direction_survival`` — Annex B.3 over ≥ 3 layers × 2 positions with both control states.

Modules: ``inputs`` (entity-span examples), ``patching`` (naive and fast patched scores), ``uds``, ``cache``,
``jacobian_lens``, ``jaccess``, ``logit_lens``, ``direction``, ``block`` (the statement's latent block).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from remnant.latent.direction import DirectionConfig, DirectionResult, Role, direction_survival
from remnant.latent.inputs import EntityExample
from remnant.latent.jaccess import (
    AccessConfig,
    JAccessResult,
    Probe,
    drop_generic,
    j_occ,
    read_access,
    token_hit_rates,
)
from remnant.latent.jacobian_lens import LensConfig, fit_lens
from remnant.latent.logit_lens import logit_lens_uds
from remnant.latent.uds import UDSConfig, UDSResult, score_source, stage1, uds_no_retain
from remnant.registry import register


@register("audit", "uds", "1.0")
class UDSAudit:
    """UDS with the reference's defaults; ``run`` reuses a cached stage 1 from ``cache_dir``."""

    surface = "latent"
    adjudicating = False

    def __init__(
        self,
        tau: float = 0.05,
        layers: tuple[int, ...] | None = None,
        prompt_format: str = "raw",
        uds_compat: bool = False,
        fast: bool = True,
        system_prompt: str | None = None,
    ) -> None:
        self.config = UDSConfig(tau, layers, prompt_format, uds_compat, fast, system_prompt)  # type: ignore[arg-type]

    def run(
        self,
        full: Any,
        retain: Any,
        source: Any,
        tokenizer: Any,
        examples: Sequence[EntityExample],
        *,
        cache_dir: Path | str | None = None,
    ) -> UDSResult:
        s1 = stage1(full, retain, tokenizer, examples, self.config, cache_dir=cache_dir)
        return score_source(full, source, s1, self.config)


@register("audit", "uds_no_retain", "1.0")
class UDSNoRetainAudit(UDSAudit):
    """[R] No retain model: patch the unlearned model into the original; mean max(Δ2, 0) in nats."""

    def run_no_retain(
        self, original: Any, unlearned: Any, tokenizer: Any, examples: Sequence[EntityExample]
    ) -> UDSResult:
        return uds_no_retain(original, unlearned, tokenizer, examples, self.config)


@register("audit", "logit_lens_uds", "1.0")
class LogitLensUDSAudit(UDSAudit):
    """The UDS paper's logit-lens baseline (full model's decoder), aggregated like UDS."""

    def run(
        self, full: Any, retain: Any, source: Any, tokenizer: Any, examples: Sequence[EntityExample], **_: Any
    ) -> UDSResult:
        return logit_lens_uds(full, retain, source, tokenizer, examples, self.config)


@register("audit", "j_access", "1.1")
class JAccessAudit:
    """JOcc between the original and retain-only anchors (seeds/002 eq. 6); ``jacobian=False`` subclasses are the
    logit-lens comparator.

    ``decoder="own"`` reads each model through its own fitted J (algorithms.md §2.5); ``"fixed"`` reads all three
    through the original model's J (the paper's main audit, which does not refit after unlearning). With
    ``generic_max`` set, a concept token that enters the original model's top-k on more than that share of the
    ``decoys`` (the same questions about people outside the forget set) is dropped from every C_i before reading:
    the per-token baseline of algorithms.md §2.5, without which a one-letter name start reads as access.
    """

    surface = "latent"
    adjudicating = False
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
        decoder: str = "own",
        generic_max: float | None = None,
    ) -> None:
        if decoder not in ("own", "fixed"):
            raise ValueError(f"j_access: decoder must be 'own' or 'fixed', not {decoder!r}")
        if generic_max is not None and not 0.0 <= generic_max <= 1.0:
            raise ValueError(
                f"j_access: generic_max is a share of decoy prompts in [0, 1], not {generic_max}"
            )
        self.access = AccessConfig(k=k, band=band, positions=positions, max_new_tokens=max_new_tokens)
        self.lens = LensConfig(
            target_layer=target_layer, max_seq_len=max_seq_len, skip_first=skip_first, dim_batch=dim_batch
        )
        self.decoder = decoder
        self.generic_max = generic_max

    def run(
        self,
        audited: Any,
        original: Any,
        retain: Any,
        tokenizer: Any,
        probes: Sequence[Probe],
        lens_prompts: Sequence[Sequence[int]] = (),
        *,
        decoys: Sequence[Sequence[int]] = (),
        cache_dir: Path | str | None = None,
    ) -> JAccessResult:
        def lens_of(model: Any) -> Any:
            return fit_lens(model, lens_prompts, self.lens, cache_dir=cache_dir) if self.jacobian else None

        original_lens = lens_of(original)
        if self.generic_max is not None:
            if not decoys:
                raise ValueError(
                    "j_access: generic_max needs decoy prompts (questions outside the forget set)"
                )
            concepts = sorted(set().union(*(p.concept_ids for p in probes)))
            rates = token_hit_rates(original, decoys, concepts, original_lens, self.access)
            probes = drop_generic(probes, rates, self.generic_max)
        readouts = []
        for model in (audited, original, retain):
            lens = original_lens if model is original or self.decoder == "fixed" else lens_of(model)
            readouts.append(read_access(model, tokenizer, probes, lens, self.access))
        return j_occ(*readouts)


@register("audit", "logit_lens_access", "1.0")
class LogitLensAccessAudit(JAccessAudit):
    """The J-Access pipeline with J = I (the paper's logit-lens comparator)."""

    jacobian = False


@register("audit", "direction_survival", "1.0")
class DirectionSurvivalAudit:
    """Annex B.3 direction survival over the grid, with both C-H3 control states when given."""

    surface = "latent"
    adjudicating = False

    def __init__(
        self,
        layers: tuple[int, ...] | None = None,
        positions: tuple[str, ...] = ("last", "mean"),
        n_resamples: int = 2000,
        margin: float = 0.10,
        seed: int = 0,
    ) -> None:
        self.config = DirectionConfig(
            layers=layers, positions=positions, n_resamples=n_resamples, margin=margin, seed=seed
        )

    def run(
        self,
        never_modified: Any,
        installed: Any,
        states: Mapping[str, Any],
        roles: Mapping[str, Role],
        prompts: Sequence[Sequence[int]],
    ) -> DirectionResult:
        return direction_survival(never_modified, installed, states, roles, prompts, self.config)


__all__ = [
    "DirectionSurvivalAudit",
    "JAccessAudit",
    "LogitLensAccessAudit",
    "LogitLensUDSAudit",
    "UDSAudit",
    "UDSNoRetainAudit",
]
