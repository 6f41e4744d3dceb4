"""The verdict facts a statement's per-cell results imply, read with the assessment's own rules (V1, R22).

A statement's ``facts`` are what its verdict rests on; its ``cells`` are the per-cell results they were counted
from (R22). :func:`derive` reads the cells back into facts, so ``remnant validate`` can recompute the verdict from
them and name every place where the two disagree. What the cells say, and how they are read:

- **Each attack that ran** has a post-removal cell ``name/surface/post_removal`` (its k/n) and, where the control
  was obtained, ``name/surface/control`` (R4); a Class D measurement adds ``…/post_removal/control_entities`` (D4)
  and keeps the control model's counts as ``control_model_k/n`` (V1a). These are
  :func:`remnant.statement.build.cells_from_facts`'s ids.
- **Reading cells** ``name/surface/state/metric@checkpoint`` (an assessment's per-checkpoint results, R22) imply
  those counts again: the ``final`` reading of the gating metric on each state, or for a relearning arm the
  checkpoint :func:`remnant.standard.derive.best_relearning_point` chooses (C-W3, C-W5). A Class D relearning
  measurement is chosen on control-entity counts per checkpoint, which the statement does not carry, so its
  checkpoint cells are not read.
- **Utility cells** ``none/utility/state/metric@removal_stage`` and ``relearning/utility/post_removal/…`` give the
  two utility stages by :func:`remnant.standard.derive.utility_stages` (R11, R12), when every declared metric has
  its removal-stage cells on both states (a metric whose value is not a proportion has none).

Statuses other than *run*, reasons, ``adjudicating``, ``risk`` and ``baseline`` are not in any cell, so they are
taken from the facts; an attack the facts say ran with no cell behind it is read as *not run*, and a cell with
no attack in the facts as an attack that ran.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from remnant.standard.derive import (
    NONE,
    REMOVAL_STAGE,
    best_relearning_point,
    parse_checkpoint,
    utility_stages,
)
from remnant.standard.facts import AttackFact, VerdictFacts
from remnant.standard.vocabulary import CONTROL, POST, PRE
from remnant.statement.build import CONTROL_ENTITIES
from remnant.statement.schema import Cell, ConformanceStatement
from remnant.statement.violation import Violation, violation

#: The separator the pre-registration block joins the declared utility metrics with (remnant.prereg).
METRIC_SEPARATOR = " / "
_COUNT_FIELDS = ("k", "n", "control_k", "control_n", "control_model_k", "control_model_n")

Kind = Literal["primary", "control_entities", "reading"]


@dataclass(frozen=True)
class Placed:
    """A cell with its place: an attack's own cell, its control entities, or a reading at a checkpoint."""

    cell: Cell
    kind: Kind
    label: str = ""  # a reading's metric: kappa, w, or a utility metric's name
    checkpoint: str = ""  # a reading's checkpoint: final, removal_stage, budget=B/step=S, budget=B/final


@dataclass(frozen=True)
class _Point:
    budget: int
    step: int
    k: int
    n: int


@dataclass
class Derivation:
    """The facts the cells imply (JSON form, ``utility`` left to the caller) and where they disagree."""

    attacks: list[dict[str, Any]] = field(default_factory=list)
    utility: dict[str, Any] | None = None
    violations: list[Violation] = field(default_factory=list)

    def flag(self, requirement: str, message: str) -> None:
        self.violations.append(violation(requirement, message))


def place(cell: Cell) -> Placed | None:
    """Where ``cell`` sits, from its id read against its own attack, surface and state; None if it names others."""
    prefix = f"{cell.attack}/{cell.surface}/{cell.model_state}"
    if not cell.cell_id.startswith(prefix):
        return None
    rest = cell.cell_id[len(prefix) :]
    if rest == "":
        return Placed(cell, "primary")
    if rest == f"/{CONTROL_ENTITIES}" and cell.model_state == POST:
        return Placed(cell, "control_entities")
    label, at, checkpoint = rest[1:].partition("@")
    if rest[:1] != "/" or not at or not label or not checkpoint:
        return None
    return Placed(cell, "reading", label, checkpoint)


def _count(cell: Cell | None) -> tuple[int, int] | None:
    return (cell.k, cell.n) if cell is not None else None


