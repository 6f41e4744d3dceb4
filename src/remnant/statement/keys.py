"""Ed25519 signing keys for conformance statements (K5): generate, write (0600), load, key id."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from remnant.atomic import PRIVATE_MODE, write_atomic
from remnant.errors import ConfigError, SignatureError

PRIVATE_NAME = "remnant.key"
PUBLIC_NAME = "remnant.pub"


def generate_keypair(out_dir: Path) -> tuple[Path, Path]:
    """Write ``remnant.key`` (PEM PKCS8, mode 0600) and ``remnant.pub`` (PEM SubjectPublicKeyInfo) into ``out_dir``.

    A key pair already there is never replaced (K5): statements signed with the old key could no longer be
    re-signed, and a lost private key cannot be recovered. ConfigError before anything is written; the files are
    created exclusively, so a pair written meanwhile by another process is not replaced either.
    """
    private_path, public_path = out_dir / PRIVATE_NAME, out_dir / PUBLIC_NAME
    for existing in (private_path, public_path):
        if existing.exists() or existing.is_symlink():
            raise ConfigError(
                f"--out {out_dir}: {existing.name} already exists; a key is never replaced (choose another "
                "folder; nothing written)",
                requirement="K5",
            )
    out_dir.mkdir(parents=True, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    write_atomic(private_path, private_pem, mode=PRIVATE_MODE, exclusive=True)
    write_atomic(public_path, public_pem, exclusive=True)
    return private_path, public_path


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """Load an Ed25519 private key from a PEM PKCS8 file; SignatureError if it is not one."""
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise SignatureError(
            f"{path}: not a readable unencrypted PEM private key: {exc}", requirement="K5"
        ) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise SignatureError(f"{path}: key is not Ed25519", requirement="K5")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    """Load an Ed25519 public key from a PEM file; SignatureError if it is not one."""
    try:
        key = serialization.load_pem_public_key(path.read_bytes())
    except (OSError, ValueError, TypeError) as exc:
        raise SignatureError(f"{path}: not a readable PEM public key: {exc}", requirement="K5") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise SignatureError(f"{path}: key is not Ed25519", requirement="K5")
    return key


#: securesystemslib's key record for an Ed25519 key (its ``SSlibKey``): ``keytype`` and ``scheme`` both "ed25519".
ED25519 = "ed25519"


def key_id(public_key: Ed25519PublicKey) -> str:
    """The DSSE ``keyid``: securesystemslib's default (in-toto's and TUF's), the hex sha256 of the canonical JSON
    key record ``{"keytype": "ed25519", "keyval": {"public": <hex raw key>}, "scheme": "ed25519"}``, so its default
    ``Envelope.verify([SSlibKey.from_crypto(pub)], 1)`` finds remnant's signature (K5).

    The key id is an unauthenticated hint (DSSE): remnant itself verifies every signature over the PAE against
    the key it is given, whatever the ``keyid`` says (:func:`remnant.statement.dsse.verify_envelope`).
    """
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    record = {"keytype": ED25519, "keyval": {"public": raw.hex()}, "scheme": ED25519}
    # sorted keys, no whitespace: securesystemslib's canonical JSON, which for this all-ASCII record is exactly this
    canonical = json.dumps(record, sort_keys=True, separators=(",", ":")).encode("ascii")
    return hashlib.sha256(canonical).hexdigest()
