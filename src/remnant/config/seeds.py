"""The master seed; every stage derives its own from it with :func:`remnant.statement.canonical.derive_seed`
(no global seeding; R23, R24)."""

from __future__ import annotations

from pydantic import Field

from remnant.config.fields import MAX_SEED, ConfigModel


class Seeds(ConfigModel):
    """One master seed; every stage derives its own with :func:`derive_seed` (R23, R24)."""

    master: int = Field(ge=0, le=MAX_SEED, description="Master seed all stage seeds derive from (R23).")
