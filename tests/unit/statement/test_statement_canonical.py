"""RFC 8785 canonical JSON against the RFC's published examples (§3.2.2.3 numbers, §3.2.3 sorting, Appendix B)."""

from __future__ import annotations

import json
import math
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remnant.errors import ConfigError
from remnant.statement.canonical import canonical_json

# RFC 8785 Appendix B: IEEE-754 hex -> expected ES6 serialisation.
APPENDIX_B = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


@pytest.mark.parametrize(("hex_bits", "expected"), APPENDIX_B)
def test_rfc8785_appendix_b_numbers(hex_bits: str, expected: str) -> None:
    value = struct.unpack(">d", bytes.fromhex(hex_bits))[0]
    assert canonical_json(value) == expected.encode()


def test_rfc8785_section_3_2_2_example() -> None:
    data = {
        "numbers": [333333333.33333329, 1e30, 4.50, 2e-3, 0.000000000000000000000000001],
        "string": "\u20ac$\u000f\u000aA'\u0042\u0022\u005c\\\"/",
        "literals": [None, True, False],
    }
    expected = (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )
    assert canonical_json(data) == expected.encode("utf-8")


def test_rfc8785_section_3_2_3_sorting_by_utf16_units() -> None:
    data = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    keys = [k for k in json.loads(canonical_json(data))]
    assert keys == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_refused(bad: float) -> None:
    with pytest.raises(ConfigError):
        canonical_json({"x": bad})


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_floats_round_trip(value: float) -> None:
    text = canonical_json(value)
    assert float(text) == value or (value == 0 and float(text) == 0)
    assert b" " not in text


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
        max_leaves=20,
    )
)
def test_json_round_trip_and_idempotent(value: object) -> None:
    text = canonical_json(value)
    assert json.loads(text) == value
    assert canonical_json(json.loads(text)) == text


def _jcs_string(value: str) -> str:
    """RFC 8785 §3.2.2.2 written out character by character: the two mandatory escapes, the five short control
    escapes, every other control below U+0020 as ``\\u00XX`` in lowercase hex, every other character as itself."""
    short = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    out = ['"']
    for ch in value:
        out.append(short.get(ch) or (f"\\u{ord(ch):04x}" if ord(ch) < 0x20 else ch))
    return "".join(out) + '"'


def test_every_code_point_is_written_as_rfc8785_writes_it() -> None:
    """K5: canonical_text writes a string through the standard library's C encoder; it must give the RFC's form
    for every code point (lone surrogates included: they are text here until encoded), alone and in a run."""
    from remnant.statement.canonical import canonical_text

    every = "".join(chr(cp) for cp in range(0x110000))
    assert canonical_text(every) == _jcs_string(every)
    for cp in [*range(0x80), 0x2028, 0x2029, 0xD800, 0xDFFF, 0xFFFF, 0x10FFFF]:
        assert canonical_text(chr(cp)) == _jcs_string(chr(cp)), hex(cp)
    assert canonical_text({"k\n": ["a\u0001", "\U0001f600"]}) == '{"k\\n":["a\\u0001","\U0001f600"]}'
