"""A MUSE folder as a target pack: MUSE's parts mapped onto the pack's splits (docs/formats.md, "Import: a MUSE
folder as a target pack"; R2, R16, C-W6): verbmem passages are installed and removed, knowmem's forget questions
are P (none of them a verbmem opening: R16).

knowmem's few-shot demonstrations go into the design under ``icl``, so a pack carries the prompt MUSE scores
knowmem with. ``privleak`` and ``raw`` hold documents without a prompt: not pack items. MUSE rows name no entity:
R and P are disjoint as items and as questions, which C-W6 requires; its "SHOULD" of an entity-level split cannot
be met, and the design says so."""

from __future__ import annotations

from pathlib import Path

from remnant.formats.build import PackClass, assemble, make_item, relearn_count
from remnant.formats.files import MAX_LINE_BYTES, MAX_ROWS
from remnant.formats.muse import MuseFolder, present_parts, read_muse
from remnant.packs.schema import Item, Pack

_REQUIRED = (("verbmem", "forget"), ("knowmem", "forget_qa"))
_OPTIONAL = (("knowmem", "retain_qa"), ("knowmem", "forget_qa_icl"), ("knowmem", "retain_qa_icl"))


def _qa_items(data: MuseFolder, config: str, split: str, pack_split: str, **fields: object) -> list[Item]:
    out = []
    for i, row in enumerate(data.rows(config, split)):
        question, answer = (row.prompt, row.gt) if config == "verbmem" else (row.question, row.answer)
        out.append(
            make_item(
                data.where(config, split, i),
                id=f"{config}.{split}.{i:05d}",
                kind="fact",
                attribute=config,
                question=question,
                answer=answer,
                accepted=[answer],
                template_id=f"muse.{config}.{split}",
                split=pack_split,
                **fields,
            )
        )
    return out


def muse_to_pack(
    folder: str | Path,
    *,
    relearn_fraction: float = 0.5,
    pack_class: PackClass = "C",
    pack_id: str | None = None,
    max_rows: int = MAX_ROWS,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> Pack:
    """The MUSE folder ``folder`` as a sealed target pack (module docstring). ``verbmem/forget`` and
    ``knowmem/forget_qa`` are required; ``knowmem``'s retain and few-shot splits are used when present."""
    present = set(present_parts(folder))
    wanted = [*_REQUIRED, *(p for p in _OPTIONAL if p in present)]
    data = read_muse(folder, wanted, max_rows=max_rows, max_line_bytes=max_line_bytes)
    install = _qa_items(data, "verbmem", "forget", "install", phrasing="install")
    probe = _qa_items(data, "knowmem", "forget_qa", "probe", phrasing="probe")
    retain = (
        _qa_items(data, "knowmem", "retain_qa", "retain", phrasing="probe")
        if data.has("knowmem", "retain_qa")
        else []
    )
    n_relearn = relearn_count(len(install), relearn_fraction)
    splits = {
        "install": [it.id for it in install],
        "removal": [it.id for it in install],
        "relearn": [it.id for it in install[:n_relearn]],
        "probe": [it.id for it in probe],
        "retain": [it.id for it in retain],
    }
    icl = {
        split: [{"question": r.question, "answer": r.answer} for r in data.rows("knowmem", split)]
        for split in ("forget_qa_icl", "retain_qa_icl")
        if data.has("knowmem", split)
    }
    design: dict[str, object] = {
        "source": data.provenance(),
        "import": {"format": "muse", "relearn_fraction": relearn_fraction},
        "entities": (
            "MUSE rows name no entity: R (verbmem passages) and P (knowmem questions) are disjoint as items and "
            "questions (C-W6), not shown disjoint in content"
        ),
        "icl": icl,
    }
    return assemble(
        pack_id=pack_id or "muse",
        pack_class=pack_class,
        items=[*install, *probe, *retain],
        splits=splits,
        entities=[],
        design=design,
    )


__all__ = ["muse_to_pack"]
