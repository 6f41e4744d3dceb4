"""Hostile DSSE envelopes and keys given to ``remnant verify ENVELOPE --key PUB`` (K5).

Exit codes (V1): 1 when the envelope is readable as a DSSE envelope but a K5 check on it fails (no
signature verifies under the key, another payload type, a signed payload that is not the canonical JSON of an
in-toto Statement v1, a subject digest that is not the predicate's); 2 when the input cannot be read as an
envelope or a key at all (not JSON, not an object, a field missing or mistyped, payload not base64, a folder, an
empty file, a key that is not an Ed25519 public key). Every message names the envelope (or the key) and K5.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from harness import Hostile, check, ids

from remnant.statement.canonical import canonical_json
from remnant.statement.dsse import PAYLOAD_TYPE, intoto_statement, pae, sign_statement
from remnant.statement.keys import key_id

STATEMENT = {"standard_version": "0.3", "verdict": "removed", "n": 300, "rate": 0.01}
SIGNER = Ed25519PrivateKey.generate()
ATTACKER = Ed25519PrivateKey.generate()


def _pem(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _canonical() -> bytes:
    return canonical_json(intoto_statement(STATEMENT, "statement.json"))


def _envelope_over(
    payload: bytes, *, key: Ed25519PrivateKey = SIGNER, payload_type: str = PAYLOAD_TYPE
) -> dict[str, Any]:
    """A DSSE envelope whose signature over ``payload`` by ``key`` is good."""
    sig = key.sign(pae(payload_type, payload))
    return {
        "payloadType": payload_type,
        "payload": base64.b64encode(payload).decode(),
        "signatures": [{"keyid": key_id(key.public_key()), "sig": base64.b64encode(sig).decode()}],
    }


def _good() -> dict[str, Any]:
    return sign_statement(STATEMENT, SIGNER, name="statement.json")


def _spoofed() -> dict[str, Any]:
    """The attacker's good signature over a canonical payload, under the signer's key id."""
    envelope = _envelope_over(_canonical(), key=ATTACKER)
    envelope["signatures"][0]["keyid"] = key_id(SIGNER.public_key())
    return envelope


def _flip(text: str, index: int) -> str:
    raw = bytearray(base64.b64decode(text))
    raw[index] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


def _verify(
    content: Callable[[], dict[str, Any] | list[Any] | bytes], *, key: bytes | None = None
) -> Callable[[Path], tuple[list[str], str]]:
    """A case: write the envelope (a JSON value, or raw bytes) and the signer's public key; name the envelope."""

    def build(tmp: Path) -> tuple[list[str], str]:
        envelope, pub = tmp / "statement.dsse.json", tmp / "remnant.pub"
        value = content()
        envelope.write_bytes(value if isinstance(value, bytes) else json.dumps(value).encode())
        pub.write_bytes(_pem(SIGNER) if key is None else key)
        return ["verify", str(envelope), "--key", str(pub)], str(envelope)

    return build


def _bad_key(write: Callable[[Path], None]) -> Callable[[Path], tuple[list[str], str]]:
    """A case: a good envelope and a key path that is not a readable Ed25519 public key; name the key."""

    def build(tmp: Path) -> tuple[list[str], str]:
        envelope, pub = tmp / "statement.dsse.json", tmp / "remnant.pub"
        envelope.write_text(json.dumps(_good()))
        write(pub)
        return ["verify", str(envelope), "--key", str(pub)], str(pub)

    return build


def _folder_envelope(tmp: Path) -> tuple[list[str], str]:
    folder, pub = tmp / "envelope.dsse.json", tmp / "remnant.pub"
    folder.mkdir()
    pub.write_bytes(_pem(SIGNER))
    return ["verify", str(folder), "--key", str(pub)], str(folder)


def _missing_envelope(tmp: Path) -> tuple[list[str], str]:
    pub = tmp / "remnant.pub"
    pub.write_bytes(_pem(SIGNER))
    return ["verify", str(tmp / "absent.dsse.json"), "--key", str(pub)], str(tmp / "absent.dsse.json")


def _with_statement(edit: Callable[[dict[str, Any]], None]) -> Callable[[], dict[str, Any]]:
    """A canonical, correctly signed payload whose in-toto statement was edited before signing."""

    def content() -> dict[str, Any]:
        statement = intoto_statement(STATEMENT, "statement.json")
        edit(statement)
        return _envelope_over(canonical_json(statement))

    return content


