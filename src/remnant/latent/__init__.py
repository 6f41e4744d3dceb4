"""White-box audits — UDS, the Jacobian lens and J-Access, the logit lens, direction survival. Non-adjudicating.

Every measurement here is supplementary information under the Standard: it never contributes to a verdict or a
tier (C-H6), it is reported with its reference, states, layer and position and with its control figures or the
statement that controls were not run (C-H7; see :func:`remnant.latent.block.latent_block`), and no naive
topic probe is offered (C-H8). Readmission as adjudicating needs an amendment to the Standard (C-H9).

Registered audits (kind ``audit``; ``registry.create("audit", NAME, params)`` records every parameter):

* ``uds`` — two-stage patching score (the UDS paper; docs/latent.md), stage 1 cached by input digest;
* ``uds_no_retain`` — patch the unlearned model into the original, no retain model ([R], labelled);
* ``logit_lens_uds`` — the UDS paper's logit-lens baseline (§1.9);
* ``j_access`` / ``j_access_refit`` / ``logit_lens_access`` — JOcc (the J-Access paper, eqs. 3–6) through the original
  model's Jacobian lens fitted once (the paper's audit, band chosen on held-out calibration entities, Holm across
  audited models), through each model's refitted lens (the paper's robustness variant), or through J = I
  (``jaccess_audit``); a measurement, never a training objective;
* ``direction_survival`` — Annex B.3 over ≥ 3 layers × 2 positions with both control states.

Modules: ``inputs`` (entity-span examples), ``uds_data`` (the UDS reference's TOFU entity-span file),
``patching`` (naive and fast patched scores), ``uds``, ``cache``,
``jacobian_lens``, ``jaccess`` (readout, JOcc), ``jaccess_probes`` (identity-level probes and C_i),
``jaccess_band`` (band calibration), ``jaccess_grid`` (many models, Holm), ``jaccess_audit`` (the registered
J-Access audits), ``logit_lens``, ``direction``, ``block`` (the statement's latent block).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from remnant.latent.direction import DirectionConfig, DirectionResult, Role, direction_survival
from remnant.latent.inputs import EntityExample
from remnant.latent.jaccess_audit import JAccessAudit, JAccessRefitAudit, LogitLensAccessAudit
from remnant.latent.logit_lens import logit_lens_uds
from remnant.latent.uds import UDSConfig, UDSResult, score_source, stage1, uds_no_retain
from remnant.registry import register


@register("audit", "uds", "1.0")
class UDSAudit:
    """UDS with the reference's defaults; ``run`` reuses a cached stage 1 from ``cache_dir``.

    Examples with no KE layer are excluded from the mean and counted, as the reference does. ``uds_compat=True``
    reads the last block as the reference code does (post-final-norm source state, §1.7); the default reads the
    block output. Either way the result records it and the latent block states it beside the figure.
    """

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
    "JAccessRefitAudit",
    "LogitLensAccessAudit",
    "LogitLensUDSAudit",
    "UDSAudit",
    "UDSNoRetainAudit",
]
