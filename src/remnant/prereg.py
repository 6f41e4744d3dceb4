"""Pre-registration: freeze what R14 lists before the first attack, and hold every later run to it (R14, R15).

``RUN/prereg.json`` holds the pre-registered values (:func:`remnant.config.preregistered`), the pack digest when
the pack already exists, a UTC timestamp, the Standard and harness versions, and ``digest``::

    digest = "sha256:" + sha256(canonical_json({"pack_digest": ..., "values": ...}))

The digest covers the values only, not the timestamp or the harness version, so the same config freezes to the
same digest on every machine, and any changed value changes it. A frozen file is never rewritten. A config
whose pre-registered values differ from the frozen ones is refused unless each difference is explained by a
chain of recorded deviations (field, old, new, reason, stage) in ``RUN/deviations.jsonl`` (R15).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from remnant import HARNESS_VERSION, STANDARD_VERSION
from remnant.atomic import json_text, write_atomic
from remnant.config import AssessmentConfig, preregistered
from remnant.errors import ConfigError, PackError, PreregError
from remnant.jsonio import read_json
from remnant.records import DEVIATIONS_FILE, Deviation, RecordStore, utc_now
from remnant.standard.derive import follow_deviations
from remnant.statement.canonical import canonical_json, canonical_sha256

PREREG_FILE = "prereg.json"


class PreRegistration(BaseModel):
    """The frozen pre-registration of one run (R14), as written to ``RUN/prereg.json``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = Field(default=1, description="Schema version of prereg.json.")
    standard_version: str = Field(description="Standard version the values are registered under (Z1).")
    harness_version: str = Field(description="remnant version that froze them (Z1).")
    registered_at: str = Field(description="UTC time the values were frozen, before any attack (R14).")
    values: dict[str, Any] = Field(
        description="The pre-registered values (R14): see remnant.config.preregistered."
    )
    pack_digest: str | None = Field(
        description="Digest of the pack fixing the probe sets, when it existed (R14)."
    )
    digest: str = Field(description="sha256 of the canonical JSON of values and pack digest (R14).")

    def statement_fields(self) -> dict[str, object]:
        """The ``pre_registration`` block of a conformance statement (Annex E, K4)."""
        utility = self.values["utility"]
        return {
            "gating_metric": self.values["gating_metric"],
            "tau": self.values["tau"],
            "utility_metric": " / ".join(utility["metrics"]),
            "phi": utility["phi"],
            "min_n": self.values["min_n"],
            "registered_at": self.registered_at,
            "digest": self.digest,
        }


def prereg_digest(values: Mapping[str, object], pack_digest: str | None) -> str:
    """``sha256:`` + hex sha256 of ``canonical_json({"pack_digest": ..., "values": ...})`` (RFC 8785)."""
    return "sha256:" + canonical_sha256({"pack_digest": pack_digest, "values": values})


def _pack_digest_of(cfg: AssessmentConfig) -> str | None:
    """The digest of the config's pack folder, verified by loading it; None for a pack still to be minted."""
    if cfg.target.pack is None:
        return None
    from remnant.packs.schema import load_pack

    folder = cfg.resolve(cfg.target.pack)
    try:
        pack = load_pack(folder)
    except PackError as exc:
        where = cfg.source or "config"
        raise PreregError(
            f"{where}: field 'target.pack': the probe sets must exist to be pre-registered: {exc}",
            requirement="R14",
        ) from None
    from remnant.config.pack_fit import check_pack_fits

    check_pack_fits(cfg, pack, folder)  # every split the config uses holds items (R10, R16, C-W6)
    return pack.digest


def freeze(
    cfg: AssessmentConfig,
    out_dir: str | Path,
    *,
    pack_digest: str | None = None,
    registered_at: str | None = None,
) -> PreRegistration:
    """Write ``out_dir/prereg.json`` once (R14) and return it.

    ``pack_digest`` defaults to the digest of ``target.pack`` (loaded and verified); a pack to be minted is fixed
    by its mint spec and seed instead. Same values again: the existing file, unchanged (:func:`freeze_values`).
    """
    if pack_digest is None:
        pack_digest = _pack_digest_of(cfg)
    return freeze_values(preregistered(cfg), out_dir, pack_digest=pack_digest, registered_at=registered_at)


