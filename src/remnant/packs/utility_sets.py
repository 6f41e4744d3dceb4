"""Shipped general-utility sets in the form of TOFU's model-utility splits (R10; docs/formats.md).

TOFU's ``model_utility`` reads ``real_authors_perturbed`` and ``world_facts_perturbed``: questions about
well-known authors and world facts, each with its true answer and three wrong options of the same type. A
minted pack's general questions carry no wrong options, so remnant ships its own, written by hand in TOFU's
style (:data:`UTILITY_FILES`). They are independent of any target, so the same bytes serve every pack; an
export records each file's name, version and sha256 (:class:`UtilitySet`). A file is read strictly: exactly
three wrong options (the normalised probability ``c / (c + sum w)`` depends on how many there are), distinct
from each other and from the answer, and no question twice (compared case- and space-insensitively).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from remnant.errors import PackError
from remnant.jsonio import loads_strict
from remnant.packs.schema import describe_validation

REQUIREMENT = "R10"
#: TOFU split name -> the shipped data file it is written from, in TOFU's order.
UTILITY_FILES: dict[str, str] = {
    "real_authors_perturbed": "real_authors.json",
    "world_facts_perturbed": "world_facts.json",
}
#: Wrong options per row (TOFU's sets have three).
OPTIONS = 3

Text = Annotated[str, Field(min_length=1)]


class UtilityRow(BaseModel):
    """One row: a question, its true answer and three wrong options (TOFU's option-split columns)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    question: Text
    answer: Text
    perturbed_answer: list[Text] = Field(min_length=OPTIONS, max_length=OPTIONS)

    def to_json(self) -> dict[str, object]:
        """The row as a TOFU ``*_perturbed`` option split writes it."""
        return self.model_dump()


class _UtilityFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    source: Text
    version: int = Field(ge=1)
    items: list[UtilityRow] = Field(min_length=1)


@dataclass(frozen=True)
class UtilitySet:
    """One shipped set as read: the TOFU split it stands for, its provenance and its rows."""

    split: str
    file: str
    version: int
    sha256: str
    source: str
    rows: tuple[UtilityRow, ...]

    def provenance(self) -> dict[str, object]:
        """File name, version, sha256 of the file bytes and row count (what an export records)."""
        return {"file": self.file, "version": self.version, "sha256": self.sha256, "rows": len(self.rows)}


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


def _check_rows(where: str, rows: list[UtilityRow]) -> None:
    """Wrong options distinct and not the answer; each question once (module docstring)."""
    first: dict[str, int] = {}
    for i, row in enumerate(rows):
        options = [_key(o) for o in row.perturbed_answer]
        if _key(row.answer) in options:
            raise PackError(
                f"{where}: field 'items.{i}.perturbed_answer': holds the answer {row.answer!r}; every option "
                "must be wrong",
                requirement=REQUIREMENT,
            )
        if len(set(options)) < len(options):
            raise PackError(
                f"{where}: field 'items.{i}.perturbed_answer': repeats an option {row.perturbed_answer}",
                requirement=REQUIREMENT,
            )
        q = _key(row.question)
        if q in first:
            raise PackError(
                f"{where}: field 'items.{i}.question': repeats items.{first[q]}'s question {row.question!r}",
                requirement=REQUIREMENT,
            )
        first[q] = i


def load_utility_set(split: str, path: str | Path | None = None) -> UtilitySet:
    """The shipped set for TOFU split ``split`` (:data:`UTILITY_FILES`), or the file at ``path`` in its place;
    PackError naming the file, the field and R10 when it is malformed."""
    if split not in UTILITY_FILES:
        raise PackError(
            f"no shipped utility set for split {split!r} (have {', '.join(UTILITY_FILES)})",
            requirement=REQUIREMENT,
        )
    if path is None:
        where = f"remnant/packs/data/{UTILITY_FILES[split]}"
        data = resources.files("remnant.packs").joinpath(f"data/{UTILITY_FILES[split]}").read_bytes()
    else:
        where = str(path)
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise PackError(f"{where}: cannot read: {exc.strerror or exc}", requirement=REQUIREMENT) from None
    parsed = loads_strict(data, source=where, requirement=REQUIREMENT, error=PackError)
    try:
        body = _UtilityFile.model_validate(parsed)
    except ValidationError as exc:
        raise PackError(f"{where}: {describe_validation(exc)}", requirement=REQUIREMENT) from None
    _check_rows(where, body.items)
    return UtilitySet(
        split=split,
        file=UTILITY_FILES[split] if path is None else Path(path).name,
        version=body.version,
        sha256=hashlib.sha256(data).hexdigest(),
        source=body.source,
        rows=tuple(body.items),
    )


def utility_sets() -> dict[str, UtilitySet]:
    """Every shipped set, by the TOFU split it is written as."""
    return {split: load_utility_set(split) for split in UTILITY_FILES}


__all__ = ["OPTIONS", "UTILITY_FILES", "UtilityRow", "UtilitySet", "load_utility_set", "utility_sets"]
