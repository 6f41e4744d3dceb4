"""The master seed and the per-stage seeds derived from it (no global seeding; R23, R24)."""

from __future__ import annotations

import hashlib

from pydantic import Field

from remnant.config.fields import MAX_SEED, ConfigModel
from remnant.statement.canonical import canonical_json


class Seeds(ConfigModel):
    """One master seed; every stage derives its own with :func:`derive_seed` (R23, R24)."""

    master: int = Field(ge=0, le=MAX_SEED, description="Master seed all stage seeds derive from (R23).")


def derive_seed(master: int, *path: str | int) -> int:
    """The seed of one stage or item, derived from the master seed (no global seeding; R23, R24).

    ``sha256(canonical_json([master, *path]))``, first 8 bytes big-endian, shifted right by 11 bits: an integer in
    ``[0, 2**53)``, so it survives JSON (I-JSON) and seeds ``random.Random``, ``numpy`` and ``torch.Generator``
    alike. ``derive_seed(7, "relearn", "budget=16")`` names its stage by path; ``1`` and ``"1"`` differ.
    """
    digest = hashlib.sha256(canonical_json([master, *path])).digest()
    return int.from_bytes(digest[:8], "big") >> 11