def freeze_values(
    values: dict[str, Any],
    out_dir: str | Path,
    *,
    pack_digest: str | None = None,
    registered_at: str | None = None,
) -> PreRegistration:
    """Write ``out_dir/prereg.json`` for ``values`` once and return it: the one freezer, behind :func:`freeze`
    (an assessment's R14 values) and the research studies' decision rules (``remnant.studies``, R14 applied to
    research, docs/studies.md). Same values again: the existing file, unchanged; different values:
    PreregError."""
    prereg = PreRegistration(
        standard_version=STANDARD_VERSION,
        harness_version=HARNESS_VERSION,
        registered_at=registered_at or utc_now(),
        values=values,
        pack_digest=pack_digest,
        digest=prereg_digest(values, pack_digest),
    )
    run = Path(out_dir)
    path = run / PREREG_FILE
    if path.exists():
        existing = load_prereg(run)
        if existing.digest == prereg.digest:
            return existing
        changed = ", ".join(f"'{f}'" for f, _, _ in _changes(existing, values, pack_digest)) or "(none)"
        raise PreregError(
            f"{path}: already frozen with different values (changed: {changed}); a pre-registration is never "
            "rewritten (R14): record each change as a deviation (R15) or use a new run folder",
            requirement="R15",
        )
    try:
        run.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PreregError(
            f"{run}: cannot create the run folder: {exc.strerror or exc}", requirement="R14"
        ) from None
    try:  # exclusive: a file that appeared meanwhile is never replaced
        write_atomic(path, json_text(prereg.model_dump(mode="json")), exclusive=True)
    except FileExistsError:
        raise PreregError(f"{path}: appeared while freezing; not overwritten", requirement="R14") from None
    return prereg


def load_prereg(run_dir: str | Path) -> PreRegistration:
    """Read ``RUN/prereg.json`` and check its digest; PreregError when missing, malformed or edited."""
    path = Path(run_dir) / PREREG_FILE
    if not path.is_file():
        raise PreregError(
            f"{path}: missing; run `remnant preregister CONFIG --out {run_dir}` before any attack",
            requirement="R14",
        )
    try:
        prereg = PreRegistration.model_validate(read_json(path, requirement="R14"))
    except (ConfigError, ValidationError) as exc:
        raise PreregError(f"{path}: not a readable pre-registration: {exc}", requirement="R14") from None
    if prereg_digest(prereg.values, prereg.pack_digest) != prereg.digest:
        raise PreregError(
            f"{path}: digest does not match its values: edited after freezing", requirement="R14"
        )
    return prereg


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


_ABSENT: object = _Absent()


def _same(a: object, b: object) -> bool:
    """JSON equality (1 == 1.0, key order ignored); an absent field equals null."""
    a = None if a is _ABSENT else a
    b = None if b is _ABSENT else b
    return canonical_json(a) == canonical_json(b)


