"""Pack digests: per-item sha256 over canonical JSON (RFC 8785), rolled up with the manifest (Z1, R23).

Any change to any item, or to any manifest field other than the digest itself, changes the pack digest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from remnant.statement.canonical import canonical_sha256


def item_digest(item: Mapping[str, object]) -> str:
    """sha256 of one item's canonical JSON."""
    return canonical_sha256(dict(item))


def pack_digest(manifest: Mapping[str, object], item_digests: Iterable[str]) -> str:
    """Roll up the manifest (without ``digest``) and the ordered per-item digests into the pack digest."""
    body = {k: v for k, v in manifest.items() if k != "digest"}
    return "sha256:" + canonical_sha256({"manifest": body, "items": list(item_digests)})