def _reading_counts(
    readings: Sequence[Placed], fact: AttackFact, metric: str
) -> tuple[tuple[int, int], tuple[int, int] | None] | None:
    """The (post, control) counts an attack's reading cells imply, as the assessment chose them; None if none."""
    if fact.risk is not None:
        if fact.surface == "relearning":
            return None  # chosen on control-entity counts per checkpoint, which no cell carries (D-5.3)
        metric = "kappa"  # the battery counts κ on the canaries whatever the gating metric (D-2 – D-4)
    mine = [r for r in readings if r.label == metric]
    if fact.surface == "relearning" and fact.risk is None:

        def points(state: str) -> list[_Point]:
            out = []
            for r in mine:
                where = parse_checkpoint(r.checkpoint)
                if r.cell.model_state == state and where is not None:
                    out.append(_Point(where[0], where[1], r.cell.k, r.cell.n))
            return out

        control = {(p.budget, p.step): p for p in points(CONTROL)}
        best = best_relearning_point(points(POST), control)
        if best is None:
            return None
        ctrl = control.get((best.budget, best.step))
        return (best.k, best.n), ((ctrl.k, ctrl.n) if ctrl is not None else None)
    by_state: dict[str, Cell] = {r.cell.model_state: r.cell for r in mine if r.checkpoint == "final"}
    post = _count(by_state.get(POST))
    return (post, _count(by_state.get(CONTROL))) if post is not None else None


class _Cells:
    """The statement's cells by place."""

    def __init__(self, s: ConformanceStatement, out: Derivation) -> None:
        self.primary: dict[tuple[str, str, str], Cell] = {}
        self.entities: dict[tuple[str, str], Cell] = {}
        self.readings: dict[tuple[str, str], list[Placed]] = defaultdict(list)
        for cell in s.cells:
            placed = place(cell)
            if placed is None:
                out.flag(
                    "R22",
                    f"cell {cell.cell_id!r} does not name its own attack, surface and state "
                    f"({cell.attack}/{cell.surface}/{cell.model_state}), so no aggregate can be traced to it",
                )
            elif placed.kind == "primary":
                self.primary[(cell.attack, cell.surface, cell.model_state)] = cell
            elif placed.kind == "control_entities":
                self.entities[(cell.attack, cell.surface)] = cell
            else:
                self.readings[(cell.attack, cell.surface)].append(placed)

    def of(self, name: str, surface: str) -> tuple[Cell | None, Cell | None, Cell | None]:
        """(post-removal, control model, control entities) cells of one attack."""
        return (
            self.primary.get((name, surface, POST)),
            self.primary.get((name, surface, CONTROL)),
            self.entities.get((name, surface)),
        )


def _counts_from_cells(
    fact: AttackFact, cells: _Cells, metric: str, where: str, out: Derivation
) -> dict[str, int | None]:
    """The counts an attack's cells give, flagging its reading cells where they imply others (R22)."""
    post, control, entities = cells.of(fact.name, fact.surface)
    assert post is not None
    counts: dict[str, int | None] = dict.fromkeys(_COUNT_FIELDS)
    counts.update(k=post.k, n=post.n)
    control_keys = (
        ("control_model_k", "control_model_n") if fact.risk is not None else ("control_k", "control_n")
    )
    if control is not None:
        counts.update(zip(control_keys, (control.k, control.n), strict=True))
    if fact.risk is not None and entities is not None:
        counts.update(control_k=entities.k, control_n=entities.n)
    elif entities is not None:
        out.flag(
            "R22", f"cell {entities.cell_id!r}: control entities on {where}, which measures no Class D risk"
        )
    implied = _reading_counts(cells.readings.get((fact.name, fact.surface), []), fact, metric)
    if implied is None:
        return counts
    (k, n), control_count = implied
    if (k, n) != (post.k, post.n):
        out.flag(
            "R22",
            f"cell {post.cell_id!r} holds {post.k}/{post.n}, but its checkpoint cells give {k}/{n} "
            "(the reading the assessment takes, C-W3)",
        )
    if control_count != _count(control):
        shown = f"{control.k}/{control.n}" if control is not None else "no control cell"
        got = f"{control_count[0]}/{control_count[1]}" if control_count is not None else "no control reading"
        out.flag(
            "R4",
            f"control of {where}: {shown}, but its checkpoint cells give {got} under the identical attack",
        )
    counts.update(k=k, n=n)
    counts.update(zip(control_keys, control_count or (None, None), strict=True))
    return counts


