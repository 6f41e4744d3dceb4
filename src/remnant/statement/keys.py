"""Ed25519 signing keys for conformance statements (K5): generate, write (0600), load, key id."""

from __future__ import annotations

import hashlib
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from remnant.atomic import PRIVATE_MODE, write_atomic
from remnant.errors import SignatureError

PRIVATE_NAME = "remnant.key"
PUBLIC_NAME = "remnant.pub"


def generate_keypair(out_dir: Path) -> tuple[Path, Path]:
    """Write ``remnant.key`` (PEM PKCS8, mode 0600) and ``remnant.pub`` (PEM SubjectPublicKeyInfo) into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    private_path, public_path = out_dir / PRIVATE_NAME, out_dir / PUBLIC_NAME
    write_atomic(private_path, private_pem, mode=PRIVATE_MODE)
    write_atomic(public_path, public_pem)
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


def key_id(public_key: Ed25519PublicKey) -> str:
    """The DSSE ``keyid``: hex sha256 of the raw 32-byte public key."""
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()
