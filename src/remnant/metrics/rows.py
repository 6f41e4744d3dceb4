"""One evaluation row of a TOFU-format split (or of a MUSE split), as the metrics read it (docs/metrics.md).

The metric code reads plain lists of rows, so it does not depend on how a split was stored: :func:`as_row` accepts
anything with :class:`QARow`'s fields, as attributes or mapping keys (MUSE knowmem rows too). MUSE's verbmem and
privleak rows are completions, read by :func:`completion_of`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from remnant.errors import ConfigError

#: The fields a metric may read from a row, by name.
ANSWER_KEYS = ("answer", "paraphrased_answer", "perturbed_answer")
QUESTION_KEYS = ("question", "paraphrased_question")


@dataclass(frozen=True)
class QARow:
    """One question with its answers; optional fields are ``None`` where the split does not carry them."""

    question: str
    answer: str
    paraphrased_answer: str | None = None
    perturbed_answer: tuple[str, ...] | None = None
    paraphrased_question: str | None = None


def _field(source: object, name: str) -> object:
    if isinstance(source, Mapping):
        return source.get(name)
    return getattr(source, name, None)


def as_row(source: object, *, split: str, index: int) -> QARow:
    """``source`` (a QARow, a mapping, or an object with the fields) as a :class:`QARow`: a ``question`` or ``answer``
    that is not a string, or a ``perturbed_answer`` that is not a list of strings, is a ConfigError naming the split,
    the row and the field."""
    if isinstance(source, QARow):
        return source
    values: dict[str, Any] = {}
    for name in ("question", "answer", "paraphrased_answer", "paraphrased_question"):
        value = _field(source, name)
        if value is not None and not isinstance(value, str):
            raise ConfigError(
                f"split {split!r} row {index}: field {name!r} must be a string", requirement="R2"
            )
        values[name] = value
    for name in ("question", "answer"):
        if values[name] is None:
            raise ConfigError(f"split {split!r} row {index}: field {name!r} is missing", requirement="R2")
    perturbed = _field(source, "perturbed_answer")
    if perturbed is not None:
        if (
            isinstance(perturbed, str)
            or not isinstance(perturbed, Sequence)
            or not all(isinstance(p, str) for p in perturbed)
        ):
            raise ConfigError(
                f"split {split!r} row {index}: field 'perturbed_answer' must be a list of strings",
                requirement="R2",
            )
        perturbed = tuple(perturbed)
    return QARow(perturbed_answer=perturbed, **values)


def as_rows(sources: Sequence[object], *, split: str) -> list[QARow]:
    """Every row of a split as a :class:`QARow` (see :func:`as_row`)."""
    return [as_row(s, split=split, index=i) for i, s in enumerate(sources)]


def _read(row: QARow, key: str, keys: tuple[str, ...], kind: str, split: str, index: int) -> Any:
    """``row``'s field ``key``, one of ``keys`` (a ``kind`` key); ConfigError when it is not one, or absent."""
    if key not in keys:
        raise ConfigError(f"{kind} key {key!r} is not one of {list(keys)}", requirement="R2")
    value = getattr(row, key)
    if value is None:
        raise ConfigError(f"split {split!r} row {index}: field {key!r} is missing", requirement="R2")
    return value


def question_of(row: QARow, key: str, *, split: str, index: int) -> str:
    """The question a metric asks: ``row.question`` or ``row.paraphrased_question``; ConfigError when absent."""
    return str(_read(row, key, QUESTION_KEYS, "question", split, index))


def answers_of(row: QARow, key: str, *, split: str, index: int) -> str | tuple[str, ...]:
    """The answer(s) a metric scores: one string, or the tuple of perturbed answers; ConfigError when absent."""
    value = _read(row, key, ANSWER_KEYS, "answer", split, index)
    if isinstance(value, tuple) and not value:
        raise ConfigError(f"split {split!r} row {index}: field {key!r} is an empty list", requirement="R2")
    return value  # type: ignore[no-any-return]


def completion_of(
    source: object, prefix_key: str, text_key: str, *, split: str, index: int
) -> tuple[str, str]:
    """A completion row's (prefix, text), as their ``CompletionDataset`` reads it: a field the row lacks is the
    empty string (MUSE's membership configs name a ``prompt`` prefix that privleak rows do not carry). A missing
    or empty text is refused, a prefix or text that is not a string too (ConfigError naming split, row, field)."""
    values = []
    for key in (prefix_key, text_key):
        value = _field(source, key)
        if value is not None and not isinstance(value, str):
            raise ConfigError(
                f"split {split!r} row {index}: field {key!r} must be a string", requirement="R2"
            )
        values.append(value or "")
    if not values[1]:
        raise ConfigError(
            f"split {split!r} row {index}: field {text_key!r} is missing or empty", requirement="R2"
        )
    return values[0], values[1]


__all__ = [
    "ANSWER_KEYS",
    "QUESTION_KEYS",
    "QARow",
    "answers_of",
    "as_row",
    "as_rows",
    "completion_of",
    "question_of",
]
