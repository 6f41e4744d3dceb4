"""The assessment configuration: a TOML file read into pydantic models (docs/config.md).

Every field's description ends with the requirement it serves, e.g. ``(R7)``; :func:`load_config` turns any
problem into one :class:`~remnant.errors.ConfigError` naming the file, the dotted field and that requirement::

    config.toml: field 'claim.process' missing (R1c)

Paths inside the file (pack folder, model folders, signing key) are kept as written and resolved against the
config file's folder by :meth:`AssessmentConfig.resolve`; whether they exist is checked by the stage that uses
them, so a config can be validated and pre-registered on a machine that holds no model.

``trust_remote_code`` is refused wherever it appears (R2, R23): remnant never runs code shipped with a model.
:func:`derive_seed` lives beside the canonical JSON it hashes (:mod:`remnant.statement.canonical`), so packs mint
with it too (R23).
"""

from __future__ import annotations

from remnant.config.assessment import AssessmentConfig
from remnant.config.attacks import Relearning
from remnant.config.audits import AUDIT_TABLES, AuditTable, audit_name
from remnant.config.digest import config_digest, preregistered
from remnant.config.loading import load_config, parse_config
from remnant.statement.canonical import derive_seed

__all__ = [
    "AUDIT_TABLES",
    "AssessmentConfig",
    "AuditTable",
    "Relearning",
    "audit_name",
    "config_digest",
    "derive_seed",
    "load_config",
    "parse_config",
    "preregistered",
]
