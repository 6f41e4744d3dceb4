"""J-Access over many audited checkpoints against one pair of anchors, Holm-adjusted (the J-Access paper, Test 1).

The paper audits a grid of unlearned checkpoints and reports, per method, the share whose raw access exceeds the
retain-only gold anchor and the share "significantly above the gold anchor after Holm correction over the full
grid" (Table 1). Here: every audited model is read through the same decoder on the same probes; the anchors are
read once; each model's JOcc is eq. 6 on its own silent subset; its test of "A(θ) > A(θ_g)" is the one-sided
exact McNemar test on the silent probes (:func:`~remnant.latent.jaccess.mcnemar_greater`, both models read on the
same probes [R]: the paper does not name its test), and the p-values are Holm-adjusted across the models
(:func:`remnant.stats.holm`). A model with no silent probe has no test: it is listed, not counted in the family.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from remnant.latent.jaccess import AccessConfig, JAccessResult, Probe, j_occ, read_access
from remnant.latent.jacobian_lens import JacobianLens
from remnant.stats import holm

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

TEST = (
    "one-sided exact McNemar test of A(θ) > A(θ_g) on each audited model's silent probes, Holm-adjusted across "
    "the audited models with a test (stats.holm) [R: the J-Access paper names Holm, not the per-model test]"
)


class JAccessGridRow(BaseModel):
    """One audited model of the grid."""

    model_config = ConfigDict(extra="forbid")

    label: str = Field(description="The caller's name for the audited model.")
    result: JAccessResult = Field(description="Its J-Access against the shared anchors.")
    above_retain: bool = Field(description="Raw A(θ; I(θ)) > A(θ_g; I(θ)) (Table 1's '>gold').")
    p_holm: float | None = Field(description="Holm-adjusted p-value of A(θ) > A(θ_g); None without a test.")
    significant: bool = Field(description="p_holm < alpha (Table 1's 'sig.').")


class JAccessGrid(BaseModel):
    """J-Access of several audited models against one original and one retain-only anchor."""

    model_config = ConfigDict(extra="forbid")

    measurement: Literal["j_access", "logit_lens_access"] = Field(description="Jacobian lens or logit lens.")
    rows: list[JAccessGridRow] = Field(description="One row per audited model, in the caller's order.")
    test: str = Field(description="The per-model test and the multiplicity correction.")
    alpha: float = Field(description="Family-wise error rate of the Holm procedure.")
    n_models: int = Field(description="Audited models.")
    n_tested: int = Field(description="Models with a test (some silent probe): the Holm family's size.")
    n_above_retain: int = Field(description="Models whose raw access exceeds the retain-only anchor's.")
    n_significant: int = Field(description="Models significantly above the retain-only anchor after Holm.")
    median_jocc: float | None = Field(description="Median JOcc over the models where it is defined.")
    lens_model: str | None = Field(
        default=None, description="Weights digest of the model whose J read every model (fixed decoder)."
    )


def holm_grid(results: Mapping[str, JAccessResult], alpha: float = 0.05) -> JAccessGrid:
    """Table 1's columns from per-model results: above the anchor, Holm-adjusted significance, median JOcc."""
    if not results:
        raise ValueError("holm_grid: no audited model")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"holm_grid: alpha must lie in (0, 1), not {alpha}")
    kinds = {r.measurement for r in results.values()}
    if len(kinds) != 1:
        raise ValueError(f"holm_grid: one measurement per grid, got {sorted(kinds)}")
    tested = [label for label, r in results.items() if r.p_above_retain is not None]
    adjusted = dict(zip(tested, holm([results[t].p_above_retain or 0.0 for t in tested]), strict=True))
    rows = []
    for label, r in results.items():
        above = (
            r.access_audited is not None
            and r.access_retain is not None
            and r.access_audited > r.access_retain
        )
        p = adjusted.get(label)
        rows.append(
            JAccessGridRow(
                label=label, result=r, above_retain=above, p_holm=p, significant=p is not None and p < alpha
            )
        )
    joccs = [r.jocc for r in results.values() if r.jocc is not None]
    return JAccessGrid(
        measurement=kinds.pop(),
        rows=rows,
        test=TEST,
        alpha=alpha,
        n_models=len(rows),
        n_tested=len(tested),
        n_above_retain=sum(row.above_retain for row in rows),
        n_significant=sum(row.significant for row in rows),
        median_jocc=statistics.median(joccs) if joccs else None,
    )


def read_grid(
    audited: Mapping[str, Any],
    original: PreTrainedModel,
    retain: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    probes: Sequence[Probe],
    cfg: AccessConfig,
    lens_for: Callable[[Any], JacobianLens | None],
    *,
    alpha: float = 0.05,
    update: Mapping[str, Any] | None = None,
) -> JAccessGrid:
    """Read the anchors once and every audited model, each through ``lens_for(model)`` (the original's lens for
    all: the paper's fixed decoder; each model's own: the refit variant; None: the logit lens), then
    :func:`holm_grid`. ``update`` sets result fields the readouts do not know (band selection, probe level)."""
    anchors = [read_access(model, tokenizer, probes, lens_for(model), cfg) for model in (original, retain)]
    results = {}
    for label, model in audited.items():
        read = read_access(model, tokenizer, probes, lens_for(model), cfg)
        results[label] = j_occ(read, *anchors).model_copy(update=dict(update or {}))
    grid = holm_grid(results, alpha)
    lens = lens_for(original)
    fixed = {r.result.decoder for r in grid.rows} == {"fixed"}
    return grid.model_copy(update={"lens_model": lens.model if lens is not None and fixed else None})


__all__ = ["TEST", "JAccessGrid", "JAccessGridRow", "holm_grid", "read_grid"]
