"""The statement's ``latent`` block: assembled from figures without a model, and checked (C-H6, C-H7). Pure.

A latent figure is supplementary and never adjudicating (C-H6). C-H7 says how it is reported:

- **(a)** the block is labelled: ``status: "supplementary"``, ``adjudicating: false``, and its statement ends
  with "Latent figures are non-adjudicating (C-H6)";
- **(b)** every figure carries the never-modified reference it was computed against, the model states compared
  (the audited state first), the layer and the token position;
- **(c)** a measurement whose figures include both Annex B control states — the removal procedure applied to a
  never-installed model (``procedure_control``) and a content-shuffled install (``content_control``) — has their
  figures listed in the statement; every other measurement is named in the statement that the controls were not
  run and that its figures therefore cannot be interpreted as being about the target (Annex B.6).

``remnant assess`` and ``remnant recompute`` build the block from the run's reading records
(:func:`block_from_readings`), so it is rebuilt from records alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from remnant.statement.schema import LatentBlock, LatentFigure
from remnant.statement.violation import Violation, violation

#: The two Annex B control states C-H7(c) asks the same statistic for (deprecated C-H3a, C-H3b).
CONTROL_ROLES = ("procedure_control", "content_control")

NOT_RUN = (
    "The C-H3 control states (removal applied to a never-installed model; a content-shuffled install) were not "
    "run for {names}; {these} figures therefore cannot be interpreted as being about the target "
    "(C-H7c, Annex B.6)."
)
LABEL = "Latent figures are non-adjudicating (C-H6)."
NO_FIGURE = "No latent figure was produced."
#: Phrases a not-run statement must hold (C-H7c), checked by :func:`latent_violations`.
NOT_RUN_PHRASES = ("not run", "cannot be interpreted as being about the target")

#: How the statement names the measurements of each ``[audits.<table>]`` (the registered name follows it).
TABLE_LABELS = {
    "uds": "UDS",
    "jaccess": "J-Access",
    "logit_lens": "logit lens",
    "direction": "direction survival",
}


@dataclass(frozen=True)
class Entry:
    """One audited state's figure under one measurement, or the note saying why it gave none.

    ``ran`` is whether the statistic was computed on that state (a figure, or an undefined value); a state whose
    audit failed or was not run does not count towards C-H7(c)'s control states.
    """

    group: str
    role: str
    figure: LatentFigure | None
    note: str | None = None
    ran: bool = True


def _control_text(name: str, figures: Sequence[LatentFigure]) -> str:
    parts = [f"{f.states[0]} {f.layer}/{f.position}: {f.value:.3f}" for f in figures]
    return f"{name} control figures: " + "; ".join(parts) + "."


def assemble_block(entries: Sequence[Entry]) -> LatentBlock:
    """The non-adjudicating block (module docstring): groups in order of first appearance, their figures in
    entry order, C-H7(c) per group, notes for states that gave no figure."""
    groups: dict[str, list[Entry]] = {}
    for entry in entries:
        groups.setdefault(entry.group, []).append(entry)
    figures: list[LatentFigure] = []
    with_controls: list[str] = []
    without: list[str] = []
    texts: list[str] = []
    notes: list[str] = []
    for label, members in groups.items():
        mine = [e.figure for e in members if e.figure is not None]
        controls = [e.figure for e in members if e.figure is not None and e.role in CONTROL_ROLES]
        notes += [e.note for e in members if e.figure is None and e.note]
        figures += mine
        ran = {e.role for e in members if e.ran}
        if not ran:  # every state failed or was not run: the notes say so, there is nothing to qualify
            continue
        if all(role in ran for role in CONTROL_ROLES):
            with_controls.append(label)
            texts.append(_control_text(label, controls))
        else:
            without.append(label)
    if without:
        these = "its" if len(without) == 1 else "their"
        texts.append(NOT_RUN.format(names=", ".join(without), these=these))
    texts += notes
    if not figures:
        texts.append(NO_FIGURE)
    return LatentBlock(
        controls_run=bool(with_controls) and not without,
        controls_statement=" ".join(texts) + " " + LABEL,
        figures=figures,
    )


class ReadingLike(Protocol):
    """What :func:`block_from_readings` reads of a :class:`remnant.records.Reading` (the statement package does
    not import the records module, which imports it)."""

    @property
    def cell_key(self) -> str: ...

    @property
    def measurement(self) -> str: ...

    @property
    def audit(self) -> str: ...

    @property
    def model_state(self) -> str: ...

    @property
    def role(self) -> str: ...

    @property
    def states(self) -> list[str]: ...

    @property
    def reference(self) -> str: ...

    @property
    def layer(self) -> str: ...

    @property
    def position(self) -> str: ...

    @property
    def value(self) -> float | None: ...

    @property
    def status(self) -> str: ...

    @property
    def reason(self) -> str | None: ...


def group_label(audit: str, measurement: str) -> str:
    """How the statement names a measurement: its table's label and the registered name (``UDS (uds)``)."""
    return f"{TABLE_LABELS.get(audit, audit)} ({measurement})"


