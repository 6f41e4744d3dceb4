"""The run manifest (R23-R25), under its old name: the definitions live in :mod:`remnant.run_manifest`.

The manifest moved into the pure core (no torch) because both ``assess`` (which writes it) and ``report``
(which reads it) need it, and ``assess`` also calls ``report``: kept here, it made the two packages import
each other.
"""

from __future__ import annotations

from remnant.run_manifest import (
    ADMITTED,
    MANIFEST_FILE,
    MANIFEST_SCHEMA_VERSION,
    RECORDED_PACKAGES,
    ComponentRecord,
    Environment,
    ModelRecord,
    PackRecord,
    Precision,
    PrecisionReduction,
    PrecisionWarning,
    PreregRecord,
    RecordsChain,
    Reproduction,
    Results,
    RunManifest,
    build_manifest,
    canonical_digest,
    capture_environment,
    check_manifest_ref,
    component_record,
    gguf_origin,
    load_json_model,
    load_manifest,
    manifest_bytes,
    manifest_ref,
    pack_record,
    precision_warnings,
    sha256_hex,
    write_manifest,
)

__all__ = [
    "ADMITTED",
    "ComponentRecord",
    "Environment",
    "MANIFEST_FILE",
    "MANIFEST_SCHEMA_VERSION",
    "ModelRecord",
    "PackRecord",
    "Precision",
    "PrecisionReduction",
    "PrecisionWarning",
    "PreregRecord",
    "RECORDED_PACKAGES",
    "RecordsChain",
    "Reproduction",
    "Results",
    "RunManifest",
    "build_manifest",
    "canonical_digest",
    "capture_environment",
    "check_manifest_ref",
    "component_record",
    "gguf_origin",
    "load_json_model",
    "load_manifest",
    "manifest_bytes",
    "manifest_ref",
    "pack_record",
    "precision_warnings",
    "sha256_hex",
    "write_manifest",
]
