"""The values pre-registration freezes and their digest (R14)."""

from __future__ import annotations

from remnant import STANDARD_VERSION
from remnant.config.assessment import AssessmentConfig
from remnant.statement.canonical import canonical_sha256

#: Top-level config keys frozen by pre-registration (R14), beside ``target`` less its folder path.
PREREGISTERED_KEYS: tuple[str, ...] = (
    "claim",
    "class",
    "track",
    "gating_metric",
    "gating_justification",
    "tau",
    "utility",
    "probe",
    "attacks",
    "min_n",
    "evidence_rule",
    "seeds",
    "class_d",
    "preset",
)


def preregistered(cfg: AssessmentConfig) -> dict[str, object]:
    """The values R14 freezes (plus the claim, class, track, seeds, evidence rule and D-5.1 bar), as JSON.

    Model folders, dtype, device, signing and pack folder paths are left out: they say where things are, not
    what is claimed or measured, and model identity is recorded by weight digest elsewhere (R23). A hub id and
    its revision are frozen (``models``, only when a state names one, so other configs keep their digest): they
    name what is measured, and the weights they resolve to are still recorded by digest, with the snapshot's
    commit, when the run loads them (R23, R24).
    """
    dump = cfg.model_dump(mode="json", by_alias=True)
    target = {k: v for k, v in dump["target"].items() if k != "pack"}
    out = {key: dump[key] for key in PREREGISTERED_KEYS}
    out["target"] = target
    # Optional tables added after the first release are left out while unset, so a config that does not use
    # them keeps the digest it always had (R14); an absent field reads as null when values are compared.
    if out["probe"].get("attributes") is None:
        out["probe"] = {k: v for k, v in out["probe"].items() if k != "attributes"}
    if out.get("class_d") is not None and out["class_d"].get("battery") is None:
        out["class_d"] = {k: v for k, v in out["class_d"].items() if k != "battery"}
    hubs = {
        role: source
        for role, source in (
            ("control", cfg.models.control.hub_source()),
            ("pre_removal", cfg.models.pre_removal.hub_source()),
            ("post_removal", cfg.models.post_removal.hub_source()),
        )
        if source is not None
    }
    if hubs:
        out["models"] = hubs
    out["standard_version"] = STANDARD_VERSION
    return out


def config_digest(cfg: AssessmentConfig) -> str:
    """``sha256:`` + hex sha256 of the canonical JSON (RFC 8785) of :func:`preregistered` (R14)."""
    return "sha256:" + canonical_sha256(preregistered(cfg))
