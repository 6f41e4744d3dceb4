"""The statement's ``latent`` block from audit results (C-H6, C-H7; statement schema ``LatentBlock``).

Every figure carries what C-H7(b) requires: the reference it was computed against, the model states compared, the
layer and the position. C-H7(c): a measurement whose results include both control states (procedure control,
content control) has their figures listed beside it; any measurement without them is named in a statement that
the controls were not run and that its figures therefore cannot be interpreted as being about the target. The
block is always ``adjudicating: false``. No naive topic probe exists here to be reported (C-H8).

A UDS figure also says, beside the value, how its last layer was read — as the UDS reference code reads it
(``uds_compat``: the source's post-final-norm state patched into the last block's pre-norm output) or from the
block output itself, which the reference does not do (algorithms.md §1.7) — and how many examples the mean
excludes (no knowledge-encoding layer; entity span not found), as the reference excludes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from remnant.latent.direction import CONTROL_ROLES, DirectionResult
from remnant.latent.jaccess import JAccessResult
from remnant.latent.uds import UDSResult
from remnant.statement.schema import LatentBlock, LatentFigure

NOT_RUN = (
    "The C-H3 control states (removal applied to a never-installed model; a content-shuffled install) were not "
    "run for {names}; {these} figures therefore cannot be interpreted as being about the target "
    "(C-H7c, Annex B.6)."
)


@dataclass(frozen=True)
class StateResults:
    """One measurement's results keyed by model state, with each state's role."""

    results: Mapping[str, UDSResult | JAccessResult]
    roles: Mapping[str, str] = field(default_factory=dict)

    def controls_run(self) -> bool:
        present = {self.roles.get(name, "") for name in self.results}
        return all(role in present for role in CONTROL_ROLES)


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


def _uds_figure(state: str, r: UDSResult) -> LatentFigure | None:
    if r.score is None:
        return None
    selection = f"KE layers at tau={r.tau}"
    if r.measurement == "uds_no_retain":
        reference = f"original model {_short(r.target_model)} (patched into; no retain model, [R] nats)"
        states = [state, "original"]
        selection = "every layer (no KE selection)"
    else:
        reference = (
            f"full model {_short(r.target_model)} (patched into); retain model {_short(r.retain_model)}"
        )
        states = [state, "full", "retain"]
    return LatentFigure(
        name=r.measurement,
        value=r.score,
        reference=reference,
        states=states,
        layer=f"blocks {r.layers[0]}-{r.layers[-1]}, {selection}; {last_layer_text(r)}",
        position=f"{r.position}; prompt format {r.prompt_format}; {_excluded_text(r)}",
    )


def _jaccess_figure(state: str, r: JAccessResult) -> LatentFigure | None:
    if r.jocc is None:
        return None
    return LatentFigure(
        name=r.measurement,
        value=r.jocc,
        reference=f"original {_short(r.original_model)} and retain-only {_short(r.retain_model)} anchors (eq. 6)",
        states=[state, "original", "retain"],
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


def _direction_figures(d: DirectionResult) -> list[LatentFigure]:
    return [
        LatentFigure(
            name="direction_survival",
            value=f.survival,
            reference=f"never-modified control {_short(d.reference)}",
            states=[f.state, "installed", "never_modified"],
            layer=f.layer,
            position=f.position,
        )
        for f in d.figures
        if f.role != "installed"
    ]


def _control_text(name: str, figures: list[LatentFigure]) -> str:
    parts = [f"{f.states[0]} {f.layer}/{f.position}: {f.value:.3f}" for f in figures]
    return f"{name} control figures: " + "; ".join(parts)


def latent_block(
    *,
    uds: StateResults | None = None,
    jaccess: StateResults | None = None,
    direction: DirectionResult | None = None,
) -> LatentBlock:
    """Build the non-adjudicating latent block; C-H7(b) fields on every figure, C-H7(c) in the statement."""
    figures: list[LatentFigure] = []
    with_controls: list[str] = []
    without: list[str] = []
    texts: list[str] = []
    for label, group in (("UDS", uds), ("J-Access", jaccess)):
        if group is None:
            continue
        mine: list[LatentFigure] = []
        controls: list[LatentFigure] = []
        for state, r in group.results.items():
            fig = _uds_figure(state, r) if isinstance(r, UDSResult) else _jaccess_figure(state, r)
            if fig is None:
                continue
            mine.append(fig)
            if group.roles.get(state) in CONTROL_ROLES:
                controls.append(fig)
        figures += mine
        if mine:
            (with_controls if group.controls_run() else without).append(label)
            if group.controls_run():
                texts.append(_control_text(label, controls))
    if direction is not None:
        figs = _direction_figures(direction)
        figures += figs
        if direction.controls_run:
            with_controls.append("direction survival")
            controls = [
                f
                for f, s in zip(figs, [x for x in direction.figures if x.role != "installed"], strict=True)
                if s.role in CONTROL_ROLES
            ]
            texts.append(_control_text("direction survival", controls))
        else:
            without.append("direction survival")
    if without:
        these = "its" if len(without) == 1 else "their"
        texts.append(NOT_RUN.format(names=", ".join(without), these=these))
    if not figures:
        texts.append("No latent figure was produced.")
    return LatentBlock(
        controls_run=bool(with_controls) and not without,
        controls_statement=" ".join(texts) + " Latent figures are non-adjudicating (C-H6).",
        figures=figures,
    )


__all__ = ["NOT_RUN", "StateResults", "last_layer_text", "latent_block"]
