"""A TOFU folder as a target pack: TOFU's splits mapped onto the pack's (docs/formats.md, "Import: a TOFU folder as
a target pack"; R2, R16, C-W6, D4).

TOFU rows name no author, but each split lists an author's questions together, 20 a person; so
``rows_per_entity`` consecutive rows of a split are one entity, and R and P are split by author (C-W6): no
relearned row is about a scored person. P asks TOFU's ``paraphrased_question``, held out from install (R16). A
perturbed row is paired with its forget or retain row by question text (repeats pair in order). An item asking
TOFU's paraphrase keeps TOFU's question as ``paraphrased_question``, with every truth-ratio field of its row, so
:func:`remnant.formats.pack_to_tofu` writes the rows back as they were."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from remnant.errors import PackError
from remnant.formats.build import (
    PackClass,
    assemble,
    check_distinct,
    make_item,
    match_rows,
    question_key,
    relearn_count,
)
from remnant.formats.files import MAX_LINE_BYTES, MAX_ROWS
from remnant.formats.tofu import TofuFolder, TofuRow, read_tofu
from remnant.packs.schema import Entity, Item, Pack

#: TOFU's questions per fictitious author.
TOFU_ROWS_PER_AUTHOR = 20
GENERAL_SPLITS: tuple[str, ...] = ("real_authors_perturbed", "world_facts_perturbed")


class _Builder:
    """Items and split lists, accumulated while the TOFU splits are mapped one by one."""

    def __init__(self, data: TofuFolder, per: int) -> None:
        self.data = data
        self.per = per
        self.items: list[Item] = []
        self.splits: dict[str, list[str]] = {}
        self.entities: list[Entity] = []
        self.notes: Counter[str] = Counter()

    def authors(self, split: str, prefix: str, roles: Sequence[str]) -> list[Entity]:
        """One entity per run of ``per`` rows of ``split``; the k-th takes ``roles[k]`` (the last role repeats)."""
        count = -(-len(self.data.rows(split)) // self.per)
        made = [
            Entity.model_validate(
                {
                    "id": f"{prefix}{k:04d}",
                    "name": f"{split} author {k + 1}",
                    "role": roles[min(k, len(roles) - 1)],
                    "attributes": {},
                }
            )
            for k in range(count)
        ]
        self.entities += made
        return made

    def add(self, split: str, i: int, names: Sequence[str], row: TofuRow, **fields: object) -> Item:
        """Row ``i`` of ``split`` as an item listed in ``names`` (the first is its own split)."""
        base: dict[str, Any] = {
            "id": f"{split}.{i:05d}",
            "kind": "fact",
            "question": row.question,
            "answer": row.answer,
            "accepted": [row.answer],
            "template_id": f"tofu.{split}",
            "phrasing": "install",
            "split": names[0],
            "paraphrased_answer": row.paraphrased_answer,
            "perturbed_answer": row.perturbed_answer,
            "paraphrased_question": row.paraphrased_question,
        }
        item = make_item(self.data.where(split, i), **{**base, **fields})
        self.items.append(item)
        for name in names:
            self.splits.setdefault(name, []).append(item.id)
        return item

    def install(self, split: str, entities: list[Entity], removal: bool) -> None:
        """Every row of ``split`` into install (and removal; and relearn for R authors)."""
        for i, row in enumerate(self.data.rows(split)):
            ent = entities[i // self.per]
            names = ["install"] + (["removal"] if removal else [])
            names += ["relearn"] if ent.role == "forget_relearn" else []
            self.add(split, i, names, row, entity_id=ent.id)

    def asked_as_paraphrase(self, row: TofuRow) -> dict[str, object]:
        """Fields of an item that asks ``row``'s paraphrase and keeps TOFU's question beside it."""
        return {
            "question": row.paraphrased_question,
            "paraphrased_question": row.question,
            "phrasing": "probe",
        }

    def probe(self, forget: str, perturbed: str, entities: list[Entity]) -> None:
        """P: the perturbed rows of P authors, asking the held-out paraphrase (R16); every P row present."""
        forget_rows = self.data.rows(forget)
        rows = self.data.rows(perturbed)
        matched = match_rows([r.question for r in forget_rows], [r.question for r in rows])
        seen: set[int] = set()
        for j, (row, i) in enumerate(zip(rows, matched, strict=True)):
            where = self.data.where(perturbed, j)
            if i is None:
                raise PackError(
                    f"{where}: its question is no row of {forget!r} (a perturbed split holds the forget split's "
                    "rows; pairing them ties each P item to its author)",
                    requirement="C-W6",
                )
            ent = entities[i // self.per]
            if ent.role != "forget_probe":
                self.notes["relearn_perturbed_rows_left_out"] += 1
                continue
            if row.paraphrased_question is None:
                raise PackError(
                    f"{where}: field 'paraphrased_question' missing; P asks it, since TOFU's question is the "
                    "installed one",
                    requirement="R16",
                )
            seen.add(i)
            # named by its forget row, so an export and re-import gives the same id (the R rows drop out)
            fields = {"id": f"{perturbed}.{i:05d}", "entity_id": ent.id, **self.asked_as_paraphrase(row)}
            self.add(perturbed, j, ["probe"], row, **fields)
        for i in range(len(forget_rows)):
            ent = entities[i // self.per]
            if ent.role == "forget_probe" and i not in seen:
                raise PackError(
                    f"{self.data.where(forget, i)}: a row of P author {ent.id} has no row in {perturbed!r}; P "
                    "needs each such row's held-out phrasing",
                    requirement="R16",
                )

    def retain(self, retain: str, evaluation: str, forget: str, entities: list[Entity]) -> None:
        """The retain split: ``evaluation``'s rows, each tied to its retain author where its question is one."""
        matched = match_rows(
            [r.question for r in self.data.rows(retain)], [r.question for r in self.data.rows(evaluation)]
        )
        forgotten = {question_key(r.question) for r in self.data.rows(forget)}
        unmatched = 0
        for j, (row, i) in enumerate(zip(self.data.rows(evaluation), matched, strict=True)):
            if i is None and question_key(row.question) in forgotten:
                raise PackError(
                    f"{self.data.where(evaluation, j)}: asks a question of {forget!r}; the retain split would "
                    "score forgotten facts as utility",
                    requirement="R16",
                )
            unmatched += i is None
            entity = None if i is None else entities[i // self.per].id
            fields = self.asked_as_paraphrase(row) if row.paraphrased_question else {"phrasing": "probe"}
            if i is not None and not row.paraphrased_question:
                fields["phrasing"] = "install"  # the installed question itself
            self.add(evaluation, j, ["retain"], row, entity_id=entity, **fields)
        self.notes["retain_eval_rows_without_author"] = unmatched

    def controls(self, holdout: str, entities: list[Entity]) -> None:
        """Holdout rows as never-installed controls; a holdout question that was installed is refused (D4)."""
        install = set(self.splits.get("install", []))
        installed = {question_key(it.question) for it in self.items if it.id in install}
        for i, row in enumerate(self.data.rows(holdout)):
            if question_key(row.question) in installed:
                raise PackError(
                    f"{self.data.where(holdout, i)}: repeats an installed question; controls are never installed",
                    requirement="D4",
                )
            self.add(holdout, i, ["controls"], row, entity_id=entities[i // self.per].id, phrasing="probe")

    def general(self, names: Sequence[str]) -> None:
        for name in names:
            for i, row in enumerate(self.data.rows(name)):
                self.add(name, i, ["general"], row, kind="general", phrasing="probe")


def tofu_to_pack(
    folder: str | Path,
    forget: str = "forget10",
    retain: str = "retain90",
    holdout: str | None = "holdout10",
    *,
    forget_perturbed: str | None = None,
    retain_eval: str | None = "retain_perturbed",
    general: Sequence[str] = GENERAL_SPLITS,
    rows_per_entity: int = TOFU_ROWS_PER_AUTHOR,
    relearn_fraction: float = 0.5,
    pack_class: PackClass = "C",
    pack_id: str | None = None,
    max_rows: int = MAX_ROWS,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> Pack:
    """The TOFU folder ``folder`` as a sealed target pack (module docstring), its manifest recording the source files'
    sha256, the split choice and the mapping. ``forget_perturbed`` defaults to ``<forget>_perturbed``; ``holdout``,
    ``retain_eval`` None and ``general`` empty leave those pack splits empty. Class C by default: Class D's battery
    needs minted canaries' linked attributes (D3), which TOFU rows do not carry."""
    perturbed = forget_perturbed or f"{forget}_perturbed"
    if rows_per_entity < 1:
        raise PackError(
            f"rows_per_entity is {rows_per_entity}; an author has at least one row", requirement="C-W6"
        )
    named = [forget, perturbed, retain, retain_eval, holdout, *general]
    check_distinct(named, str(folder))
    data = read_tofu(
        folder, [n for n in named if n is not None], max_rows=max_rows, max_line_bytes=max_line_bytes
    )
    build = _Builder(data, rows_per_entity)
    authors = -(-len(data.rows(forget)) // rows_per_entity)
    n_relearn = relearn_count(authors, relearn_fraction)
    forget_roles = ["forget_relearn"] * n_relearn + ["forget_probe"] * (authors - n_relearn)
    retained = build.authors(retain, "r", ["retain"])
    forgotten = build.authors(forget, "f", forget_roles or ["forget_probe"])
    build.install(retain, retained, removal=False)
    build.install(forget, forgotten, removal=True)
    build.probe(forget, perturbed, forgotten)
    if retain_eval is not None:
        build.retain(retain, retain_eval, forget, retained)
    if holdout is not None:
        build.controls(holdout, build.authors(holdout, "h", ["control"]))
    build.general(general)
    design: dict[str, object] = {
        "source": data.provenance(),
        "import": {
            "format": "tofu",
            "forget": forget,
            "forget_perturbed": perturbed,
            "retain": retain,
            "retain_eval": retain_eval,
            "holdout": holdout,
            "general": list(general),
            "rows_per_entity": rows_per_entity,
            "relearn_fraction": relearn_fraction,
            **build.notes,
        },
        "entities": f"each run of {rows_per_entity} consecutive rows of a split is one author",
    }
    return assemble(
        pack_id=pack_id or f"tofu-{forget}-{retain}",
        pack_class=pack_class,
        items=build.items,
        splits=build.splits,
        entities=build.entities,
        design=design,
    )


__all__ = ["GENERAL_SPLITS", "TOFU_ROWS_PER_AUTHOR", "tofu_to_pack"]
