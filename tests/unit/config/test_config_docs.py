"""Every config field carries a rule id in its description and is documented in docs/config.md."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from remnant.config import AssessmentConfig
from remnant.config.loading import _field_rule

DOC = (Path(__file__).resolve().parents[3] / "docs" / "config.md").read_text(encoding="utf-8")


def _fields(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for name, info in model.model_fields.items():
        loc = (*prefix, info.alias or name)
        out.append(loc)
        args = getattr(info.annotation, "__args__", (info.annotation,))
        for sub in args:
            if isinstance(sub, type) and issubclass(sub, BaseModel):
                out += _fields(sub, loc)
    return out


FIELDS = _fields(AssessmentConfig)


def test_every_field_names_its_rule() -> None:
    assert len(FIELDS) > 60
    missing = [".".join(loc) for loc in FIELDS if not _field_rule(loc)]
    assert missing == []


def test_every_field_is_documented() -> None:
    undocumented = [
        ".".join(loc)
        for loc in FIELDS
        if not any(f"`{form}`" in DOC for form in (".".join(loc), f"[{'.'.join(loc)}]", loc[-1]))
    ]
    assert undocumented == []
