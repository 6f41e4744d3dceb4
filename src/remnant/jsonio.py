"""The one way remnant reads JSON and TOML it did not write itself: strictly, with a clear error (K5, R23).

Every file a claimant supplies (statement, envelope, facts, manifest, records, pack, config) may be hostile, so
the readers here refuse what a lenient parser would quietly accept and two parsers might read differently:

- a duplicate key in any object (``{"verdict": "hidden", "verdict": "removed"}`` means what the reader chooses;
  RFC 8259 §4 leaves it undefined, so a signed payload or a statement must not hold one);
- ``NaN``, ``Infinity`` and ``-Infinity`` (not JSON; RFC 8785 §3.2.2.2);
- nesting deeper than :data:`MAX_DEPTH` (a parser recursing on it ends in a RecursionError, not a message);
- a file that is missing, a folder, unreadable, or not UTF-8.

Each refusal is a :class:`~remnant.errors.ConfigError` naming the file (and the key, where there is one) and the
requirement the caller names, so the command line turns it into one line and exit 2.
"""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path
from typing import Any, NoReturn

from remnant.errors import ConfigError, RemnantError

#: Deepest nesting of objects and arrays accepted in a JSON or TOML input. remnant's own files nest under 12.
MAX_DEPTH = 64


class _Refused(ValueError):
    """A strict-parse refusal, raised from inside ``json.loads`` hooks and turned into a ConfigError."""


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"duplicate key {key!r}")
        out[key] = value
    return out


def _no_constant(name: str) -> NoReturn:
    raise _Refused(f"{name} is not JSON (RFC 8785 §3.2.2.2)")


def _json_int(text: str) -> int | float:
    """An integer literal beyond I-JSON's ±2**53 can only be a float canonical JSON wrote in integer form."""
    if len(text.lstrip("-")) > 400:
        raise _Refused("an integer literal of more than 400 digits")
    value = int(text)
    try:
        return float(value) if abs(value) > 2**53 else value
    except OverflowError:  # past a double's range: no float canonical JSON could have written
        raise _Refused(
            f"an integer literal of {len(text.lstrip('-'))} digits, beyond a double's range"
        ) from None


def _json_float(text: str) -> float:
    """A number literal that overflows a double (1e999) would read as Infinity, which is not JSON."""
    value = float(text)
    if math.isinf(value):
        raise _Refused(
            f"number {text[:40]} overflows a double to Infinity: JSON cannot hold NaN or Infinity (RFC 8785 §3.2.2.2)"
        )
    return value


def nesting_depth(text: str | bytes) -> int:
    """The deepest bracket nesting in a JSON text (brackets inside strings ignored), without recursing."""
    data = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    depth = deepest = 0
    in_string = escaped = False
    for ch in data:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _shallow_text(text: str | bytes, source: str, requirement: str | None, error: type[RemnantError]) -> str:
    """``text`` as a str, refused when it is not UTF-8 or nests deeper than :data:`MAX_DEPTH`."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise error(f"{source}: not UTF-8: {exc}", requirement=requirement) from None
    # fewer opening brackets than the limit cannot nest past it: skips the character scan on most texts
    if text.count("[") + text.count("{") > MAX_DEPTH and nesting_depth(text) > MAX_DEPTH:
        raise error(f"{source}: nested deeper than {MAX_DEPTH} levels", requirement=requirement)
    return text


def loads_strict(
    text: str | bytes,
    *,
    source: str,
    requirement: str | None = None,
    error: type[RemnantError] = ConfigError,
) -> Any:
    """Parse one JSON text strictly (module docstring); ``error`` (ConfigError) names ``source`` and the problem."""
    text = _shallow_text(text, source, requirement, error)
    try:
        return json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_constant=_no_constant,
            parse_int=_json_int,
            parse_float=_json_float,
        )
    except _Refused as exc:
        raise error(f"{source}: {exc}", requirement=requirement) from None
    except (ValueError, RecursionError) as exc:
        raise error(f"{source}: cannot read as JSON: {exc}", requirement=requirement) from None


def read_bytes(path: str | Path, *, requirement: str | None = None) -> bytes:
    """A file's bytes; ConfigError naming it when it is missing, a folder or unreadable."""
    file = Path(path)
    if file.is_dir():
        raise ConfigError(f"{file}: is a folder, not a file", requirement=requirement)
    try:
        return file.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read: {exc.strerror or exc}", requirement=requirement) from None


def read_json(path: str | Path, *, requirement: str | None = None) -> Any:
    """Read and strictly parse a JSON file (module docstring); ConfigError naming the file otherwise."""
    return loads_strict(read_bytes(path, requirement=requirement), source=str(path), requirement=requirement)


def read_toml(path: str | Path, *, requirement: str | None = None) -> dict[str, Any]:
    """Read a TOML file (duplicate keys are already TOML errors), refusing deep nesting before the parser recurses
    on it; ConfigError naming the file otherwise."""
    source = str(path)
    data = _shallow_text(read_bytes(path, requirement=requirement), source, requirement, ConfigError)
    try:
        return tomllib.loads(data)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}", requirement=requirement) from None
    except RecursionError:
        raise ConfigError(f"{source}: nested too deeply to read", requirement=requirement) from None


__all__ = ["MAX_DEPTH", "loads_strict", "nesting_depth", "read_bytes", "read_json", "read_toml"]