def _ec_public_pem(path: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    path.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


def _private_pem(path: Path) -> None:
    path.write_bytes(
        SIGNER.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )


def _key_folder(path: Path) -> None:
    path.mkdir()


FAILED, UNREADABLE = 1, 2

CASES: list[Hostile] = [
    # -- readable envelopes whose K5 check fails: exit 1 --------------------------------------------------------
    Hostile("wrong-key", _verify(_good, key=_pem(ATTACKER)), "K5", FAILED),
    Hostile(
        "payload-byte-altered",
        _verify(lambda: dict(_good(), payload=_flip(_good()["payload"], 40))),
        "K5",
        FAILED,
    ),
    Hostile(
        "signature-byte-altered",
        _verify(
            lambda: dict(
                _good(),
                signatures=[dict(_good()["signatures"][0], sig=_flip(_good()["signatures"][0]["sig"], 3))],
            )
        ),
        "K5",
        FAILED,
    ),
    Hostile(
        "keyid-spoofed",  # the attacker signs and claims the signer's key id
        _verify(lambda: _spoofed()),
        "K5",
        FAILED,
    ),
    Hostile(
        "payload-type-changed", _verify(lambda: dict(_good(), payloadType="application/json")), "K5", FAILED
    ),
    Hostile(
        "payload-type-signed-as-other",
        _verify(lambda: _envelope_over(_canonical(), payload_type="application/vnd.other+json")),
        "K5",
        FAILED,
    ),
    Hostile(
        "payload-not-canonical-spaces",
        _verify(lambda: _envelope_over(json.dumps(intoto_statement(STATEMENT, "statement.json")).encode())),
        "K5",
        FAILED,
    ),
    Hostile(
        "payload-not-canonical-number",
        _verify(lambda: _envelope_over(_canonical().replace(b'"n":300', b'"n":300.0'))),
        "K5",
        FAILED,
    ),
    Hostile(
        "payload-not-canonical-escape",
        _verify(lambda: _envelope_over(_canonical().replace(b'"removed"', b'"\\u0072emoved"'))),
        "K5",
        FAILED,
    ),
    Hostile(
        "payload-duplicate-key",  # {"verdict": "hidden", "verdict": "removed"}: two readers, two verdicts
        _verify(
            lambda: _envelope_over(
                _canonical().replace(b'"verdict":"removed"', b'"verdict":"hidden","verdict":"removed"')
            )
        ),
        "K5",
        FAILED,
    ),
    Hostile(
        "payload-nan",
        _verify(lambda: _envelope_over(_canonical().replace(b'"rate":0.01', b'"rate":NaN'))),
        "K5",
        FAILED,
    ),
    Hostile(
        "payload-overflow",
        _verify(lambda: _envelope_over(_canonical().replace(b'"rate":0.01', b'"rate":1e999'))),
        "K5",
        FAILED,
    ),
    Hostile(
        "payload-nested-too-deep",
        _verify(lambda: _envelope_over(_canonical().replace(b'"n":300', b'"n":' + b"[" * 100 + b"]" * 100))),
        "K5",
        FAILED,
    ),
    Hostile(
        "payload-not-utf8",
        _verify(lambda: _envelope_over(_canonical().replace(b"removed", b"r\xe9moved"))),
        "K5",
        FAILED,
    ),
    Hostile("payload-not-json", _verify(lambda: _envelope_over(b"verdict: removed")), "K5", FAILED),
    Hostile("payload-not-in-toto", _verify(lambda: _envelope_over(canonical_json(STATEMENT))), "K5", FAILED),
    Hostile(
        "subject-digest-mismatch",
        _verify(_with_statement(lambda s: s["subject"][0]["digest"].update(sha256="0" * 64))),
        "K5",
        FAILED,
    ),
    Hostile(
        "subject-not-objects",
        _verify(_with_statement(lambda s: s.update(subject=["statement.json"]))),
        "K5",
        FAILED,
    ),
    Hostile(
        "predicate-not-object",
        _verify(_with_statement(lambda s: s.update(predicate="removed"))),
        "K5",
        FAILED,
    ),
    Hostile("no-signatures", _verify(lambda: dict(_good(), signatures=[])), "K5", FAILED),
    Hostile(
        "signature-not-base64",
        _verify(lambda: dict(_good(), signatures=[{"keyid": key_id(SIGNER.public_key()), "sig": "%%%"}])),
        "K5",
        FAILED,
    ),
    Hostile(
        "signature-too-short",
        _verify(
            lambda: dict(_good(), signatures=[{"keyid": "", "sig": base64.b64encode(b"x" * 10).decode()}])
        ),
        "K5",
        FAILED,
    ),
    # -- input that cannot be read as an envelope or a key: exit 2 ---------------------------------------------
    Hostile(
        "envelope-duplicate-key",
        _verify(lambda: json.dumps(_good())[:-1].encode() + b', "payloadType": "application/json"}'),
        "K5",
        UNREADABLE,
    ),
    Hostile("payload-not-base64", _verify(lambda: dict(_good(), payload="not base64!")), "K5", UNREADABLE),
    Hostile(
        "payload-base64-url-and-standard-mixed",
        _verify(lambda: dict(_good(), payload="-+" + _good()["payload"][2:])),
        "K5",
        UNREADABLE,
    ),
    Hostile(
        "payload-missing",
        _verify(lambda: {k: v for k, v in _good().items() if k != "payload"}),
        "K5",
        UNREADABLE,
    ),
    Hostile(
        "payload-type-not-string",
        _verify(lambda: dict(_good(), payloadType=["application/vnd.in-toto+json"])),
        "K5",
        UNREADABLE,
    ),
    Hostile(
        "signatures-not-list",
        _verify(lambda: dict(_good(), signatures=_good()["signatures"][0])),
        "K5",
        UNREADABLE,
    ),
    Hostile(
        "signature-entry-not-object", _verify(lambda: dict(_good(), signatures=["sig"])), "K5", UNREADABLE
    ),
    Hostile("envelope-not-json", _verify(lambda: b"{payload: x"), "K5", UNREADABLE),
    Hostile("envelope-array", _verify(lambda: [_good()]), "K5", UNREADABLE),
    Hostile(
        "envelope-nan",
        _verify(lambda: json.dumps(dict(_good(), extra=float("nan"))).encode()),
        "K5",
        UNREADABLE,
    ),
    Hostile(
        "envelope-nested-too-deep",
        _verify(lambda: b'{"x": ' + b"[" * 200 + b"]" * 200 + b"}"),
        "K5",
        UNREADABLE,
    ),
    Hostile(
        "envelope-not-utf8",
        _verify(lambda: json.dumps(_good()).encode().replace(b"{", b"\xff{", 1)),
        "K5",
        UNREADABLE,
    ),
    Hostile("envelope-empty-file", _verify(lambda: b""), "K5", UNREADABLE),
    Hostile("envelope-folder", _folder_envelope, "K5", UNREADABLE),
    Hostile("envelope-missing", _missing_envelope, "K5", UNREADABLE),
    Hostile("key-not-ed25519", _bad_key(_ec_public_pem), "K5", UNREADABLE),
    Hostile("key-is-private", _bad_key(_private_pem), "K5", UNREADABLE),
    Hostile("key-empty-file", _bad_key(lambda p: p.write_bytes(b"")), "K5", UNREADABLE),
    Hostile(
        "key-not-pem",
        _bad_key(lambda p: p.write_bytes(b"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA")),
        "K5",
        UNREADABLE,
    ),
    Hostile("key-folder", _bad_key(_key_folder), "K5", UNREADABLE),
]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_hostile_envelope(case: Hostile, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    check(case, tmp_path, capsys)


def test_enough_cases() -> None:
    assert len(CASES) >= 25
    assert {c.exit_code for c in CASES} == {FAILED, UNREADABLE}


def test_the_untouched_envelope_verifies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The cases' starting point verifies (exit 0), so each failure above is the edit's doing."""
    from remnant.cli import main

    argv, _ = _verify(_good)(tmp_path)
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["verified"] is True
    other = tmp_path / "other"
    other.mkdir()
    argv, _ = _verify(lambda: _envelope_over(_canonical()))(other)
    assert main(argv) == 0
