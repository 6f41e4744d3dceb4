"""Reading a config: TOML to :class:`AssessmentConfig`, every problem one ConfigError naming file, field and rule.

The rule a message cites is the one a validator names, else the one at the end of the deepest field
description along the error's location (docs/config.md). ``trust_remote_code`` is refused anywhere (R2, R23).
Before the models see the values, every number is checked where it sits, free-form parameter tables included
(:mod:`remnant.config.numbers`). A file that cannot be read as TOML is refused under R14: it is what
pre-registration would freeze.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from remnant.config.assessment import AssessmentConfig
from remnant.config.attacks import Attack, Attacks
from remnant.config.fields import RuleViolation
from remnant.config.numbers import number_problem
from remnant.errors import ConfigError
from remnant.jsonio import read_toml

_RULE_AT_END = re.compile(r"\(([^()]*)\)\.?$")


def _field_rule(loc: tuple[str | int, ...]) -> str | None:
    """The requirement id at the end of the description of the field at ``loc`` (deepest one that has one)."""
    model: type[BaseModel] | None = AssessmentConfig
    rule: str | None = None
    for part in loc:
        if model is None or not isinstance(part, str):
            continue
        fields = {(f.alias or n): f for n, f in model.model_fields.items()}
        info = fields.get(part)
        if info is None:
            if model is Attacks:  # an open attack table: an Attack
                model, rule = Attack, "R14"
            continue
        match = _RULE_AT_END.search(info.description or "")
        if match:
            rule = match.group(1).split(",")[0].split(";")[0].strip()
        annotation = info.annotation
        model = next(
            (
                a
                for a in getattr(annotation, "__args__", (annotation,))
                if isinstance(a, type) and issubclass(a, BaseModel)
            ),
            None,
        )
    return rule


def _dotted(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _describe(error: Any) -> tuple[str, str | None]:
    """One pydantic error as ``field '…' problem (rule)`` and its rule id."""
    ctx_error = (error.get("ctx") or {}).get("error")
    if isinstance(ctx_error, RuleViolation):
        return str(ctx_error), ctx_error.rule
    loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    # a key no field describes (an unknown top-level key) is still part of what pre-registration freezes
    field, rule = _dotted(loc) or "(top level)", _field_rule(loc) or "R14"
    kind = error["type"]
    if kind == "missing":
        problem = "missing"
    elif kind == "extra_forbidden":
        problem = "is not a known field"
    elif kind == "string_too_short":
        problem = "must not be empty"
    else:
        problem = "invalid: " + str(error["msg"]).removeprefix("Value error, ")
    stated = _RULE_AT_END.search(problem)
    if stated:  # a validator named the rule itself: it is more precise than the field's
        return f"field '{field}' {problem}", stated.group(1)
    suffix = f" ({rule})" if rule else ""
    return f"field '{field}' {problem}{suffix}", rule


def _find_remote_code(value: object, where: str) -> str | None:
    """Dotted location of any ``trust_remote_code`` key or string value (refused: R2, R23), or None."""
    if isinstance(value, dict):
        for key, sub in value.items():
            here = f"{where}.{key}" if where else str(key)
            if "trust_remote_code" in str(key).lower():
                return here
            found = _find_remote_code(sub, here)
            if found:
                return found
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            found = _find_remote_code(sub, f"{where}[{i}]")
            if found:
                return found
    elif isinstance(value, str) and "trust_remote_code" in value.lower():
        return where or "(top level)"
    return None


def parse_config(
    raw: dict[str, Any], *, source: str = "<config>", base_dir: Path | None = None
) -> AssessmentConfig:
    """Validate an already-parsed config mapping; ConfigError names ``source``, the field and the rule."""
    remote = _find_remote_code(raw, "")
    if remote is not None:
        raise ConfigError(
            f"{source}: 'trust_remote_code' at '{remote}' is refused: remnant never runs code shipped with a model"
        )
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: a config is a TOML table of fields", requirement="R14")
    bad = number_problem(raw)
    if bad is not None:
        loc, problem = bad
        cited = _field_rule(loc) or "R14"
        raise ConfigError(f"{source}: field '{_dotted(loc)}' {problem} ({cited})", requirement=cited)
    try:
        cfg = AssessmentConfig.model_validate(raw)
    except ValidationError as exc:
        described = [_describe(e) for e in exc.errors()]
        lines = [text for text, _ in described]
        rule = described[0][1]
        if len(lines) == 1:
            raise ConfigError(f"{source}: {lines[0]}", requirement=rule) from None
        body = "\n".join(f"  {line}" for line in lines)
        raise ConfigError(f"{source}: {len(lines)} problems:\n{body}", requirement=rule) from None
    cfg._base_dir = base_dir if base_dir is not None else Path.cwd()
    cfg._source = None if source == "<config>" else Path(source)
    return cfg


def load_config(path: str | Path) -> AssessmentConfig:
    """Read and validate an assessment config TOML file; ConfigError names file, field and requirement."""
    file = Path(path)
    raw = read_toml(file, requirement="R14")
    return parse_config(raw, source=str(file), base_dir=file.resolve().parent)
