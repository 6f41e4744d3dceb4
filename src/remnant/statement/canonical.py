"""Canonical JSON per RFC 8785 (JCS), the byte form that is hashed and signed (K5).

Keys sorted by UTF-16 code units, no insignificant whitespace, UTF-8, ES6 number serialisation (integers without
".0", shortest round-trip floats, exponent forms as ECMAScript writes them), NaN and Infinity refused.
:func:`derive_seed` hashes that form, so every package below the config (packs mint with it) derives seeds alike.
"""

from __future__ import annotations

import hashlib
import json.encoder
import math
from collections.abc import Callable

from remnant.errors import ConfigError


def _number(value: float) -> str:
    """ECMAScript Number::toString of a finite double (RFC 8785 §3.2.2.3)."""
    if not math.isfinite(value):
        raise ConfigError("canonical JSON cannot hold NaN or Infinity (RFC 8785 §3.2.2.2)", requirement="K5")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    mantissa, _, exp_text = repr(abs(value)).partition("e")
    exponent = int(exp_text) if exp_text else 0
    int_part, _, frac_part = mantissa.partition(".")
    digits = (int_part + frac_part).lstrip("0")
    # Position of the decimal point relative to the start of ``digits`` (ECMAScript's n).
    point = len(int_part) + exponent
    if int_part == "0":
        point = exponent - (len(frac_part) - len(frac_part.lstrip("0")))
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    if k <= point <= 21:
        text = digits + "0" * (point - k)
    elif 0 < point <= 21:
        text = digits[:point] + "." + digits[point:]
    elif -6 < point <= 0:
        text = "0." + "0" * (-point) + digits
    else:
        exp = point - 1
        exp_str = f"e+{exp}" if exp >= 0 else f"e{exp}"
        text = digits[0] + ("." + digits[1:] if k > 1 else "") + exp_str
    return sign + text


#: A string's canonical form (RFC 8785 §3.2.2.2, ECMAScript's JSON.stringify): ``"`` and ``\\`` escaped, the short
#: escapes ``\\b \\f \\n \\r \\t``, every other control below U+0020 as ``\\u00XX`` (lowercase hex), every other
#: character as itself. The standard library's C encoder writes exactly that form, character for character (checked
#: over every code point by tests/unit/statement/test_statement_canonical.py), an order of magnitude faster than a
#: loop in Python over the characters; packs hash tens of thousands of item texts (R23).
_string: Callable[[str], str] = json.encoder.encode_basestring


def _utf16_units(key: str) -> bytes:
    return key.encode("utf-16-be")


def _serialise(value: object, out: list[str]) -> None:
    if type(value) is str:  # the commonest value first; a str subclass takes the isinstance branch below
        out.append(_string(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        if abs(value) > 2**53:
            raise ConfigError(
                f"integer {value} exceeds the I-JSON range (RFC 8785 §3.2.2.3)", requirement="K5"
            )
        out.append(str(value))
    elif isinstance(value, float):
        out.append(_number(value))
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _serialise(item, out)
        out.append("]")
    elif isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise ConfigError(f"canonical JSON keys must be strings, got {key!r}", requirement="K5")
        out.append("{")
        # by UTF-16 code units (§3.2.3); for ASCII keys that is the order of the strings themselves
        ascii_keys = all(key.isascii() for key in value)
        for i, key in enumerate(sorted(value) if ascii_keys else sorted(value, key=_utf16_units)):
            if i:
                out.append(",")
            out.append(_string(key))
            out.append(":")
            _serialise(value[key], out)
        out.append("}")
    else:
        raise ConfigError(f"canonical JSON cannot hold a {type(value).__name__}", requirement="K5")


def canonical_text(value: object) -> str:
    """A JSON value in its RFC 8785 canonical form, as text: what remnant hashes and signs (K5, R23)."""
    out: list[str] = []
    _serialise(value, out)
    return "".join(out)


def canonical_json(value: object) -> bytes:
    """Serialise a JSON value to its RFC 8785 canonical UTF-8 bytes (the signed form, K5)."""
    return canonical_text(value).encode("utf-8")


def sha256_text(text: str) -> str:
    """Hex sha256 of ``text`` encoded as UTF-8 (of a canonical JSON text, a value's digest)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_sha256(value: object) -> str:
    """Hex sha256 of ``value``'s canonical JSON (RFC 8785): the one content digest of a JSON value (cell keys,
    recipes, caches, identities, packs); a ``sha256:``-prefixed digest is ``"sha256:" + canonical_sha256(v)``."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


def derive_seed(master: int, *path: str | int) -> int:
    """The seed of one stage or item, derived from the master seed (no global seeding; R23, R24).

    ``sha256(canonical_json([master, *path]))``, first 8 bytes big-endian, shifted right by 11 bits: an integer in
    ``[0, 2**53)``, so it survives JSON (I-JSON) and seeds ``random.Random``, ``numpy`` and ``torch.Generator``
    alike. ``derive_seed(7, "relearn", "budget=16")`` names its stage by path; ``1`` and ``"1"`` differ.
    """
    digest = hashlib.sha256(canonical_json([master, *path])).digest()
    return int.from_bytes(digest[:8], "big") >> 11
