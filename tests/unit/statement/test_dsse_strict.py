"""One signed payload, one reading (K5): canonical payloads only, keyid a hint, strict base64, checked subjects."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from remnant.errors import ConfigError, SignatureError
from remnant.statement.canonical import canonical_json
from remnant.statement.dsse import (
    PAYLOAD_TYPE,
    b64decode_strict,
    intoto_statement,
    pae,
    sign_statement,
    verify_envelope,
)
from remnant.statement.keys import key_id

STATEMENT = {"standard_version": "0.3", "verdict": "hidden", "n": 300, "rate": 0.04}
KEY = Ed25519PrivateKey.generate()
OTHER = Ed25519PrivateKey.generate()


def _signed(payload: bytes, *, key: Ed25519PrivateKey = KEY, keyid: str | None = None) -> dict[str, Any]:
    """An envelope whose signature over ``payload`` is good: only what the payload holds can fail it."""
    sig = base64.b64encode(key.sign(pae(PAYLOAD_TYPE, payload))).decode()
    entry = {"keyid": key_id(key.public_key()) if keyid is None else keyid, "sig": sig}
    return {"payloadType": PAYLOAD_TYPE, "payload": base64.b64encode(payload).decode(), "signatures": [entry]}


def _statement() -> dict[str, Any]:
    return intoto_statement(STATEMENT, "statement.json")


def test_canonical_payload_verifies() -> None:
    assert verify_envelope(_signed(canonical_json(_statement())), KEY.public_key()) == _statement()


def _replace(old: bytes, new: bytes) -> bytes:
    payload = canonical_json(_statement())
    assert old in payload
    return payload.replace(old, new, 1)


NON_CANONICAL: list[tuple[str, bytes, str]] = [
    ("spaces", json.dumps(_statement()).encode(), "not the canonical JSON"),
    ("indented", json.dumps(_statement(), indent=1, sort_keys=True).encode(), "not the canonical JSON"),
    ("key-order", json.dumps(_statement(), separators=(",", ":")).encode(), "not the canonical JSON"),
    ("trailing-newline", canonical_json(_statement()) + b"\n", "not the canonical JSON"),
    ("leading-space", b" " + canonical_json(_statement()), "not the canonical JSON"),
    ("number-300.0", _replace(b'"n":300', b'"n":300.0'), "not the canonical JSON"),
    ("number-3e2", _replace(b'"n":300', b'"n":3e2'), "not the canonical JSON"),
    ("number-0.040", _replace(b'"rate":0.04', b'"rate":0.040'), "not the canonical JSON"),
    ("escaped-letter", _replace(b'"hidden"', b'"\\u0068idden"'), "not the canonical JSON"),
    ("escaped-slash", _replace(b'"statement.json"', b'"statement\\/json"'), "not the canonical JSON"),
    ("int-beyond-2**53", _replace(b'"n":300', b'"n":9007199254740993'), "not the canonical JSON"),
    ("duplicate-key", _replace(b'"n":300', b'"n":0,"n":300'), "duplicate key 'n'"),
    ("nan", _replace(b'"rate":0.04', b'"rate":NaN'), "NaN is not JSON"),
    ("overflow-to-inf", _replace(b'"rate":0.04', b'"rate":1e400'), "cannot hold NaN or Infinity"),
    ("bom", b"\xef\xbb\xbf" + canonical_json(_statement()), "cannot read as JSON"),
    ("latin-1", canonical_json(_statement()).replace(b"hidden", b"hidd\xe9n"), "not UTF-8"),
    ("deep", _replace(b'"n":300', b'"n":' + b"[" * 70 + b"]" * 70), "nested deeper than 64"),
]


@pytest.mark.parametrize(
    ("payload", "message"), [c[1:] for c in NON_CANONICAL], ids=[c[0] for c in NON_CANONICAL]
)
def test_signed_non_canonical_payload_is_refused(payload: bytes, message: str) -> None:
    """The signature is good; the payload is not the canonical form of what it holds, so it is refused."""
    with pytest.raises(SignatureError, match=message) as info:
        verify_envelope(_signed(payload), KEY.public_key())
    assert info.value.requirement == "K5"


def test_keyid_is_a_hint_not_a_filter() -> None:
    payload = canonical_json(_statement())
    # a good signature under a wrong, empty or absent keyid still verifies (the result is the same statement)
    for keyid in (key_id(OTHER.public_key()), "", "not-hex", "0" * 64):
        assert verify_envelope(_signed(payload, keyid=keyid), KEY.public_key()) == _statement()
    no_keyid = _signed(payload)
    del no_keyid["signatures"][0]["keyid"]
    assert verify_envelope(no_keyid, KEY.public_key()) == _statement()
    # a spoofed keyid lends nothing: another key's signature under our key's id does not verify
    with pytest.raises(SignatureError, match="does not verify"):
        verify_envelope(_signed(payload, key=OTHER, keyid=key_id(KEY.public_key())), KEY.public_key())


def test_every_signature_entry_is_tried() -> None:
    payload = canonical_json(_statement())
    decoy = _signed(payload, key=OTHER, keyid=key_id(KEY.public_key()))["signatures"][0]
    good = _signed(payload, keyid=key_id(OTHER.public_key()))["signatures"][0]
    broken = {"keyid": key_id(KEY.public_key()), "sig": "!!not base64!!"}
    envelope = dict(_signed(payload), signatures=[decoy, broken, good])
    assert verify_envelope(envelope, KEY.public_key()) == _statement()
    with pytest.raises(SignatureError, match="does not verify"):
        verify_envelope(dict(envelope, signatures=[decoy, broken]), KEY.public_key())


def test_strict_base64() -> None:
    assert b64decode_strict("YQ==") == b"a"
    assert b64decode_strict("-_8=") == base64.urlsafe_b64decode("-_8=")  # DSSE allows the URL-safe alphabet
    for text in ("YR==", "YQ", "YQ==\n", " YQ==", "Y Q==", "+-8=", "ä", "YQ==YQ=="):
        with pytest.raises(ValueError):
            b64decode_strict(text)


def test_payload_encodings() -> None:
    """The same payload in URL-safe base64 verifies; a non-canonical base64 of it is unreadable (exit 2)."""
    name = next(n for n in ("s~~~.json", "s~~~~.json", "s~~~~~.json") if set("+/") & set(_b64_of(n)))
    payload = canonical_json(intoto_statement(STATEMENT, name))
    envelope = _signed(payload)
    urlsafe = dict(envelope, payload=base64.urlsafe_b64encode(payload).decode())
    assert urlsafe["payload"] != envelope["payload"]
    assert verify_envelope(urlsafe, KEY.public_key())["subject"][0]["name"] == name
    padded = canonical_json(intoto_statement(STATEMENT, "s.json"))
    while len(padded) % 3 == 0:
        padded += b" "  # only to get a padded encoding; refused before the payload is read
    text = base64.b64encode(padded).decode()
    last = text.rstrip("=")[-1]
    loose = text.rstrip("=")[:-1] + chr(ord(last) + 1) + text[len(text.rstrip("=")) :]
    assert base64.b64decode(loose) == padded  # the same bytes under a different text
    with pytest.raises(ConfigError, match="not valid base64"):
        verify_envelope(dict(_signed(padded), payload=loose), KEY.public_key())


def _b64_of(name: str) -> str:
    return base64.b64encode(canonical_json(intoto_statement(STATEMENT, name))).decode()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: s.pop("subject"), "'subject' is not a non-empty list"),
        (lambda s: s.update(subject=[]), "'subject' is not a non-empty list"),
        (lambda s: s.update(subject=["statement.json"]), "'subject' is not a non-empty list"),
        (lambda s: s.update(subject=[{"name": "x", "digest": "sha256:00"}]), "subject digest does not match"),
        (
            lambda s: s.update(subject=[{"name": "x", "digest": {"sha256": "00"}}]),
            "subject digest does not match",
        ),
        (lambda s: s.update(predicate=[1]), "'predicate' is not an object"),
        (lambda s: s.update(_type="https://in-toto.io/Statement/v0.1"), "not an in-toto Statement v1"),
    ],
    ids=[
        "no-subject",
        "empty-subject",
        "subject-string",
        "digest-string",
        "digest-wrong",
        "predicate-list",
        "v0.1",
    ],
)
def test_signed_statement_shape(edit: Any, message: str) -> None:
    statement = _statement()
    edit(statement)
    with pytest.raises(SignatureError, match=message):
        verify_envelope(_signed(canonical_json(statement)), KEY.public_key())


def test_sign_statement_payload_is_canonical_and_verifies() -> None:
    envelope = sign_statement(STATEMENT, KEY, name="s.json")
    payload = base64.b64decode(envelope["payload"])
    assert payload == canonical_json(json.loads(payload))
    assert verify_envelope(envelope, KEY.public_key())["predicate"] == STATEMENT
