"""in-toto Statement v1 in a DSSE envelope, signed with Ed25519 (K5).

The payload is the canonical JSON (RFC 8785) of an in-toto Statement whose predicate is the conformance statement;
the signature covers DSSE's pre-authentication encoding ``PAE(payloadType, payload)``, so any changed byte of the
payload, or a different payload type, fails verification.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any, TypeVar

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from remnant.errors import ConfigError, SignatureError
from remnant.jsonio import loads_strict
from remnant.statement.canonical import canonical_json, canonical_sha256
from remnant.statement.keys import key_id

_T = TypeVar("_T")

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://remnant.dev/conformance-statement/v0.3"


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: ``DSSEv1 SP len(type) SP type SP len(body) SP body``."""
    type_bytes = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(type_bytes), type_bytes, len(payload), payload)


def intoto_statement(statement: Mapping[str, object], name: str) -> dict[str, object]:
    """Wrap a conformance statement as an in-toto Statement v1 whose one subject is the statement itself."""
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": name, "digest": {"sha256": canonical_sha256(statement)}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": statement,
    }


def sign_statement(statement: Mapping[str, object], key: Ed25519PrivateKey, *, name: str) -> dict[str, Any]:
    """Sign ``statement`` and return the DSSE envelope ``{payloadType, payload, signatures: [{keyid, sig}]}`` (K5)."""
    payload = canonical_json(intoto_statement(statement, name))
    signature = key.sign(pae(PAYLOAD_TYPE, payload))
    return {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [
            {"keyid": key_id(key.public_key()), "sig": base64.b64encode(signature).decode("ascii")}
        ],
    }


def _field(envelope: Mapping[str, object], name: str, kind: type[_T]) -> _T:
    value = envelope.get(name)
    if not isinstance(value, kind):
        raise ConfigError(f"DSSE envelope field {name!r} missing or not a {kind.__name__}", requirement="K5")
    return value


def b64decode_strict(text: str) -> bytes:
    """Decode base64 as DSSE writes it, in one form only: the standard or the URL-safe alphabet (DSSE allows
    both), padded, and canonical (re-encoding gives ``text`` back), so one byte string has one encoding.

    Raises ValueError (binascii.Error for bad base64) otherwise.
    """
    urlsafe = "-" in text or "_" in text
    altchars = b"-_" if urlsafe else None
    raw = base64.b64decode(text, altchars=altchars, validate=True)
    again = base64.urlsafe_b64encode(raw) if urlsafe else base64.b64encode(raw)
    if again.decode("ascii") != text:
        raise binascii.Error("not the canonical base64 of its bytes")
    return raw


def _signed_by(signatures: list[object], message: bytes, public_key: Ed25519PublicKey) -> bool:
    """Whether any entry's signature verifies ``message`` under ``public_key``.

    ``keyid`` is an unauthenticated hint (DSSE): every entry is tried against the key whatever it says, so an
    entry claiming another key's id cannot hide a valid signature and a spoofed id cannot lend one.
    """
    for entry in signatures:
        if not isinstance(entry, dict) or not isinstance(entry.get("sig"), str):
            raise ConfigError("DSSE signature entry lacks a 'sig' string", requirement="K5")
        try:
            public_key.verify(b64decode_strict(entry["sig"]), message)
        except (InvalidSignature, binascii.Error, ValueError):
            continue  # a signature that does not decode verifies nothing
        return True
    return False


def _canonical_statement(payload: bytes) -> dict[str, Any]:
    """The signed payload parsed strictly, refused unless it is the canonical JSON of what it holds and an in-toto
    Statement v1 (``_type``) of remnant's predicate type (``predicateType``) (K5).

    Two parsers must not read one signed payload two ways: duplicate keys, NaN, deep nesting and non-UTF-8 are
    refused by the strict reader, and any other freedom of form (whitespace, key order, escapes, number forms)
    by requiring ``canonical_json(parsed) == payload`` byte for byte (RFC 8785).
    """
    statement = loads_strict(payload, source="signed payload", requirement="K5", error=SignatureError)
    try:
        canonical = canonical_json(statement)
    except ConfigError as exc:  # e.g. 1e400, which the parser reads as infinity
        raise SignatureError(
            f"signed payload holds a value canonical JSON cannot: {exc}", requirement="K5"
        ) from None
    if canonical != payload:
        raise SignatureError(
            "signed payload is not the canonical JSON (RFC 8785) of the statement it holds", requirement="K5"
        )
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        raise SignatureError(
            f"signed payload is not an in-toto Statement v1 ({STATEMENT_TYPE})", requirement="K5"
        )
    # a valid signature over another tool's attestation says nothing about a conformance statement
    if statement.get("predicateType") != PREDICATE_TYPE:
        found = str(statement.get("predicateType"))[:200]
        raise SignatureError(
            f"signed statement's predicateType {found!r} is not a remnant conformance statement "
            f"({PREDICATE_TYPE})",
            requirement="K5",
        )
    return statement


