"""Reports from run folders: read ``statement.json`` and ``manifest.json`` and write the HTML beside them.

A run folder (``remnant assess --out RUN``) holds ``statement.json``, optionally ``statement.dsse.json`` (K5) and
``manifest.json`` (R23), whose results carry the relearning curves (C-W5). The customer register needs the target
pack to know which strings to redact (R18): it is read from ``--pack``, else from the manifest's recorded pack
location; without it the customer report withholds the claim and other free text instead of guessing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from remnant.errors import ConfigError
from remnant.report.redact import canary_strings
from remnant.report.render import ReportEntry, render_comparison, write_html
from remnant.report.samples import SampleTable
from remnant.run_manifest import (  # noqa: F401  (re-exported)
    CUSTOMER_FILE,
    ENVELOPE_FILE,
    MANIFEST_FILE,
    REPORT_FILE,
    STATEMENT_FILE,
    RunManifest,
    check_manifest_ref,
    file_ref,
    load_json_model,
    load_manifest,
)
from remnant.statement.absent import Absent
from remnant.statement.schema import ConformanceStatement


def load_entry(run: str | Path, *, label: str | None = None) -> ReportEntry:
    """A :class:`ReportEntry` from a run folder (statement required; manifest and envelope when present)."""
    folder = Path(run)
    statement_path = folder / STATEMENT_FILE
    if not statement_path.is_file():
        raise ConfigError(
            f"{folder}: no {STATEMENT_FILE} (run `remnant assess` or `remnant recompute` first)"
        )
    statement = load_json_model(statement_path, ConformanceStatement, requirement="K4")
    manifest_path = folder / MANIFEST_FILE
    manifest = load_manifest(manifest_path) if manifest_path.is_file() else None
    matches: bool | None = None
    if manifest is not None and not isinstance(statement.manifest_ref, Absent):
        matches = check_manifest_ref(manifest_path, statement.manifest_ref)
    envelope = folder / ENVELOPE_FILE
    signed = envelope.is_file()
    samples, samples_note = load_samples(folder, manifest)
    return ReportEntry(
        statement=statement,
        curves=tuple(manifest.results.curves) if manifest is not None else (),
        manifest=manifest,
        label=label or folder.resolve().name,
        statement_file=STATEMENT_FILE,
        envelope_file=ENVELOPE_FILE if signed else None,
        statement_digest=file_ref(statement_path),
        manifest_matches=matches,
        envelope_matches=envelope_carries(envelope, statement_path) if signed else None,
        samples=samples,
        samples_note=samples_note,
    )


def load_samples(folder: Path, manifest: RunManifest | None) -> tuple[tuple[SampleTable, ...], str | None]:
    """The run's per-item samples (technical report only, R18) and a sentence on what is missing. Samples are an
    aid to reading: unreadable records or an unreadable pack leave them out with the reason (the records' own
    checks are ``remnant verify``'s), never the report."""
    from remnant.errors import RemnantError
    from remnant.packs import load_pack
    from remnant.records import RECORDS_FILE, Observation, RecordStore
    from remnant.report.samples import pack_items, sample_tables

    records = folder / RECORDS_FILE
    if not records.is_file():
        return (), f"no per-item samples: {records} is absent"
    try:
        observations = [r for r in RecordStore(records).read() if isinstance(r, Observation)]
    except RemnantError as exc:
        return (), f"no per-item samples: {exc}"
    if not observations:
        return (), f"no per-item samples: {records} holds no observation"
    location = manifest.pack.location if manifest is not None else None
    try:
        if location is None:
            raise ConfigError("the manifest records no pack location")
        items = pack_items(load_pack(location))
    except RemnantError as exc:
        return sample_tables(
            observations, {}
        ), f"prompts and answers not shown, the pack is unreadable: {exc}"
    return sample_tables(observations, items), None


def envelope_carries(envelope: Path, statement: Path) -> bool:
    """Whether the envelope's signed payload is the statement in ``statement`` (K5), the signature unchecked (no
    key here): an envelope left from an earlier run, or one about another statement, does not make this one
    signed."""
    from remnant.errors import SignatureError
    from remnant.jsonio import read_json
    from remnant.statement.canonical import canonical_json
    from remnant.statement.dsse import carried_predicate

    try:
        carried = carried_predicate(read_json(envelope, requirement="K5"))
        return canonical_json(carried) == canonical_json(read_json(statement, requirement="K4"))
    except (ConfigError, SignatureError):  # unreadable or foreign: it carries nothing about this statement
        return False


def _canaries(entries: Sequence[ReportEntry], pack_dirs: Sequence[Path]) -> frozenset[str] | None:
    """The union of the canary strings of every pack involved; None when any pack cannot be read (withhold)."""
    from remnant.packs import load_pack

    dirs = list(pack_dirs)
    if not dirs:
        for entry in entries:
            location = entry.manifest.pack.location if entry.manifest is not None else None
            if location is None or not Path(location).is_dir():
                return None
            dirs.append(Path(location))
    found: set[str] = set()
    for directory in dict.fromkeys(dirs):
        found |= canary_strings(load_pack(directory))
    return frozenset(found)


def report_runs(
    runs: Sequence[str | Path],
    *,
    customer: bool = False,
    out: str | Path | None = None,
    packs: Sequence[str | Path] = (),
    labels: Sequence[str] | None = None,
    title: str | None = None,
) -> Path:
    """Render one run (or compare several) and write the HTML; returns the path written.

    One run: ``RUN/report.html`` or ``RUN/report-customer.html`` unless ``out`` is given. Several: ``out`` is
    required (a comparison belongs to none of them).
    """
    if not runs:
        raise ConfigError("report: no run folder given")
    if len(runs) > 1 and out is None:
        raise ConfigError("report: comparing several runs needs --out FILE")
    if labels is not None and len(labels) != len(runs):
        raise ConfigError(f"report: {len(labels)} labels for {len(runs)} runs")
    entries = [load_entry(run, label=labels[i] if labels else None) for i, run in enumerate(runs)]
    canaries = _canaries(entries, [Path(p) for p in packs]) if customer else None
    html = render_comparison(entries, customer=customer, canaries=canaries, title=title)
    target = Path(out) if out is not None else Path(runs[0]) / (CUSTOMER_FILE if customer else REPORT_FILE)
    return write_html(target, html)
