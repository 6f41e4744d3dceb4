"""Latent figures from audit results (C-H6, C-H7; statement schema ``LatentFigure``).

Every figure carries what C-H7(b) requires: the reference it was computed against, the model states compared, the
layer and the position. C-H7(c) is applied where the statement's block is assembled
(:func:`remnant.statement.latent.assemble_block`). No naive topic probe exists here to be reported (C-H8).

A UDS figure also says, beside the value, how its last layer was read — as the UDS reference code reads it
(``uds_compat``: the source's post-final-norm state patched into the last block's pre-norm output) or from the
block output itself, which the reference does not do (docs/latent.md) — and how many examples the mean
excludes (no knowledge-encoding layer; entity span not found), as the reference excludes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from remnant.latent.direction import DirectionResult, SurvivalFigure
from remnant.latent.jaccess import JAccessResult
from remnant.latent.uds import UDSResult
from remnant.statement.schema import LatentFigure

if TYPE_CHECKING:
    from remnant.engine.audit_base import Figure


@dataclass(frozen=True)
class Anchors:
    """How a figure names the states it was computed against (C-H7b). ``full`` is the model with the target
    (UDS's full model, J-Access's original θ_0, the direction's installed model), ``retain`` the one that never
    saw it (UDS's retain model, J-Access's θ_g, the direction's never-modified model); None keeps the audit's own
    words. ``note`` follows the reference, e.g. what the retain model stands for in an assessment."""

    full: str | None = None
    retain: str | None = None
    note: str = ""


def _short(digest: str | None) -> str:
    return digest[:12] if digest else "absent"


LAST_LAYER_COMPAT = (
    "{last} read as the UDS reference code reads it (uds_compat on: the source's post-final-norm state patched "
    "into the block's pre-norm output, so the final norm is applied twice there)"
)
LAST_LAYER_HOOK = (
    "{last} read from its block output, before the final norm (uds_compat off: not as the UDS reference code, "
    "which patches the post-final-norm state there, so this layer's Δ can differ from the reference's)"
)
LAST_LAYER_LENS = "{last} read before the final norm, as the reference's logit-lens baseline reads it"
LAST_LAYER_ABSENT = "{last} not patched (uds_compat has no effect on these layers)"


def last_layer_text(r: UDSResult) -> str:
    """How a UDS result read the model's last block, in words a reader sees beside the figure (§1.7)."""
    last = r.n_blocks - 1 if r.n_blocks else None
    name = f"last block ({last})" if last is not None else "last block"
    if r.measurement == "logit_lens_uds":
        return LAST_LAYER_LENS.format(last=name)
    if last is not None and last not in r.layers:
        return LAST_LAYER_ABSENT.format(last=name)
    return (LAST_LAYER_COMPAT if r.uds_compat else LAST_LAYER_HOOK).format(last=name)


def _excluded_text(r: UDSResult) -> str:
    if r.measurement == "uds_no_retain":
        return f"scored {r.n_scored}/{r.n_examples}; excluded: {r.n_span_not_found} with no entity span"
    return (
        f"scored {r.n_scored}/{r.n_examples}; excluded from the mean as the reference excludes them: "
        f"{r.n_no_ke} with no KE layer (Δ1 ≤ tau at every layer), {r.n_span_not_found} with no entity span"
    )


def _named(label: str | None, digest: str | None) -> str:
    return f"{label} {_short(digest)}" if label else _short(digest)


def uds_figure(state: str, r: UDSResult, anchors: Anchors | None = None) -> LatentFigure | None:
    """A UDS figure with C-H7(b)'s fields; None when no example was scored (:func:`no_figure_note` says why)."""
    a = anchors or Anchors()
    if r.score is None:
        return None
    selection = f"KE layers at tau={r.tau}"
    if r.measurement == "uds_no_retain":
        reference = (
            f"original model {_named(a.full, r.target_model)} (patched into; no retain model, [R] nats)"
        )
        states = [state, a.full or "original"]
        selection = "every layer (no KE selection)"
    else:
        reference = (
            f"full model {_named(a.full, r.target_model)} (patched into); "
            f"retain model {_named(a.retain, r.retain_model)}{a.note}"
        )
        states = [state, a.full or "full", a.retain or "retain"]
    return LatentFigure(
        name=r.measurement,
        value=r.score,
        reference=reference,
        states=states,
        layer=f"blocks {r.layers[0]}-{r.layers[-1]}, {selection}; {last_layer_text(r)}",
        position=f"{r.position}; prompt format {r.prompt_format}; {_excluded_text(r)}",
    )


def jaccess_figure(state: str, r: JAccessResult, anchors: Anchors | None = None) -> LatentFigure | None:
    """A J-Access figure (JOcc, eq. 6) with C-H7(b)'s fields; None when JOcc is undefined."""
    a = anchors or Anchors()
    if r.jocc is None:
        return None
    return LatentFigure(
        name=r.measurement,
        value=r.jocc,
        reference=f"original {_named(a.full, r.original_model)} and retain-only {_named(a.retain, r.retain_model)} "
        f"anchors (eq. 6){a.note}",
        states=[state, a.full or "original", a.retain or "retain"],
        layer=f"band {r.layers}",
        position=f"{r.positions}; top-{r.k}; silent probes {r.n_silent}/{r.n_probes}; unclipped{_gap_text(r)}",
    )


def _gap_text(r: JAccessResult) -> str:
    """The raw access above the retain-only anchor with its paired interval: JOcc alone hides how few probes
    the normalisation rests on."""
    if r.retain_gap is None or r.retain_gap_ci95 is None:
        return ""
    lo, hi = r.retain_gap_ci95
    return f"; A − A(retain) {r.retain_gap:+.3f} [{lo:+.3f}, {hi:+.3f}] (Newcombe paired 95 %)"


def no_figure_note(label: str, state: str, r: UDSResult | JAccessResult) -> str:
    """Why a result gave no figure, in the words the statement prints (C-H7: nothing is dropped silently)."""
    if isinstance(r, UDSResult):
        why = (
            f"no example scored ({r.n_no_ke} of {r.n_examples} with no KE layer at tau={r.tau}, "
            f"{r.n_span_not_found} with no entity span)"
        )
    else:
        why = (
            f"JOcc undefined on {r.n_silent} silent probes of {r.n_probes} (no silent probe, or the original and "
            "retain-only anchors read the same access there)"
        )
    return f"{label} on {state}: no figure: {why}."


def direction_figures(
    d: DirectionResult, anchors: Anchors | None = None
) -> list[tuple[SurvivalFigure, LatentFigure]]:
    """Every non-installed state's survival figure with C-H7(b)'s fields, beside the result figure it came from."""
    a = anchors or Anchors()
    return [
        (
            f,
            LatentFigure(
                name="direction_survival",
                value=f.survival,
                reference=f"never-modified control {_named(a.retain, d.reference)}{a.note}",
                states=[f.state, a.full or "installed", a.retain or "never_modified"],
                layer=f.layer,
                position=f.position,
            ),
        )
        for f in d.figures
        if f.role != "installed"
    ]


def result_figure(
    state: str, r: UDSResult | JAccessResult, anchors: Anchors | None = None
) -> LatentFigure | None:
    """:func:`uds_figure` or :func:`jaccess_figure`, whichever ``r`` is."""
    return uds_figure(state, r, anchors) if isinstance(r, UDSResult) else jaccess_figure(state, r, anchors)


def figure_reading(
    label: str, state: str, r: UDSResult | JAccessResult, anchors: Anchors, details: dict[str, Any]
) -> Figure:
    """A registered audit's reading of ``r`` with the counts and settings behind it (``details``, C-H7b); with no
    figure, the fields it would have compared and :func:`no_figure_note` in ``details``."""
    from remnant.engine.audit_base import blank_fields

    fig = result_figure(state, r, anchors)
    if fig is None:
        details["no_figure"] = no_figure_note(label, state, r)
        return (None, *blank_fields(anchors, state), None, details)
    return (fig.value, fig.states, fig.reference, str(fig.layer), fig.position, None, details)


__all__ = [
    "Anchors",
    "direction_figures",
    "figure_reading",
    "jaccess_figure",
    "last_layer_text",
    "no_figure_note",
    "result_figure",
    "uds_figure",
]
