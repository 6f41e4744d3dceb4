"""DSSE envelope over an in-toto Statement v1, Ed25519 (K5): PAE vector, round trip, tamper and wrong key fail."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path

import pytest

from remnant.cli import main
from remnant.errors import ConfigError, SignatureError
from remnant.statement.canonical import canonical_json
from remnant.statement.dsse import PAYLOAD_TYPE, STATEMENT_TYPE, pae, sign_statement, verify_envelope
from remnant.statement.keys import generate_keypair, key_id, load_private_key, load_public_key

STATEMENT = {"standard_version": "0.3", "verdict": "hidden", "n": 300, "rate": 0.04}


def test_pae_vector() -> None:
    # The DSSE specification's worked example.
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    assert pae("", b"") == b"DSSEv1 0  0 "


@pytest.fixture()
def keypair(tmp_path: Path) -> tuple[Path, Path]:
    return generate_keypair(tmp_path / "keys")


def test_key_files(keypair: tuple[Path, Path]) -> None:
    private, public = keypair
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert private.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert public.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")
    assert len(key_id(load_public_key(public))) == 64


def test_round_trip(keypair: tuple[Path, Path]) -> None:
    private, public = keypair
    envelope = sign_statement(STATEMENT, load_private_key(private), name="statement.json")
    assert envelope["payloadType"] == PAYLOAD_TYPE
    assert envelope["signatures"][0]["keyid"] == key_id(load_public_key(public))
    statement = verify_envelope(envelope, load_public_key(public))
    assert statement["_type"] == STATEMENT_TYPE
    assert statement["predicate"] == STATEMENT
    assert statement["subject"][0]["name"] == "statement.json"
    payload = base64.b64decode(envelope["payload"])
    assert payload == canonical_json(statement)


def test_every_one_byte_change_fails(keypair: tuple[Path, Path]) -> None:
    private, public = keypair
    key = load_public_key(public)
    envelope = sign_statement(STATEMENT, load_private_key(private), name="s.json")
    payload = bytearray(base64.b64decode(envelope["payload"]))
    for index in range(len(payload)):
        changed = bytearray(payload)
        changed[index] ^= 0x01
        tampered = dict(envelope, payload=base64.b64encode(bytes(changed)).decode())
        with pytest.raises(SignatureError):
            verify_envelope(tampered, key)


def test_wrong_key_and_type_fail(keypair: tuple[Path, Path], tmp_path: Path) -> None:
    private, _ = keypair
    _, other_public = generate_keypair(tmp_path / "other")
    envelope = sign_statement(STATEMENT, load_private_key(private), name="s.json")
    with pytest.raises(SignatureError, match="altered or the key"):
        verify_envelope(envelope, load_public_key(other_public))
    with pytest.raises(SignatureError):
        verify_envelope(dict(envelope, payloadType="application/json"), load_public_key(keypair[1]))


def test_malformed_envelope(keypair: tuple[Path, Path]) -> None:
    key = load_public_key(keypair[1])
    with pytest.raises(ConfigError):
        verify_envelope({"payloadType": PAYLOAD_TYPE, "payload": "@@@", "signatures": []}, key)
    with pytest.raises(ConfigError):
        verify_envelope([], key)


def test_cli_sign_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from remnant.statement.example import example_statement

    assert main(["keys", "generate", "--out", str(tmp_path / "k")]) == 0
    statement = tmp_path / "statement.json"
    envelope = tmp_path / "statement.dsse.json"
    statement.write_text(json.dumps(STATEMENT))  # no conformance statement: sign refuses it (K5)
    assert main(["sign", str(statement), "--key", str(tmp_path / "k" / "remnant.key")]) == 1
    assert "not conformant" in capsys.readouterr().err and not envelope.exists()
    statement.write_text(json.dumps(example_statement().model_dump(mode="json", by_alias=True)))
    assert main(["sign", str(statement), "--key", str(tmp_path / "k" / "remnant.key")]) == 0
    assert envelope.exists()
    capsys.readouterr()
    assert main(["verify", str(envelope), "--key", str(tmp_path / "k" / "remnant.pub")]) == 0
    assert json.loads(capsys.readouterr().out)["subject"][0]["name"] == "statement.json"
    data = json.loads(envelope.read_text())
    raw = bytearray(base64.b64decode(data["payload"]))
    raw[-3] ^= 0x02
    data["payload"] = base64.b64encode(bytes(raw)).decode()
    envelope.write_text(json.dumps(data))
    assert main(["verify", str(envelope), "--key", str(tmp_path / "k" / "remnant.pub")]) == 1
    assert "does not verify" in capsys.readouterr().err
    envelope.write_text("{not json")
    assert main(["verify", str(envelope), "--key", str(tmp_path / "k" / "remnant.pub")]) == 2


def test_example_statement_signs_verifies_and_validates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """K5 on the real example: sign → verify gives back the conformant statement; a one-byte change fails."""
    keys = tmp_path / "k"
    statement = tmp_path / "example.json"
    assert main(["keys", "generate", "--out", str(keys)]) == 0
    assert main(["statement", "example", "--out", str(statement)]) == 0
    assert main(["sign", str(statement), "--key", str(keys / "remnant.key")]) == 0
    envelope = json.loads((tmp_path / "example.dsse.json").read_text())
    predicate = verify_envelope(envelope, load_public_key(keys / "remnant.pub"))["predicate"]
    assert predicate == json.loads(statement.read_text())
    capsys.readouterr()
    assert main(["validate", str(statement)]) == 0
    payload = base64.b64decode(envelope["payload"])
    index = payload.index(b'"verdict":"removed"') + len(b'"verdict":"')
    tampered = payload[:index] + b"R" + payload[index + 1 :]  # "removed" → "Removed": one byte
    with pytest.raises(SignatureError):
        verify_envelope(
            dict(envelope, payload=base64.b64encode(tampered).decode()), load_public_key(keys / "remnant.pub")
        )
