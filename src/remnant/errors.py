"""The exception tree of remnant.

Every error a user can cause is a :class:`RemnantError`; the command line turns it into a one-line message and
exit code 2 (bad input or usage), except an :class:`IntegrityError`: a check that ran and failed (exit 1).
Anything else escaping is a bug. Beyond this module, :class:`remnant.records.RecordIntegrityError` (a
:class:`RecordError` and an :class:`IntegrityError`: records edited, inserted, deleted or reordered, R23) and
:class:`remnant.runlock.FolderInUse` (a :class:`RecordError`: another process holds the folder's lock, R23).
"""

from __future__ import annotations


class RemnantError(Exception):
    """Base class of every error remnant raises on purpose.

    ``requirement`` names the Standard's requirement id the error is about, when there is one (e.g. ``"R14"``).
    """

    def __init__(self, message: str, *, requirement: str | None = None) -> None:
        super().__init__(message)
        self.requirement = requirement

    def __str__(self) -> str:
        base = super().__str__()
        if self.requirement and f"({self.requirement})" not in base:
            return f"{base} ({self.requirement})"
        return base


class ConfigError(RemnantError):
    """A configuration, fact file or statement is malformed; the message names file, field and requirement."""


class PreregError(ConfigError):
    """Pre-registration is missing or a frozen field changed without a recorded deviation (R14, R15)."""


class PackError(RemnantError):
    """A target pack is malformed, its splits overlap, or its probe set is contaminated (R16, R17, D1-D5)."""


class ModelError(RemnantError):
    """A model cannot be loaded safely or at all (pickled weights, remote code, missing files, no network)."""


class UnsupportedArchitecture(ModelError):
    """The decoder blocks, final norm or unembedding of this architecture cannot be resolved without guessing."""


class RecordError(RemnantError):
    """A records file is torn, carries an unknown schema version, or would be rewritten instead of appended."""


class IntegrityError(RemnantError):
    """Inputs that read fine contradict themselves or what was pinned: a check ran and failed (exit 1)."""


class SignatureError(RemnantError):
    """A DSSE envelope does not verify: wrong key, altered payload, or malformed envelope (K5)."""


class DivergedError(RemnantError):
    """Training produced a non-finite or exploding loss; carries the step and the reason.

    The assessment records the cell as *diverged* and carries on with its other cells (Annex B.6).
    """

    def __init__(self, message: str, *, step: int, reason: str) -> None:
        super().__init__(message)
        self.step = step
        self.reason = reason


__all__ = [
    "ConfigError",
    "DivergedError",
    "IntegrityError",
    "ModelError",
    "PackError",
    "PreregError",
    "RecordError",
    "RemnantError",
    "SignatureError",
    "UnsupportedArchitecture",
]
