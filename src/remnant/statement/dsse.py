"""in-toto Statement v1 in a DSSE envelope, signed with Ed25519 (K5).

The payload is the canonical JSON (RFC 8785) of an in-toto Statement whose predicate is the conformance statement;
the signature covers DSSE's pre-authentication encoding ``PAE(payloadType, payload)``, so any changed byte of the
payload, or a different payload type, fails verification.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from remnant.errors import ConfigError, SignatureError
from remnant.jsonio import loads_strict
from remnant.statement.canonical import canonical_json
from remnant.statement.keys import key_id

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://remnant.dev/conformance-statement/v0.3"


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: ``DSSEv1 SP len(type) SP type SP len(body) SP body``."""
    type_bytes = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(type_bytes), type_bytes, len(payload), payload)


def intoto_statement(
    statement: dict[str, Any], name: str, extra_subjects: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Wrap a conformance statement as an in-toto Statement v1; the first subject is the statement itself."""
    digest = hashlib.sha256(canonical_json(statement)).hexdigest()
    subjects = [{"name": name, "digest": {"sha256": digest}}, *(extra_subjects or [])]
    return {
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": PREDICATE_TYPE,
        "predicate": statement,
    }


def sign_statement(statement: dict[str, Any], key: Ed25519PrivateKey, *, name: str) -> dict[str, Any]:
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


def _field(envelope: dict[str, Any], name: str, kind: type) -> Any:
    value = envelope.get(name)
    if not isinstance(value, kind):
        raise ConfigError(f"DSSE envelope field {name!r} missing or not a {kind.__name__}", requirement="K5")
    return value


def verify_envelope(envelope: Any, public_key: Ed25519PublicKey) -> dict[str, Any]:
    """Verify a DSSE envelope against ``public_key`` and return the in-toto Statement it carries.

    Raises ConfigError when the envelope is malformed and SignatureError when no signature verifies (K5).
    """
    if not isinstance(envelope, dict):
        raise ConfigError("DSSE envelope is not a JSON object", requirement="K5")
    payload_type = _field(envelope, "payloadType", str)
    signatures = _field(envelope, "signatures", list)
    try:
        payload = base64.b64decode(_field(envelope, "payload", str), validate=True)
    except binascii.Error as exc:
        raise ConfigError(f"DSSE payload is not valid base64: {exc}", requirement="K5") from exc
    if payload_type != PAYLOAD_TYPE:
        raise SignatureError(f"payloadType {payload_type!r} is not {PAYLOAD_TYPE!r}", requirement="K5")
    if not signatures:
        raise SignatureError("DSSE envelope carries no signature", requirement="K5")
    message = pae(payload_type, payload)
    expected_id = key_id(public_key)
    verified = False
    for entry in signatures:
        if not isinstance(entry, dict) or not isinstance(entry.get("sig"), str):
            raise ConfigError("DSSE signature entry lacks a 'sig' string", requirement="K5")
        keyid = entry.get("keyid")
        if keyid not in (None, "", expected_id):
            continue
        try:
            public_key.verify(base64.b64decode(entry["sig"], validate=True), message)
        except (InvalidSignature, binascii.Error):
            continue
        verified = True
        break
    if not verified:
        raise SignatureError(
            "signature does not verify: the payload was altered or the key is not the signer's",
            requirement="K5",
        )
    statement = loads_strict(payload, source="signed payload", requirement="K5", error=SignatureError)
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        raise SignatureError(
            f"signed payload is not an in-toto Statement v1 ({STATEMENT_TYPE})", requirement="K5"
        )
    predicate = statement.get("predicate")
    subjects = statement.get("subject")
    if isinstance(predicate, dict) and isinstance(subjects, list) and subjects:
        digest = hashlib.sha256(canonical_json(predicate)).hexdigest()
        if subjects[0].get("digest", {}).get("sha256") != digest:
            raise SignatureError("subject digest does not match the signed predicate", requirement="K5")
    return statement
