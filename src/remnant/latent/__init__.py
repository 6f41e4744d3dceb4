"""White-box audits — UDS, the Jacobian lens and J-Access, the logit lens, direction survival. Non-adjudicating.

Every measurement here is supplementary information under the Standard: it never contributes to a verdict or a
tier (C-H6), it is reported with its reference, states, layer and position and with its control figures or the
statement that controls were not run (C-H7; :mod:`remnant.latent.block`), and no naive
topic probe is offered (C-H8). Readmission as adjudicating needs an amendment to the Standard (C-H9).

The registered audits (kind ``audit``) are defined here and in :mod:`remnant.latent.jaccess_audit`; J-Access is a
measurement, never a training objective.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, cast

from remnant.engine.audit_base import Audit, AuditInputs, Figure
from remnant.latent.direction import DirectionConfig, Role, direction_survival
from remnant.latent.jaccess_audit import JAccessAudit, JAccessRefitAudit, LogitLensAccessAudit
from remnant.latent.logit_lens import logit_lens_uds
from remnant.latent.uds import UDSConfig, UDSResult, score_source, stage1, uds_no_retain
from remnant.registry import register


def _uds_figures(audit: Audit, r: UDSResult, state: Any, inputs: AuditInputs) -> list[Figure]:
    """One UDS-family result as its figure, with the counts and settings behind it (C-H7b)."""
    from remnant.latent.block import figure_reading

    details = {
        k: getattr(r, k)
        for k in ("n_examples", "n_scored", "n_no_ke", "n_span_not_found", "coverage", "layers", "tau")
    }
    details.update(
        prompt_format=r.prompt_format,
        uds_compat=r.uds_compat,
        layer_mean_ler=r.layer_mean_ler,
        provenance=r.provenance,
        examples=[e.idx for e in r.examples],
    )
    return [figure_reading(audit.registry_name, state.role, r, inputs.labels, details)]


@register("audit", "uds", "1.0")
class UDSAudit(Audit):
    """UDS with the reference's defaults.

    Examples with no KE layer are excluded from the mean and counted, as the reference does. ``uds_compat=True``
    reads the last block as the reference code does (post-final-norm source state, §1.7); the default reads the
    block output. Either way the result records it and the latent block states it beside the figure.
    """

    family = "uds"
    references: ClassVar[tuple[str, ...]] = ("full", "retain")

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

    def read(self, state: Any, references: Mapping[str, Any], inputs: AuditInputs) -> list[Figure]:
        full, ref = references["full"], references["retain"]
        examples = tuple(inputs.data["examples"])
        # Stage 1 reads only the references: made once for every state this keeper's audit reads (its figures and
        # the full model's prefixes), and kept on disk by a digest of its inputs. repr: a config's layers may be a
        # list, which does not hash.
        key = ("uds-stage1", full.digest, ref.digest, repr(self.config), examples)
        s1 = inputs.keep(
            key,
            lambda: stage1(
                full.model,
                ref.model,
                inputs.tokenizer,
                examples,
                self.config,
                cache_dir=inputs.cache_dir,
                full_digest=full.digest,
                retain_digest=ref.digest,
            ),
        )
        r = score_source(full.model, state.model, s1, self.config, source_digest=state.digest)
        return _uds_figures(self, r, state, inputs)


@register("audit", "uds_no_retain", "1.0")
class UDSNoRetainAudit(UDSAudit):
    """[R] No retain model: patch the unlearned model into the original; mean max(Δ2, 0) in nats."""

    references = ("full",)

    def read(self, state: Any, references: Mapping[str, Any], inputs: AuditInputs) -> list[Figure]:
        full = references["full"]
        r = uds_no_retain(full.model, state.model, inputs.tokenizer, inputs.data["examples"], self.config)
        r = r.model_copy(update={"target_model": full.digest, "source_model": state.digest})
        return _uds_figures(self, r, state, inputs)


@register("audit", "logit_lens_uds", "1.0")
class LogitLensUDSAudit(UDSAudit):
    """The UDS paper's logit-lens baseline (full model's decoder), aggregated like UDS."""

    def read(self, state: Any, references: Mapping[str, Any], inputs: AuditInputs) -> list[Figure]:
        full, ref = references["full"], references["retain"]
        examples = inputs.data["examples"]
        r = logit_lens_uds(full.model, ref.model, state.model, inputs.tokenizer, examples, self.config)
        update = {"target_model": full.digest, "retain_model": ref.digest, "source_model": state.digest}
        return _uds_figures(self, r.model_copy(update=update), state, inputs)


@register("audit", "direction_survival", "1.0")
class DirectionSurvivalAudit(Audit):
    """Annex B.3 direction survival over the grid, with both C-H3 control states when given."""

    family = "direction"
    references = ("full", "control")

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

    def read(self, state: Any, references: Mapping[str, Any], inputs: AuditInputs) -> list[Figure]:
        from remnant.latent.block import direction_figures

        control, full = references["control"], references["full"]
        roles = {state.role: cast(Role, inputs.role)}
        states, prompts = {state.role: state.model}, inputs.data["prompts"]
        r = direction_survival(control.model, full.model, states, roles, prompts, self.config)
        update = {"reference": control.digest, "installed": full.digest, "states": {state.role: state.digest}}
        r = r.model_copy(update=update)
        floors = {(s.layer, s.position): s for s in r.signatures}
        out: list[Figure] = []
        for f, fig in direction_figures(r, inputs.labels):
            sig = floors[(f.layer, f.position)]
            details = {
                "within_margin": f.within_margin,
                "margin": r.margin,
                "signature": sig.magnitude,
                "permutation_floor": sig.permutation_floor,
                "n_prompts": r.n_prompts,
                "grid_met": r.grid_met,
                "provenance": r.provenance,
            }
            out.append(
                (fig.value, fig.states, fig.reference, f"block {f.layer}", fig.position, f.ci95, details)
            )
        return out


__all__ = [
    "DirectionSurvivalAudit",
    "JAccessAudit",
    "JAccessRefitAudit",
    "LogitLensAccessAudit",
    "LogitLensUDSAudit",
    "UDSAudit",
    "UDSNoRetainAudit",
]
