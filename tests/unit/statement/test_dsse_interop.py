"""DSSE envelopes verify both ways against the in-toto reference library, securesystemslib (K5).

Key ids differ between the two: remnant's ``keyid`` is the hex sha256 of the raw 32-byte Ed25519 public key;
securesystemslib's default is the hex sha256 of its canonical JSON key record
``{"keytype": "ed25519", "keyval": {"public": <hex>}, "scheme": "ed25519"}``. remnant treats ``keyid`` as the
unauthenticated hint DSSE says it is and tries every signature against the key it is given, so a
securesystemslib envelope verifies whatever its key id. securesystemslib only tries signatures whose ``keyid``
equals its key's, so a verifier there names remnant's key id when it builds the key (``keyid=key_id(pub)``).
"""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest

pytest.importorskip("securesystemslib")

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402
from securesystemslib.dsse import Envelope  # noqa: E402
from securesystemslib.exceptions import VerificationError  # noqa: E402
from securesystemslib.signer import CryptoSigner, SSlibKey  # noqa: E402

from remnant.errors import SignatureError  # noqa: E402
from remnant.statement.canonical import canonical_json  # noqa: E402
from remnant.statement.dsse import (  # noqa: E402
    PAYLOAD_TYPE,
    intoto_statement,
    sign_statement,
    verify_envelope,
)
from remnant.statement.keys import key_id  # noqa: E402

STATEMENT = {"standard_version": "0.3", "verdict": "hidden", "n": 300, "rate": 0.04, "note": "ü"}


@pytest.fixture()
def key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def _sslib_envelope(key: Ed25519PrivateKey, payload: bytes) -> dict[str, Any]:
    """An envelope signed by securesystemslib's own Envelope and CryptoSigner, as JSON-ready dict."""
    envelope = Envelope(payload, PAYLOAD_TYPE, {})
    envelope.sign(CryptoSigner(key))
    return envelope.to_dict()


def _sslib_verify(envelope: dict[str, Any], key: SSlibKey) -> None:
    # Envelope.from_dict rewrites the signature entries it is given: hand it a copy.
    Envelope.from_dict(copy.deepcopy(envelope)).verify([key], 1)


def test_key_id_conventions_differ(key: Ed25519PrivateKey) -> None:
    sslib_id = CryptoSigner(key).public_key.keyid
    ours = key_id(key.public_key())
    assert len(sslib_id) == len(ours) == 64
    assert sslib_id != ours


def test_securesystemslib_envelope_verifies_in_remnant(key: Ed25519PrivateKey) -> None:
    statement = intoto_statement(STATEMENT, "statement.json")
    envelope = _sslib_envelope(key, canonical_json(statement))
    assert envelope["signatures"][0]["keyid"] != key_id(key.public_key())  # its own key-id convention
    assert verify_envelope(envelope, key.public_key()) == statement


def test_securesystemslib_envelope_with_another_key_fails_in_remnant(key: Ed25519PrivateKey) -> None:
    envelope = _sslib_envelope(key, canonical_json(intoto_statement(STATEMENT, "s.json")))
    with pytest.raises(SignatureError, match="does not verify"):
        verify_envelope(envelope, Ed25519PrivateKey.generate().public_key())


def test_non_canonical_payload_signed_by_securesystemslib_is_refused(key: Ed25519PrivateKey) -> None:
    """securesystemslib signs whatever bytes it is given; remnant refuses a payload that is not canonical."""
    import json

    statement = intoto_statement(STATEMENT, "s.json")
    for payload in (
        json.dumps(statement).encode(),  # spaces after separators
        json.dumps(statement, sort_keys=True, separators=(",", ":")).encode(),  # "ü" escaped as \u00fc
        canonical_json(statement) + b"\n",
    ):
        envelope = _sslib_envelope(key, payload)
        _sslib_verify(envelope, CryptoSigner(key).public_key)  # the signature itself is good
        with pytest.raises(SignatureError, match="not the canonical JSON"):
            verify_envelope(envelope, key.public_key())


def test_remnant_envelope_verifies_in_securesystemslib(key: Ed25519PrivateKey) -> None:
    envelope = sign_statement(STATEMENT, key, name="statement.json")
    public = SSlibKey.from_crypto(key.public_key(), keyid=key_id(key.public_key()))
    accepted = Envelope.from_dict(copy.deepcopy(envelope)).verify([public], 1)
    assert list(accepted) == [key_id(key.public_key())]
    # the payload securesystemslib verified is the canonical in-toto statement remnant reads back
    assert Envelope.from_dict(copy.deepcopy(envelope)).payload == canonical_json(
        verify_envelope(envelope, key.public_key())
    )


def test_securesystemslib_refuses_tampered_or_wrongly_keyed_remnant_envelope(key: Ed25519PrivateKey) -> None:
    envelope = sign_statement(STATEMENT, key, name="statement.json")
    public = SSlibKey.from_crypto(key.public_key(), keyid=key_id(key.public_key()))
    raw = bytearray(base64.b64decode(envelope["payload"]))
    raw[-5] ^= 0x01
    tampered = dict(envelope, payload=base64.b64encode(bytes(raw)).decode())
    with pytest.raises(VerificationError):
        _sslib_verify(tampered, public)
    other = Ed25519PrivateKey.generate().public_key()
    with pytest.raises(VerificationError):
        _sslib_verify(envelope, SSlibKey.from_crypto(other, keyid=key_id(key.public_key())))
    # securesystemslib's own key-id convention finds no signature to try in a remnant envelope
    with pytest.raises(VerificationError):
        _sslib_verify(envelope, SSlibKey.from_crypto(key.public_key()))


def test_pae_matches_securesystemslib(key: Ed25519PrivateKey) -> None:
    from remnant.statement.dsse import pae

    payload = canonical_json(intoto_statement(STATEMENT, "s.json"))
    assert pae(PAYLOAD_TYPE, payload) == Envelope(payload, PAYLOAD_TYPE, {}).pae()