def _derive_attack(
    index: int, fact: AttackFact, cells: _Cells, metric: str, out: Derivation
) -> dict[str, Any]:
    where = f"facts.attacks[{index}] ({fact.name})"
    row = fact.model_dump(mode="json", by_alias=True)
    post, control, entities = cells.of(fact.name, fact.surface)
    if post is None:
        if fact.status == "run":
            out.flag(
                "R22",
                f"{where} ran, but no per-cell result {fact.name}/{fact.surface}/{POST} backs it; read as not run",
            )
            row.update(
                dict.fromkeys(_COUNT_FIELDS), status="not_run", reason="no per-cell result in the statement"
            )
        for orphan in (control, entities):
            if orphan is not None:
                out.flag("R22", f"cell {orphan.cell_id!r} has no post-removal cell beside it ({where})")
        return row
    if fact.status != "run":
        out.flag(
            "R22",
            f"{where} is {fact.status!r}, but cell {post.cell_id!r} holds a result ({post.k}/{post.n}); "
            "read as run",
        )
        row.update(status="run")
    counts = _counts_from_cells(fact, cells, metric, where, out)
    if fact.status == "run":
        stated = {name: getattr(fact, name) for name in _COUNT_FIELDS}
        wrong = [name for name in _COUNT_FIELDS if stated[name] != counts[name]]
        if wrong:
            said = ", ".join(f"{name}={stated[name]}" for name in wrong)
            got = ", ".join(f"{name}={counts[name]}" for name in wrong)
            out.flag("R22", f"{where}: {said}, but its per-cell results give {got}")
    row.update(counts)
    return row


def _orphans(facts: VerdictFacts, cells: _Cells, out: Derivation) -> list[dict[str, object]]:
    """Attacks the cells hold and the facts do not: flagged, and read as attacks that ran (R22)."""
    known = {(a.name, a.surface) for a in facts.attacks}
    names = {a.name for a in facts.attacks}
    rows: list[dict[str, object]] = []
    for (name, surface, state), cell in cells.primary.items():
        if (name, surface) in known or state != POST:
            continue
        out.flag(
            "R22", f"cell {cell.cell_id!r} holds a result for attack {name!r}, which the facts do not list"
        )
        if name in names:
            continue  # the facts list it on another surface: already read from there
        names.add(name)
        row: dict[str, object] = {"name": name, "surface": surface, "status": "run", "k": cell.k, "n": cell.n}
        control = cells.primary.get((name, surface, CONTROL))
        if control is not None:
            row.update(control_k=control.k, control_n=control.n)
        rows.append(row)
    lone = [
        c for (a, f, state), c in cells.primary.items() if state != POST and (a, f, POST) not in cells.primary
    ]
    lone += [c for (a, f), c in cells.entities.items() if (a, f, POST) not in cells.primary]
    for cell in lone:
        if (cell.attack, cell.surface) not in known:
            out.flag(
                "R22",
                f"cell {cell.cell_id!r} holds a result for attack {cell.attack!r}, which the facts do not list",
            )
    return rows


def utility_from_cells(s: ConformanceStatement) -> dict[str, Any] | None:
    """Both utility stages from the utility cells, or None when a declared metric lacks its removal-stage cells."""
    metrics = [m.strip() for m in s.pre_registration.utility_metric.split(METRIC_SEPARATOR) if m.strip()]
    values: dict[tuple[str, str, str, str], float] = {}
    for cell in s.cells:
        placed = place(cell)
        if placed is not None and placed.kind == "reading" and cell.surface == "utility" and cell.n:
            values[(cell.attack, placed.checkpoint, cell.model_state, placed.label)] = cell.k / cell.n
    covered = all(
        (NONE, REMOVAL_STAGE, state, metric) in values for metric in metrics for state in (POST, PRE)
    )
    return utility_stages(values, metrics) if metrics and covered else None


def derive(s: ConformanceStatement, facts: VerdictFacts, metric: str) -> Derivation:
    """Read the statement's cells into the attacks (JSON form) and utility they imply, flagging disagreements.

    ``metric`` is the gating metric in effect (κ or w, R7): the reading cells of that metric are the ones read.
    """
    out = Derivation()
    cells = _Cells(s, out)
    out.attacks = [_derive_attack(i, fact, cells, metric, out) for i, fact in enumerate(facts.attacks)]
    out.attacks += _orphans(facts, cells, out)
    out.utility = utility_from_cells(s)
    return out


__all__ = ["METRIC_SEPARATOR", "Derivation", "Placed", "derive", "place", "utility_from_cells"]