def diff_values(old: object, new: object, prefix: str = "") -> list[tuple[str, object, object]]:
    """Dotted paths at which two JSON values differ, with both sides (dicts descend; lists compare whole)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[tuple[str, object, object]] = []
        for key in sorted(set(old) | set(new)):
            path = f"{prefix}.{key}" if prefix else key
            out += diff_values(old.get(key, _ABSENT), new.get(key, _ABSENT), path)
        return out
    return [] if _same(old, new) else [(prefix, old, new)]


def _changes(
    prereg: PreRegistration, values: Mapping[str, object], pack_digest: str | None
) -> list[tuple[str, object, object]]:
    changes = diff_values(prereg.values, values)
    if pack_digest is not None and pack_digest != prereg.pack_digest:
        changes.append(("pack_digest", prereg.pack_digest, pack_digest))
    return changes


def _show(value: object) -> str:
    return "<absent>" if value is _ABSENT else json.dumps(value, ensure_ascii=False)


def check_against(
    cfg: AssessmentConfig,
    prereg: PreRegistration,
    deviations: Iterable[Deviation] = (),
    *,
    pack_digest: str | None = None,
) -> list[Deviation]:
    """Hold a config to a frozen pre-registration (R14, R15); return the deviations that explain its changes.

    Each changed field must be reached from its frozen value by the recorded deviations for that field, applied
    in record order (old → new, possibly in several steps). Any change not so explained raises PreregError
    naming the field, the frozen and the new value. ``pack_digest``, when given, is checked the same way under
    the field name ``pack_digest``.
    """
    where = str(cfg.source or "config")
    return check_values(preregistered(cfg), prereg, deviations, pack_digest=pack_digest, where=where)


def check_values(
    values: Mapping[str, object],
    prereg: PreRegistration,
    deviations: Iterable[Deviation] = (),
    *,
    pack_digest: str | None = None,
    where: str = "config",
) -> list[Deviation]:
    """:func:`check_against` for plain values (a study's config): each change from the frozen values must be
    explained by the recorded deviations (R15); ``where`` names the source in the error."""
    recorded = list(deviations)
    used: list[Deviation] = []
    refused: list[str] = []
    for field, old, new in _changes(prereg, values, pack_digest):
        value, applied = follow_deviations(field, old, recorded, _same)
        if _same(value, new):
            used += applied
        else:
            refused.append(f"'{field}' changed from {_show(old)} to {_show(new)}")
    used_ids = {id(d) for d in used}
    used = [d for d in recorded if id(d) in used_ids]  # record order, as the report lists them (R15)
    if refused:
        raise PreregError(
            f"{where}: pre-registered field {'; '.join(refused)}, against prereg.json frozen before the first "
            "attack (R14); record a deviation with its reason and stage, or restore the frozen value (R15)",
            requirement="R15",
        )
    return used


def record_deviation(
    run_dir: str | Path, field: str, old: object, new: object, reason: str, stage: str
) -> Deviation:
    """Append a deviation (R15) to ``RUN/deviations.jsonl``; the field must be one the run pre-registered.

    Holds the run folder's lock (R23, :mod:`remnant.runlock`): a deviation is not appended to a run another
    process is assessing or recomputing (its statement would not say it); that process is named instead."""
    from remnant.runlock import held

    run = Path(run_dir)
    load_prereg(run)  # R14, before the lock: a folder that is no pre-registered run is not locked
    with held(run, purpose="remnant study deviation", create=False):
        return _append_deviation(run, field, old, new, reason, stage)


def _append_deviation(run: Path, field: str, old: object, new: object, reason: str, stage: str) -> Deviation:
    prereg = load_prereg(run)
    if field != "pack_digest" and field.split(".")[0] not in prereg.values:
        raise PreregError(f"{run / PREREG_FILE}: {field!r} is not a pre-registered field", requirement="R15")
    try:
        deviation = Deviation(field=field, old=old, new=new, reason=reason.strip(), stage=stage.strip())
    except ValidationError as exc:
        raise PreregError(f"deviation of {field!r}: {exc.errors()[0]['msg']}", requirement="R15") from None
    RecordStore(run / DEVIATIONS_FILE).append(deviation)
    return deviation


def load_deviations(run_dir: str | Path) -> list[Deviation]:
    """Every deviation recorded for the run, in order (R15)."""
    return [r for r in RecordStore(Path(run_dir) / DEVIATIONS_FILE).read() if isinstance(r, Deviation)]


def require_prereg(
    cfg: AssessmentConfig, run_dir: str | Path, *, pack_digest: str | None = None
) -> tuple[PreRegistration, list[Deviation]]:
    """What a stage calls before running: the frozen pre-registration and the deviations in force (R14, R15)."""
    prereg = load_prereg(run_dir)
    return prereg, check_against(cfg, prereg, load_deviations(run_dir), pack_digest=pack_digest)


def deviations_for_statement(deviations: Sequence[Deviation]) -> list[dict[str, object]]:
    """Deviations as the statement's ``deviations`` list (field, old, new, reason, stage; R15, K4)."""
    return [d.model_dump(include={"field", "old", "new", "reason", "stage"}) for d in deviations]


__all__ = [
    "PREREG_FILE",
    "Deviation",
    "PreRegistration",
    "check_against",
    "check_values",
    "deviations_for_statement",
    "diff_values",
    "freeze",
    "freeze_values",
    "load_deviations",
    "load_prereg",
    "prereg_digest",
    "record_deviation",
    "require_prereg",
]
