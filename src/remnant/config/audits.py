"""White-box audits an assessment runs: supplementary, never adjudicating (C-H6, C-H7; docs/latent.md).

Four optional tables, ``[audits.uds]``, ``[audits.jaccess]``, ``[audits.logit_lens]`` and ``[audits.direction]``,
each naming a registered audit (registry kind ``audit``, default per table: :data:`AUDIT_TABLES`) and its exact
parameters, checked like attack parameters. Whether the audit is of a family the table admits is checked when the
run creates it (:func:`remnant.assess.audits.create_audit`), since reading its declarations imports the audits;
its own constructor has the last word on the parameters. The ``reference`` stands for "never saw the target"
(UDS's retain model, J-Access's anchor θ_g): the never-modified control, or ``"retain_only"``, the control installed
with the install recipe on the retained items only; direction survival's is the control by definition (Annex B.3).
``controls`` also runs the statistic on both Annex B control states (C-H7c).

Not pre-registered (R14): a latent figure carries no verdict or tier weight (C-H6), and a recorded deviation does
(it caps the tier), so a change to an audit must not become one. Every input is in the audit's cell keys and every
parameter in its records (R23).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from remnant.config.fields import MAX_BATCH, MAX_N, MAX_TOKENS, ConfigModel, Name, Params, RuleViolation
from remnant.config.numbers import PARAM_BOUNDS, Bound

if TYPE_CHECKING:
    from remnant.config.models import Models

#: Table name -> (the registered audit it runs by default, the audit families it admits: ``Audit.family``).
AUDIT_TABLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "uds": ("uds", ("uds",)),
    "jaccess": ("j_access", ("jaccess",)),
    "logit_lens": ("logit_lens_access", ("jaccess", "uds")),
    "direction": ("direction_survival", ("direction",)),
}
#: Paragraphs of the built-in generic lens corpus (:mod:`remnant.latent.lens_text`).
MAX_LENS_PROMPTS = 12

#: Audit parameters of known meaning (besides :data:`remnant.config.numbers.PARAM_BOUNDS`), in any audit table.
AUDIT_PARAM_BOUNDS: dict[str, Bound] = {
    "k": Bound(int, 1, 10**6, False, "a top-k rank cut-off"),
    "tau": Bound(float, 0, 100, False, "a KE threshold in nats"),
    "n_resamples": Bound(int, 1, 10**6, False, "bootstrap resamples"),
    "n_permutations": Bound(int, 1, 10**6, False, "permutations"),
    "margin": Bound(float, 0, 10, True, "an equivalence margin"),
    "alpha": Bound(float, 0, 1, True, "a family-wise error rate"),
    "generic_max": Bound(float, 0, 1, False, "a share of decoy prompts"),
    "max_seq_len": Bound(int, 1, 16 * MAX_TOKENS, False, "a sequence length"),
    "skip_first": Bound(int, 0, MAX_TOKENS, False, "positions skipped"),
    "dim_batch": Bound(int, 1, MAX_BATCH, False, "dimensions per backward pass"),
    "min_band_width": Bound(int, 1, 1_024, False, "layers in a band"),
    "target_layer": Bound(int, 0, 1_024, False, "a block index"),
}


class AuditTable(ConfigModel):
    """One white-box audit: which registered audit, its parameters, its reference and controls (C-H6, C-H7)."""

    enabled: bool = Field(default=True, description="Whether the audit runs (C-H7).")
    implementation: Name | None = Field(
        default=None, description="The registered audit this table runs; default per table (C-H7)."
    )
    params: Params = Field(default_factory=dict, description="Exact audit parameters (R23).")
    reference: Literal["control", "retain_only"] = Field(
        default="control",
        description="The model that never saw the target: the never-modified control or a retain-only install "
        "(C-H7).",
    )
    controls: bool = Field(
        default=False,
        description="Also run it on both Annex B control states, procedure and content (C-H7).",
    )
    max_items: int | None = Field(
        default=None,
        ge=1,
        le=MAX_N,
        description="Cap on examples, probes or prompts, in pack order; absent: all (C-H7).",
    )
    probes: Literal["identity", "answer"] = Field(
        default="identity",
        description="J-Access probes: identity level (the paper's) or answer level (C-H7).",
    )
    lens_prompts: int = Field(
        default=6,
        ge=1,
        le=MAX_LENS_PROMPTS,
        description="J-Access: generic paragraphs the Jacobian lens is fitted on (C-H7).",
    )


class Audits(ConfigModel):
    """The white-box audits: supplementary, reported beside the verdict, never weighed in it (C-H6, C-H7)."""

    uds: AuditTable | None = Field(default=None, description="UDS, two-stage patching (C-H7).")
    jaccess: AuditTable | None = Field(default=None, description="J-Access through the Jacobian lens (C-H7).")
    logit_lens: AuditTable | None = Field(default=None, description="A logit-lens audit (C-H7).")
    direction: AuditTable | None = Field(default=None, description="Direction survival, Annex B.3 (C-H7).")

    @model_validator(mode="after")
    def _tables(self) -> Audits:
        for table, spec in self.tables().items():
            for key, value in spec.params.items():
                bound = AUDIT_PARAM_BOUNDS.get(key) or PARAM_BOUNDS.get(key)
                problem = bound.problem(value) if bound is not None else None
                if problem is not None:
                    raise RuleViolation(f"audits.{table}.params.{key}", problem, "R23")
        return self

    def tables(self) -> dict[str, AuditTable]:
        """Every declared table by name, in :data:`AUDIT_TABLES` order."""
        return {name: t for name in AUDIT_TABLES if (t := getattr(self, name)) is not None}

    def enabled(self) -> dict[str, AuditTable]:
        """The declared tables that run."""
        return {name: t for name, t in self.tables().items() if t.enabled}


def audit_name(table: str, spec: AuditTable) -> str:
    """The registered audit ``[audits.<table>]`` runs."""
    return spec.implementation or AUDIT_TABLES[table][0]


def check_audit_states(audits: Audits, models: Models) -> None:
    """The extra states an audit asks for must be buildable here (C-H7): a retain-only model and the content
    control need the install recipe, the procedure control the registered removal method."""
    for table, spec in audits.enabled().items():
        where = f"audits.{table}"
        install = models.pre_removal.install is not None
        if spec.reference == "retain_only" and not install:
            raise RuleViolation(
                f"{where}.reference",
                "is 'retain_only', which installs the retained items with models.pre_removal.install; a "
                "claimant's pre-removal folder has no recipe (use 'control')",
                "C-H7",
            )
        if spec.controls and (not install or models.post_removal.method is None):
            raise RuleViolation(
                f"{where}.controls",
                "needs models.pre_removal.install (content control) and models.post_removal.method (procedure "
                "control); without them set controls = false, and the statement says the controls were not run",
                "C-H7",
            )


__all__ = [
    "AUDIT_PARAM_BOUNDS",
    "AUDIT_TABLES",
    "MAX_LENS_PROMPTS",
    "AuditTable",
    "Audits",
    "audit_name",
    "check_audit_states",
]
