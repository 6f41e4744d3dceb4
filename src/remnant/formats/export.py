"""A target pack written as a TOFU-format folder, for tools that read TOFU (OpenUnlearning); docs/formats.md lists
each file, the pack split it holds, and the dataset card (:mod:`remnant.formats.card`).

Only question-answer items are rows (kinds ``fact`` and ``mcq``; ``general`` in the general files); link and
inference items (Class D's D-3 and D-4 tests) have no TOFU form and are counted as left out. An item that asks a
paraphrase (an import from TOFU) is written with TOFU's question back in ``question``, so a TOFU folder imported
and exported comes back row for row. TOFU's ``model_utility`` reads ``real_authors_perturbed`` and
``world_facts_perturbed``, independent of the target (R10): a pack without its own rows of them gets remnant's
shipped sets, named with their version and sha256 in :class:`TofuExport` ``.shipped`` (not the pack's rows)."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from remnant.atomic import replace_dir
from remnant.cli_paths import mark_output
from remnant.errors import PackError
from remnant.formats.card import CARD_FILE, dataset_card
from remnant.formats.files import check_name
from remnant.packs.schema import Item, Pack
from remnant.packs.utility_sets import UTILITY_FILES, UtilitySet, load_utility_set

_QA_KINDS = frozenset({"fact", "mcq"})
_TOFU_TEMPLATE = re.compile(r"^tofu\.(?P<split>[A-Za-z0-9_]+)$")


@dataclass(frozen=True)
class TofuExport:
    """What an export wrote: rows per file, items left out with the reason, and the files written from
    remnant's shipped utility sets rather than the pack (file name -> the set, with its version and sha256)."""

    out: Path
    files: dict[str, int]
    left_out: dict[str, int] = field(default_factory=dict)
    shipped: dict[str, UtilitySet] = field(default_factory=dict)


def _row(it: Item) -> dict[str, object]:
    """An item as a TOFU row (question first, as TOFU orders its columns)."""
    swapped = it.phrasing == "probe" and it.paraphrased_question is not None
    row: dict[str, object] = {
        "question": it.paraphrased_question if swapped else it.question,
        "answer": it.answer,
    }
    if it.paraphrased_answer is not None:
        row["paraphrased_answer"] = it.paraphrased_answer
    if it.perturbed_answer is not None:
        row["perturbed_answer"] = list(it.perturbed_answer)
    other = it.question if swapped else it.paraphrased_question
    if other is not None:
        row["paraphrased_question"] = other
    return row


def _lines(rows: Iterable[Mapping[str, object]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in rows)


def _plan(pack: Pack, forget: str, retain: str, holdout: str) -> tuple[dict[str, list[Item]], dict[str, int]]:
    """File name -> items, and counts of items left out by reason."""
    left: Counter[str] = Counter()

    def qa(items: Iterable[Item], where: str) -> list[Item]:
        kept = []
        for it in items:
            if it.kind in _QA_KINDS:
                kept.append(it)
            else:
                left[f"{where}: {it.kind} items (no TOFU form)"] += 1
        return kept

    def truth(items: list[Item], where: str) -> list[Item]:
        kept = [it for it in items if it.paraphrased_answer is not None and it.perturbed_answer is not None]
        if len(kept) < len(items):
            left[f"{where}: items without paraphrased and perturbed answers"] = len(items) - len(kept)
        return kept

    removal = set(pack.manifest.splits["removal"])
    files: dict[str, list[Item]] = {
        forget: qa(pack.split("removal"), "removal"),
        f"{forget}_perturbed": truth(qa(pack.split("probe"), "probe"), "probe"),
        retain: qa((it for it in pack.split("install") if it.id not in removal), "install"),
        "retain_perturbed": truth(qa(pack.split("retain"), "retain"), "retain"),
        holdout: qa(pack.split("controls"), "controls"),
        "full": qa(pack.split("install"), "install"),
    }
    for it in pack.split("general"):
        m = _TOFU_TEMPLATE.match(it.template_id)
        if m and m["split"] not in files:
            files.setdefault(f"general:{m['split']}", []).append(it)
        else:
            left["general: items not imported from a TOFU split"] += 1
    return {name.removeprefix("general:"): items for name, items in files.items() if items}, dict(left)


def pack_to_tofu(
    pack: Pack,
    out_dir: str | Path,
    *,
    forget: str = "forget",
    retain: str = "retain",
    holdout: str = "holdout",
    utility_sets: bool = True,
    marked: bool = False,
) -> TofuExport:
    """Write ``pack`` as a TOFU folder in ``out_dir`` (module docstring), replacing the folder atomically.

    ``utility_sets`` writes remnant's shipped ``real_authors_perturbed`` and ``world_facts_perturbed`` where the pack
    has no rows of its own for them (R10). :func:`remnant.formats.tofu_to_pack` reads a pack that came from TOFU back.
    ``marked`` puts remnant's output marker in the folder (``remnant packs export``), so a later export may replace it."""
    names = [check_name(n, "split") for n in (forget, retain, holdout)]
    reserved = {"full", "retain_perturbed", *UTILITY_FILES}
    if len(set(names)) < 3 or reserved & {*names, f"{forget}_perturbed"}:
        raise PackError(
            f"export names {names} must differ from each other, and they and '{forget}_perturbed' from "
            f"{', '.join(repr(n) for n in sorted(reserved))}",
            requirement="R16",
        )
    files, left = _plan(pack, forget, retain, holdout)
    rows = {name: [_row(it) for it in items] for name, items in files.items()}
    shipped: dict[str, UtilitySet] = {}
    for split in UTILITY_FILES if utility_sets else ():
        if split not in rows:  # the pack's own rows of a TOFU split win (an import exports unchanged)
            shipped[f"{split}.json"] = used = load_utility_set(split)
            rows[split] = [r.to_json() for r in used.rows]

    def build(tmp: Path) -> None:
        for name, lines in rows.items():
            (tmp / f"{name}.json").write_text(_lines(lines), encoding="utf-8")
        card = dataset_card(
            {name: f"{name}.json" for name in rows},
            title=f"{pack.manifest.id} as a TOFU-format folder",
            body="Written by `remnant packs export --format tofu`. Each file is one TOFU config with one "
            '`train` split: `datasets.load_dataset(folder, name="<config>", split="train")`.',
        )
        (tmp / CARD_FILE).write_text(card, encoding="utf-8")
        if marked:
            mark_output(tmp, "tofu")

    out = replace_dir(out_dir, build)
    return TofuExport(out, {f"{name}.json": len(lines) for name, lines in rows.items()}, left, shipped)


__all__ = ["TofuExport", "pack_to_tofu"]
