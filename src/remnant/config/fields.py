"""Shared field types, the strict base model and the cross-field error every config section uses (R23, R14).

The ``MAX_*`` bounds below hold every count, size and rate a config declares to a range a run can honour: past
them a value is a typo or an attempt on the run's time (10**15 entities, 10**12 shots), never a plan, and it is
refused when the config is read, before anything is minted, estimated or frozen (R14).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Name = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$")]
Params = dict[str, Any]
Unit = Annotated[float, Field(ge=0.0, le=1.0)]

#: Largest master seed: seeds travel through canonical JSON, which holds integers up to 2**53 (RFC 8785, I-JSON).
MAX_SEED = 2**53 - 1
#: Largest magnitude of any integer anywhere in a config that is not a seed, free-form parameters included.
MAX_INT = 10**9
#: Largest evaluation-set size (``min_n``, ``probe.max_n``) and relearning budget (R21, C-W1).
MAX_N = 10**6
#: Largest epoch ceiling of a training stage (installation, relearning; R2, C-W1).
MAX_EPOCHS = 1_000
#: Largest number of examples per optimiser step.
MAX_BATCH = 4_096
#: Largest learning rate: fine-tuning a language model above 1 only diverges.
MAX_LR = 1.0
#: Largest generation length, in tokens.
MAX_TOKENS = 8_192
#: Most entries in a list of budgets or checkpoints: each one is a training run or a scoring pass.
MAX_LIST = 64
#: Smallest τ or Class D bar: R21's bound at zero recoveries then needs about 38,000 items, already past any
#: pack remnant mints; a smaller one (1e-300) asks for more items than can exist, and no plan can size it.
MIN_THRESHOLD = 1e-4
#: The torch devices a config field or a ``--device`` option may name (R24); :mod:`remnant.models.device` then
#: checks that this machine has the one named.
DEVICE_PATTERN = r"^(auto|cpu|mps|cuda(:\d+)?)$"


class RuleViolation(ValueError):
    """A cross-field rule a model validator enforces; carries the dotted field and requirement id into the
    :class:`~remnant.errors.ConfigError` the loader raises."""

    def __init__(self, field: str, message: str, rule: str) -> None:
        super().__init__(f"field '{field}' {message} ({rule})")
        self.field, self.message, self.rule = field, message, rule


class ConfigModel(BaseModel):
    # strict: extra keys are refused, a quoted number in the TOML is a mistake to report, not a value to coerce;
    # nan and inf (TOML allows them) never a rate.
    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, strict=True, allow_inf_nan=False
    )


def require_one_of(
    model: BaseModel, where: str, first: str, second: str, rule: str, *, also: tuple[str, ...] = ()
) -> None:
    """RuleViolation at ``where`` unless exactly one of the fields ``first``, ``second`` (and ``also``) is set."""
    names = (first, second, *also)
    if sum(getattr(model, name) is not None for name in names) != 1:
        listed = ", ".join(f"'{name}'" for name in names[:-1])
        raise RuleViolation(where, f"must name exactly one of {listed} or '{names[-1]}'", rule)


def patterns_problem(value: object) -> str | None:
    """Why ``value`` is not a list of regular expressions over parameter names (a ``trainable`` selection, R23),
    or None. A pattern that does not compile is refused where it is declared, not when training reaches it."""
    if not isinstance(value, list | tuple) or not all(isinstance(p, str) for p in value):
        return "must be a list of regular expressions over parameter names"
    for pattern in value:
        try:
            re.compile(pattern)
        except re.error as exc:
            # no parenthesis at the end: the config loader reads a trailing "(...)" as the requirement id
            return f"holds {pattern!r}, which is not a regular expression: {exc}"
    return None


def compiled_patterns(value: list[str]) -> list[str]:
    """``value`` when :func:`patterns_problem` finds nothing wrong with it; ValueError saying what otherwise."""
    problem = patterns_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


#: A ``trainable`` selection: parameter-name regular expressions, each of which compiles.
Patterns = Annotated[list[str], AfterValidator(compiled_patterns)]
