"""TOFU-format folders (``locuslab/TOFU``): typed rows of each split, with provenance (R2).

One file (or folder) per split, named as the Hub configs are (:data:`TOFU_SPLITS`), in any layout
:mod:`remnant.formats.files` accepts. Rows keep TOFU's field names, which the metrics read; what a split requires
follows from its name (:func:`required_fields`; docs/formats.md, "TOFU splits and fields"). Any other column is refused
except ``index`` (the row number OpenUnlearning adds: a whole number, dropped). Types are strict: a number is not a
question, a string is not a list of perturbed answers, and no text may be empty."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from remnant.errors import ConfigError
from remnant.formats.files import (
    MAX_LINE_BYTES,
    MAX_ROWS,
    REQUIREMENT,
    SplitSource,
    candidates,
    check_folder,
    check_name,
    read_split,
    require,
)

#: The configs of ``locuslab/TOFU`` (one split each), in the Hub's order.
TOFU_SPLITS: tuple[str, ...] = (
    "full",
    "forget01",
    "forget05",
    "forget10",
    "retain90",
    "retain95",
    "retain99",
    "forget01_perturbed",
    "forget05_perturbed",
    "forget10_perturbed",
    "retain_perturbed",
    "holdout01",
    "holdout05",
    "holdout10",
    "real_authors",
    "real_authors_perturbed",
    "world_facts",
    "world_facts_perturbed",
)
#: Perturbed splits without paraphrases (3 wrong answers each; TOFU's model-utility sets).
OPTION_SPLITS: frozenset[str] = frozenset({"real_authors_perturbed", "world_facts_perturbed"})

Text = Annotated[str, Field(min_length=1)]


class TofuRow(BaseModel):
    """One TOFU row. Optional fields are None where the split does not carry them."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    question: Text = Field(description="The question.")
    answer: Text = Field(description="The true answer (the training target).")
    paraphrased_answer: Text | None = Field(default=None, description="The true answer in other words.")
    perturbed_answer: list[Text] | None = Field(
        default=None, min_length=1, description="Wrong answers in the paraphrased answer's template."
    )
    paraphrased_question: Text | None = Field(default=None, description="The question in other words.")

    def to_json(self) -> dict[str, object]:
        """The row as TOFU writes it: fields it does not carry left out."""
        return self.model_dump(mode="json", exclude_none=True)


def required_fields(name: str) -> tuple[str, ...]:
    """What a split of this name must carry beyond ``question`` and ``answer`` (docs/formats.md, "TOFU splits and
    fields")."""
    if name in OPTION_SPLITS:
        return ("perturbed_answer",)
    return ("paraphrased_answer", "perturbed_answer") if name.endswith("_perturbed") else ()


@dataclass(frozen=True)
class TofuFolder:
    """The splits read from one TOFU folder: rows per split, and where each came from (files, sha256, rows)."""

    root: Path
    splits: Mapping[str, tuple[TofuRow, ...]]
    sources: Mapping[str, SplitSource]

    def rows(self, split: str) -> tuple[TofuRow, ...]:
        """The rows of ``split``; ConfigError naming the folder when it was not read."""
        if split not in self.splits:
            raise ConfigError(
                f"{self.root}: split {split!r} was not read (read: {', '.join(self.splits) or 'none'})",
                requirement=REQUIREMENT,
            )
        return self.splits[split]

    def where(self, split: str, index: int) -> str:
        """File and row of ``split``'s ``index``-th row, for messages."""
        return self.sources[split].where(index)

    def provenance(self) -> dict[str, object]:
        """JSON provenance: per split, layout, row count and each file's path (relative to the folder, so the record and a
        pack's digest do not depend on where it sits), sha256 and rows."""
        return {
            "format": "tofu",
            "splits": {name: self.sources[name].to_json() for name in self.splits},
        }


def present_splits(folder: str | Path) -> list[str]:
    """The TOFU split names (:data:`TOFU_SPLITS`) that ``folder`` holds in some layout."""
    root = check_folder(folder)
    return [name for name in TOFU_SPLITS if candidates(root, name)]


def read_tofu(
    folder: str | Path,
    splits: Iterable[str] | None = None,
    *,
    max_rows: int = MAX_ROWS,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> TofuFolder:
    """Read ``splits`` of a TOFU folder (default: every TOFU split it holds); ConfigError naming file, line
    and field on any malformed row, a split that is missing, or a folder in place of a split file (R2)."""
    root = check_folder(folder)
    names = present_splits(root) if splits is None else [check_name(s, "split") for s in splits]
    if not names:
        raise ConfigError(
            f"{root}: holds no TOFU split (looked for {', '.join(TOFU_SPLITS[:4])}, … as .json, .jsonl, "
            ".parquet or a folder)",
            requirement=REQUIREMENT,
        )
    rows: dict[str, tuple[TofuRow, ...]] = {}
    sources: dict[str, SplitSource] = {}
    for name in dict.fromkeys(names):
        check = partial(require, fields=required_fields(name), split=name)
        rows[name], sources[name] = read_split(
            root, root, name, TofuRow, check=check, max_rows=max_rows, max_line_bytes=max_line_bytes
        )
    return TofuFolder(root, rows, sources)


__all__ = [
    "OPTION_SPLITS",
    "TOFU_SPLITS",
    "TofuFolder",
    "TofuRow",
    "present_splits",
    "read_tofu",
    "required_fields",
]
