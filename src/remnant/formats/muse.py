"""MUSE-format folders (``muse-bench/MUSE-News``, ``MUSE-Books``): typed rows, provenance (R2).

One sub-folder per Hub config and, in it, one file (or shard set, or folder) per split, in any layout
:mod:`remnant.formats.files` accepts, so a Hub snapshot is read as it is. The configs, their splits and fields are
:data:`MUSE_LAYOUT` (docs/formats.md, "MUSE configs and fields"). Rows are strict like TOFU's: every field
required and non-empty, nothing else but an ``index`` column (dropped). The ``_icl`` splits are knowmem's few-shot
demonstrations."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

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
)

Text = Annotated[str, Field(min_length=1)]


class VerbmemRow(BaseModel):
    """A verbatim-memorisation row: a passage's opening and its true continuation."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    prompt: Text = Field(description="The passage's opening, given to the model.")
    gt: Text = Field(description="The passage's true continuation (ROUGE reference).")


class KnowmemRow(BaseModel):
    """A knowledge-memorisation question about the corpus, with its answer."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    question: Text = Field(description="The question.")
    answer: Text = Field(description="The answer.")


class TextRow(BaseModel):
    """A raw document (privleak membership sets, raw corpora)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    text: Text = Field(description="The document text.")


_FORGET_N = tuple(f"forget_{i}" for i in range(1, 5))
#: config -> (row model, its splits)
MUSE_LAYOUT: dict[str, tuple[type[BaseModel], tuple[str, ...]]] = {
    "verbmem": (VerbmemRow, ("forget",)),
    "knowmem": (KnowmemRow, ("forget_qa", "retain_qa", "forget_qa_icl", "retain_qa_icl")),
    "privleak": (TextRow, ("forget", "retain", "holdout")),
    "raw": (TextRow, ("forget", "retain1", "retain2", "holdout")),
    "scal": (TextRow, _FORGET_N),
    "sust": (TextRow, _FORGET_N),
}


@dataclass(frozen=True)
class MuseFolder:
    """The parts read from one MUSE folder, keyed ``"config/split"``, with where each came from."""

    root: Path
    parts: Mapping[str, tuple[Any, ...]]
    sources: Mapping[str, SplitSource]

    def rows(self, config: str, split: str) -> tuple[Any, ...]:
        """The rows of ``config/split``; ConfigError naming the folder when it was not read."""
        key = f"{config}/{split}"
        if key not in self.parts:
            raise ConfigError(
                f"{self.root}: {key} was not read (read: {', '.join(self.parts) or 'none'})",
                requirement=REQUIREMENT,
            )
        return self.parts[key]

    def has(self, config: str, split: str) -> bool:
        return f"{config}/{split}" in self.parts

    def where(self, config: str, split: str, index: int) -> str:
        return self.sources[f"{config}/{split}"].where(index)

    def provenance(self) -> dict[str, object]:
        """JSON provenance: per part, layout, row count and each file's relative path, sha256 and rows."""
        return {"format": "muse", "splits": {key: self.sources[key].to_json() for key in self.parts}}


def present_parts(folder: str | Path) -> list[tuple[str, str]]:
    """The ``(config, split)`` pairs of :data:`MUSE_LAYOUT` that ``folder`` holds in some layout."""
    root = check_folder(folder)
    return [
        (config, split)
        for config, (_, splits) in MUSE_LAYOUT.items()
        for split in splits
        if candidates(root / config, split)
    ]


def read_muse(
    folder: str | Path,
    parts: Iterable[tuple[str, str]] | None = None,
    *,
    max_rows: int = MAX_ROWS,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> MuseFolder:
    """Read ``parts`` (``(config, split)`` pairs; default every known part present) of a MUSE folder. A config outside
    :data:`MUSE_LAYOUT` is refused; a split it does not list is read with the config's row model (MUSE revisions
    renamed splits, e.g. ``retain2_qa``). Errors as :func:`remnant.formats.read_tofu`."""
    root = check_folder(folder)
    wanted = present_parts(root) if parts is None else list(parts)
    if not wanted:
        raise ConfigError(
            f"{root}: holds no MUSE part (looked for {', '.join(MUSE_LAYOUT)} folders with their splits)",
            requirement=REQUIREMENT,
        )
    rows: dict[str, tuple[Any, ...]] = {}
    sources: dict[str, SplitSource] = {}
    for config, split in dict.fromkeys(wanted):
        if config not in MUSE_LAYOUT:
            raise ConfigError(
                f"{root}: {config[:80]!r} is not a MUSE config ({', '.join(MUSE_LAYOUT)})",
                requirement=REQUIREMENT,
            )
        check_name(split, "split")
        model = MUSE_LAYOUT[config][0]
        key = f"{config}/{split}"
        rows[key], sources[key] = read_split(
            root, root / config, split, model, max_rows=max_rows, max_line_bytes=max_line_bytes
        )
    return MuseFolder(root, rows, sources)


__all__ = [
    "MUSE_LAYOUT",
    "KnowmemRow",
    "MuseFolder",
    "TextRow",
    "VerbmemRow",
    "present_parts",
    "read_muse",
]