def _check_subject(statement: Mapping[str, object]) -> None:
    """The first subject names the predicate by its sha256 (K5): the statement signed is the one carried."""
    predicate = statement.get("predicate")
    subjects = statement.get("subject")
    if not isinstance(predicate, dict):
        raise SignatureError("signed statement's 'predicate' is not an object", requirement="K5")
    if not isinstance(subjects, list) or not subjects or not all(isinstance(s, dict) for s in subjects):
        raise SignatureError(
            "signed statement's 'subject' is not a non-empty list of objects", requirement="K5"
        )
    digest = subjects[0].get("digest")
    expected = canonical_sha256(predicate)
    if not isinstance(digest, dict) or digest.get("sha256") != expected:
        raise SignatureError("subject digest does not match the signed predicate", requirement="K5")


def _envelope_parts(envelope: object) -> tuple[list[object], bytes]:
    """The signatures and decoded payload of a DSSE envelope of remnant's payload type with at least one
    signature; ConfigError (unreadable) or SignatureError (another payload type, no signature), K5."""
    if not isinstance(envelope, dict):
        raise ConfigError("DSSE envelope is not a JSON object", requirement="K5")
    payload_type = _field(envelope, "payloadType", str)
    signatures = _field(envelope, "signatures", list)
    try:
        payload = b64decode_strict(_field(envelope, "payload", str))
    except (binascii.Error, ValueError) as exc:
        raise ConfigError(f"DSSE payload is not valid base64: {exc}", requirement="K5") from None
    if payload_type != PAYLOAD_TYPE:
        raise SignatureError(f"payloadType {payload_type!r} is not {PAYLOAD_TYPE!r}", requirement="K5")
    if not signatures:
        raise SignatureError("DSSE envelope carries no signature", requirement="K5")
    return signatures, payload


def carried_predicate(envelope: object) -> dict[str, Any]:
    """The conformance statement an envelope carries, read as :func:`verify_envelope` reads it but with no key
    and so no signature checked: what a report needs to say whether the envelope beside a statement is about
    that statement at all (K5). It proves nothing about who signed; only :func:`verify_envelope` does that.

    Raises ConfigError or SignatureError (K5) where the envelope is malformed, its payload is not the canonical
    JSON of an in-toto Statement v1 of this predicate type, or its first subject is not the predicate's digest.
    """
    _, payload = _envelope_parts(envelope)
    statement = _canonical_statement(payload)
    _check_subject(statement)
    predicate: dict[str, Any] = statement["predicate"]
    return predicate


def verify_envelope(envelope: object, public_key: Ed25519PublicKey) -> dict[str, Any]:
    """Verify a DSSE envelope against ``public_key`` and return the in-toto Statement it carries.

    Raises ConfigError when the envelope cannot be read as one (not an object, a field missing or mistyped,
    payload not base64, an entry without ``sig``) and SignatureError when a check fails (K5): no signature
    verifies under the key, another payload type, a payload that is not the canonical JSON of an in-toto
    Statement v1 of remnant's predicate type, or a first subject whose digest is not the predicate's.
    """
    signatures, payload = _envelope_parts(envelope)
    if not _signed_by(signatures, pae(PAYLOAD_TYPE, payload), public_key):
        raise SignatureError(
            "signature does not verify: the payload was altered or the key is not the signer's",
            requirement="K5",
        )
    statement = _canonical_statement(payload)
    _check_subject(statement)
    return statement
