"""DSSE envelopes verify both ways against the in-toto reference library, securesystemslib (K5).

remnant's ``keyid`` is securesystemslib's default, the hex sha256 of its canonical JSON key record
``{"keytype": "ed25519", "keyval": {"public": <hex>}, "scheme": "ed25519"}``: securesystemslib only tries
signatures whose ``keyid`` equals its key's, so its default call, ``Envelope.verify([SSlibKey.from_crypto(pub)],
1)``, verifies a remnant envelope. remnant treats ``keyid`` as the unauthenticated hint DSSE says it is and tries
every signature over the PAE against the key it is given, so any envelope verifies whatever its key id, and
``remnant verify`` accepts one that securesystemslib signed.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("securesystemslib")

from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402
from securesystemslib.dsse import Envelope  # noqa: E402
from securesystemslib.exceptions import VerificationError  # noqa: E402
from securesystemslib.signer import (  # type: ignore[attr-defined]  # noqa: E402  (its __init__ re-exports implicitly)
    CryptoSigner,
    SSlibKey,
)

from remnant.cli import main  # noqa: E402
from remnant.errors import SignatureError  # noqa: E402
from remnant.statement.canonical import canonical_json  # noqa: E402
from remnant.statement.dsse import (  # noqa: E402
    PAYLOAD_TYPE,
    intoto_statement,
    sign_statement,
    verify_envelope,
)
from remnant.statement.keys import generate_keypair, key_id, load_private_key, load_public_key  # noqa: E402

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


def test_key_id_is_securesystemslibs_default(key: Ed25519PrivateKey) -> None:
    ours = key_id(key.public_key())
    assert ours == CryptoSigner(key).public_key.keyid == SSlibKey.from_crypto(key.public_key()).keyid
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert ours != hashlib.sha256(raw).hexdigest()  # not the raw-key digest remnant once used
    assert key_id(Ed25519PrivateKey.generate().public_key()) != ours


def test_securesystemslib_envelope_verifies_in_remnant(key: Ed25519PrivateKey) -> None:
    statement = intoto_statement(STATEMENT, "statement.json")
    envelope = _sslib_envelope(key, canonical_json(statement))
    assert envelope["signatures"][0]["keyid"] == key_id(key.public_key())  # one key-id convention
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
    """securesystemslib's default call, the key built with its own key id, verifies a remnant envelope."""
    envelope = sign_statement(STATEMENT, key, name="statement.json")
    accepted = Envelope.from_dict(copy.deepcopy(envelope)).verify([SSlibKey.from_crypto(key.public_key())], 1)
    assert list(accepted) == [key_id(key.public_key())]
    # the payload securesystemslib verified is the canonical in-toto statement remnant reads back
    assert Envelope.from_dict(copy.deepcopy(envelope)).payload == canonical_json(
        verify_envelope(envelope, key.public_key())
    )


def test_securesystemslib_refuses_tampered_or_wrongly_keyed_remnant_envelope(key: Ed25519PrivateKey) -> None:
    envelope = sign_statement(STATEMENT, key, name="statement.json")
    public = SSlibKey.from_crypto(key.public_key())
    raw = bytearray(base64.b64decode(envelope["payload"]))
    raw[-5] ^= 0x01
    tampered = dict(envelope, payload=base64.b64encode(bytes(raw)).decode())
    with pytest.raises(VerificationError):
        _sslib_verify(tampered, public)
    other = Ed25519PrivateKey.generate().public_key()
    with pytest.raises(VerificationError):
        _sslib_verify(envelope, SSlibKey.from_crypto(other, keyid=key_id(key.public_key())))
    # a key id that names no key: securesystemslib tries nothing, remnant still verifies over the PAE (K5)
    renamed = dict(envelope, signatures=[dict(envelope["signatures"][0], keyid="0" * 64)])
    with pytest.raises(VerificationError):
        _sslib_verify(renamed, public)
    assert verify_envelope(renamed, key.public_key())["predicate"] == STATEMENT


def test_pae_matches_securesystemslib(key: Ed25519PrivateKey) -> None:
    from remnant.statement.dsse import pae

    payload = canonical_json(intoto_statement(STATEMENT, "s.json"))
    assert pae(PAYLOAD_TYPE, payload) == Envelope(payload, PAYLOAD_TYPE, {}).pae()


def test_both_ways_through_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``remnant sign``'s envelope verifies with securesystemslib's default call; an envelope securesystemslib
    signed with the same key passes ``remnant verify`` (exit 0), and with another key fails it (exit 1), K5."""
    private, public = generate_keypair(tmp_path / "keys")
    statement = tmp_path / "statement.json"
    assert main(["statement", "example", "--out", str(statement)]) == 0  # a conformant statement (K4)
    predicate = json.loads(statement.read_text(encoding="utf-8"))
    assert main(["sign", str(statement), "--key", str(private)]) == 0
    ours = json.loads((tmp_path / "statement.dsse.json").read_text(encoding="utf-8"))
    _sslib_verify(ours, SSlibKey.from_crypto(load_public_key(public)))

    theirs = _sslib_envelope(
        load_private_key(private), canonical_json(intoto_statement(predicate, "statement.json"))
    )
    (tmp_path / "theirs.dsse.json").write_text(json.dumps(theirs), encoding="utf-8")
    capsys.readouterr()
    assert main(["verify", str(tmp_path / "theirs.dsse.json"), "--key", str(public)]) == 0
    assert json.loads(capsys.readouterr().out)["verified"] is True
    _, other = generate_keypair(tmp_path / "other")
    assert main(["verify", str(tmp_path / "theirs.dsse.json"), "--key", str(other)]) == 1