def _entry(r: ReadingLike) -> Entry:
    group = group_label(r.audit, r.measurement)
    if r.status == "run" and r.value is not None:
        figure = LatentFigure(
            name=r.measurement,
            value=r.value,
            reference=r.reference,
            states=list(r.states),
            layer=r.layer,
            position=r.position,
        )
        return Entry(group, r.role, figure)
    what = {"failed": "failed", "not_run": "was not run"}.get(r.status, "gave no figure")
    note = f"{group} on {r.model_state} ({r.role}) {what}: {r.reason}."
    return Entry(group, r.role, None, note, ran=r.status == "run")


def block_from_readings(readings: Iterable[ReadingLike]) -> LatentBlock | None:
    """The block from a run's reading records in file order (None when the run holds none). A reading recorded
    twice (a cell re-run after a torn write) counts once: the first copy."""
    seen: set[tuple[str, str, str, str, str]] = set()
    entries: list[Entry] = []
    for r in readings:
        key = (r.cell_key, r.model_state, r.measurement, r.layer, r.position)
        if key in seen:
            continue
        seen.add(key)
        entries.append(_entry(r))
    return assemble_block(entries) if entries else None


def _norm(text: str) -> str:
    return " ".join(text.replace("_", " ").replace("-", " ").casefold().split())


def _blank(value: object) -> bool:
    return not str(value).strip()


def latent_violations(block: LatentBlock) -> list[Violation]:
    """C-H7(a), (b), (c) on a statement's latent block (C-H6's ``adjudicating`` is the schema's and the raw
    check's): the label, every figure's reference, states, layer and position, and each measurement either with
    both control states' figures or named in the statement that the controls were not run."""
    out: list[Violation] = []
    if LABEL.split(" (")[0].casefold() not in block.controls_statement.casefold():
        out.append(
            violation("C-H7(a)", "latent.controls_statement does not label the figures non-adjudicating")
        )
    for i, f in enumerate(block.figures):
        missing = [
            name
            for name, empty in (
                ("reference", _blank(f.reference)),
                ("states", not f.states or any(_blank(s) for s in f.states)),
                ("layer", _blank(f.layer)),
                ("position", _blank(f.position)),
            )
            if empty
        ]
        if missing:
            out.append(
                violation(
                    "C-H7(b)",
                    f"latent.figures[{i}] ({f.name}) reports no {', '.join(missing)} beside its value",
                )
            )
    out += _control_violations(block)
    return out


def _control_violations(block: LatentBlock) -> list[Violation]:
    """C-H7(c): a measurement without both control states' figures is named in a not-run statement."""
    out: list[Violation] = []
    roles: dict[str, set[str]] = {}
    for f in block.figures:
        roles.setdefault(f.name, set()).add(f.states[0] if f.states else "")
    lacking = [name for name, seen in roles.items() if not all(r in seen for r in CONTROL_ROLES)]
    text = _norm(block.controls_statement)
    said = all(_norm(p) in text for p in NOT_RUN_PHRASES)
    for name in lacking:
        if not said or _norm(name) not in text:
            out.append(
                violation(
                    "C-H7(c)",
                    f"latent figures of {name} have no procedure_control and content_control figures, "
                    "and latent.controls_statement does not name it in a statement that the controls were not "
                    "run and its figures cannot be interpreted as being about the target",
                )
            )
    if block.controls_run and lacking:
        out.append(
            violation(
                "C-H7(c)",
                f"latent.controls_run is true, but {', '.join(lacking)} has no control-state figures",
            )
        )
    return out


__all__ = [
    "CONTROL_ROLES",
    "LABEL",
    "NOT_RUN",
    "TABLE_LABELS",
    "Entry",
    "ReadingLike",
    "assemble_block",
    "block_from_readings",
    "group_label",
    "latent_violations",
]
