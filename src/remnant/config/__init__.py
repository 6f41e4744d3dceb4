"""The assessment configuration: a TOML file read into pydantic models (docs/config.md).

Every field's description ends with the requirement it serves, e.g. ``(R7)``; :func:`load_config` turns any
problem into one :class:`~remnant.errors.ConfigError` naming the file, the dotted field and that requirement::

    config.toml: field 'claim.process' missing (R1c)

Paths inside the file (pack folder, model folders, signing key) are kept as written and resolved against the
config file's folder by :meth:`AssessmentConfig.resolve`; whether they exist is checked by the stage that uses
them, so a config can be validated and pre-registered on a machine that holds no model.

``trust_remote_code`` is refused wherever it appears (R2, R23): remnant never runs code shipped with a model.

One module per concept; every name is imported from here (``remnant.config``):

- :mod:`~remnant.config.fields`: shared field types, the strict base model, :class:`RuleViolation`;
- :mod:`~remnant.config.claim`: the claim and its target (R1, R2);
- :mod:`~remnant.config.models`: control, pre-removal and post-removal models (R1-R3);
- :mod:`~remnant.config.measure`: utility and the scored probe splits (R9, R14, R16);
- :mod:`~remnant.config.attacks`: the attack battery and relearning (C-Q1, C-W1..C-W6);
- :mod:`~remnant.config.classd`: the Class D bar and battery (D-2 to D-5.3);
- :mod:`~remnant.config.audits`: the white-box audits, supplementary and never adjudicating (C-H6, C-H7);
- :mod:`~remnant.config.seeds`: the master seed (:func:`derive_seed` lives beside the canonical JSON it hashes,
  :mod:`remnant.statement.canonical`, so packs mint with it too; R23);
- :mod:`~remnant.config.assessment`: :class:`AssessmentConfig`, presets and cross-section rules (R14, R21);
- :mod:`~remnant.config.digest`: the pre-registered values and their digest (R14);
- :mod:`~remnant.config.pack_fit`: does a pack hold every split the config uses (R10, R16, C-W6);
- :mod:`~remnant.config.loading`: :func:`load_config` and :func:`parse_config`, file-and-field errors.
"""

from __future__ import annotations

from remnant.config.assessment import PRESETS, AssessmentConfig
from remnant.config.assessment import Signing as Signing
from remnant.config.attacks import REQUIRED_INFERENCE_ATTACKS, Attack, Attacks, Relearning
from remnant.config.audits import AUDIT_TABLES, Audits, AuditTable, audit_name
from remnant.config.claim import Claim
from remnant.config.claim import MintSpec as MintSpec
from remnant.config.claim import Target as Target
from remnant.config.classd import ClassD, ClassDBattery
from remnant.config.digest import PREREGISTERED_KEYS as PREREGISTERED_KEYS
from remnant.config.digest import config_digest, preregistered
from remnant.config.fields import MAX_SEED
from remnant.config.fields import Name as Name
from remnant.config.fields import Params as Params
from remnant.config.fields import RuleViolation as RuleViolation
from remnant.config.fields import Text as Text
from remnant.config.fields import Unit as Unit
from remnant.config.loading import _field_rule as _field_rule
from remnant.config.loading import load_config, parse_config
from remnant.config.measure import TRAINING_SPLITS as TRAINING_SPLITS
from remnant.config.measure import Probe as Probe
from remnant.config.measure import Utility as Utility
from remnant.config.models import ControlModel as ControlModel
from remnant.config.models import InstallBudget as InstallBudget
from remnant.config.models import Models as Models
from remnant.config.models import PostRemoval as PostRemoval
from remnant.config.models import PreRemoval as PreRemoval
from remnant.config.seeds import Seeds as Seeds
from remnant.statement.canonical import derive_seed

__all__ = [
    "AssessmentConfig",
    "Attack",
    "Attacks",
    "AUDIT_TABLES",
    "AuditTable",
    "Audits",
    "Claim",
    "ClassD",
    "ClassDBattery",
    "MAX_SEED",
    "PRESETS",
    "audit_name",
    "REQUIRED_INFERENCE_ATTACKS",
    "Relearning",
    "config_digest",
    "derive_seed",
    "load_config",
    "parse_config",
    "preregistered",
]
