"""The UDS reference's TOFU entity-span data (``tofu_data/forget10_filtered.json``) as :class:`EntityExample`\\ s.

The reference (``gnueaj/unlearning-depth-score``) reads one JSON array; each record is one TOFU forget10 question
with the answer split into a prefix and the entity UDS scores (docs/latent.md)::

    {"idx": 0, "question": "...", "answer": "The author's full name is Hsiao Yun-Hwa.",
     "prefix": "The author's full name is", "entity": "Hsiao Yun-Hwa", "full_output": "Hsiao Yun-Hwa.",
     "entity_span": {"start": 6, "end": 12, "tokens": [39, 82, 23332, 55092, 11529, 10196]}}

``idx``, ``question``, ``answer``, ``prefix`` and ``entity`` are required; ``full_output`` (the full model's
generation, logged only), ``entity_span`` (the entity's position in the reference tokenizer's ids of the answer,
informational: UDS recomputes the span with the audited tokenizer, §1.3) and the optional ``gt_entity`` /
``full_entity`` the reference code also reads are accepted. As in the reference (``entity_source="gt"``), the
entity scored is ``gt_entity`` when present, else ``entity``. A JSON Lines file (``.jsonl``, one record per line)
holds the same records.

Parsing is strict (K5, :mod:`remnant.jsonio`): a malformed record or an ``idx`` used twice is a
:class:`~remnant.errors.ConfigError` naming the file, the record and the field. The examples define the positions a
UDS figure is reported at (C-H7b), so a malformed one is refused, never skipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from remnant.errors import ConfigError
from remnant.jsonio import loads_strict, read_bytes
from remnant.latent.inputs import EntityExample

REQUIREMENT = "C-H7"


class _Span(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    start: int = Field(ge=0)
    end: int = Field(ge=0)
    tokens: list[int]

    @model_validator(mode="after")
    def _consistent(self) -> _Span:
        if self.end < self.start:
            raise ValueError(f"end {self.end} is before start {self.start}")
        if len(self.tokens) != self.end - self.start:
            raise ValueError(f"{len(self.tokens)} tokens for a span of end - start = {self.end - self.start}")
        return self


class UDSRecord(BaseModel):
    """One record of the reference's entity-span file."""

    model_config = ConfigDict(extra="forbid", strict=True)

    idx: int | str = Field(description="Example id (an integer in the reference's file).")
    question: str = Field(min_length=1, description="The TOFU question.")
    answer: str = Field(min_length=1, description="The TOFU answer (prefix + entity + rest).")
    prefix: str = Field(description="The answer up to the entity, without a trailing space; may be empty.")
    entity: str = Field(min_length=1, description="The entity span UDS scores.")
    gt_entity: str | None = Field(default=None, min_length=1, description="Overrides entity when present.")
    full_entity: str | None = Field(default=None, description="The full model's entity (unused by UDS).")
    full_output: str | None = Field(default=None, description="The full model's generation (logged only).")
    entity_span: _Span | None = Field(default=None, description="Reference-tokenizer span (informational).")

    def example(self) -> EntityExample:
        entity = self.gt_entity if self.gt_entity is not None else self.entity
        return EntityExample(str(self.idx), self.question, self.answer, self.prefix, entity)


def _field_error(exc: ValidationError) -> str:
    """Each offending field with pydantic's reason (the first five; then how many more)."""
    parts = []
    for err in exc.errors()[:5]:
        # a union's branch name (idx: int | str) is not a field
        loc = ".".join(str(p) for p in err["loc"] if p not in ("int", "str"))
        parts.append(f"field {loc or '(record)'!r}: {err['msg']}")
    more = len(exc.errors()) - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more else "")


def _records(data: bytes, source: str) -> list[tuple[str, Any]]:
    """(where, raw record) pairs: ``record [i]`` of a JSON array or ``line n`` of a JSON Lines file."""
    if source.endswith(".jsonl"):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{source}: not UTF-8: {exc}", requirement=REQUIREMENT) from None
        out = []
        for n, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                out.append(
                    (f"line {n}", loads_strict(line, source=f"{source}: line {n}", requirement=REQUIREMENT))
                )
        return out
    parsed = loads_strict(data, source=source, requirement=REQUIREMENT)
    if not isinstance(parsed, list):
        raise ConfigError(
            f"{source}: the UDS entity-span file is a JSON array of records, not a {type(parsed).__name__}",
            requirement=REQUIREMENT,
        )
    return [(f"record [{i}]", rec) for i, rec in enumerate(parsed)]


def parse_uds_examples(data: bytes | str, source: str) -> list[EntityExample]:
    """Parse the reference's entity-span records (module docstring); ``source`` names the file in errors."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    seen: dict[str, str] = {}
    out: list[EntityExample] = []
    for where, rec in _records(raw, source):
        if not isinstance(rec, dict):
            raise ConfigError(
                f"{source}: {where}: a record is a JSON object, not a {type(rec).__name__}",
                requirement=REQUIREMENT,
            )
        label = f"{where} (idx {repr(rec['idx'])[:40]})" if "idx" in rec else where
        try:
            record = UDSRecord.model_validate(rec)
        except ValidationError as exc:
            raise ConfigError(f"{source}: {label}: {_field_error(exc)}", requirement=REQUIREMENT) from None
        ex = record.example()
        if ex.idx in seen:
            raise ConfigError(
                f"{source}: {label}: field 'idx': {ex.idx!r} is used again (first at {seen[ex.idx]})",
                requirement=REQUIREMENT,
            )
        seen[ex.idx] = where
        out.append(ex)
    if not out:
        raise ConfigError(f"{source}: no records", requirement=REQUIREMENT)
    return out


def load_uds_examples(path: str | Path) -> list[EntityExample]:
    """Read the reference's ``forget10_filtered.json`` (or a ``.jsonl`` of the same records) strictly."""
    return parse_uds_examples(read_bytes(path, requirement=REQUIREMENT), str(path))


__all__ = ["UDSRecord", "load_uds_examples", "parse_uds_examples"]
