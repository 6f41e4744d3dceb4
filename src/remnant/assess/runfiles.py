"""The run folder: what ``remnant assess`` writes where, and the context records ``recompute`` reads back.

``RUN/`` holds::

    prereg.json          frozen pre-registration (R14; `remnant preregister`)
    deviations.jsonl     recorded deviations (R15)
    config.toml          the config the run was started from, byte for byte
    records.jsonl        observations, cell records and events (append-only, hash-chained; remnant.records)
    pack/                the pack, when minted by the run (R18: kept private with the run)
    states/<name>-<key>/ trained model states (safetensors + identity.json), keyed by their inputs
    manifest.json, statement.json, statement.dsse.json, report.html, report-customer.html

Everything the statement and manifest need that is not a cell — model identities, the pack record, seeds,
hyper-parameters, components, environment, the assessment date — is appended to ``records.jsonl`` as a *context*
event (``stage="context"``, ``message`` = its key, ``data`` = its value; the last one of a key wins). So
``remnant recompute RUN`` rebuilds the statement from the run folder alone, loading no model, and gets the same
bytes (R24). Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from remnant.records import RECORDS_FILE, CellRecord, Event, RecordStore

STATES_DIR = "states"
PACK_DIR = "pack"
CONTEXT_STAGE = "context"


def run_id_for(prereg_digest: str) -> str:
    """A run's id, fixed by its pre-registration (so a resumed run keeps it): ``run-<12 hex>``."""
    return "run-" + prereg_digest.removeprefix("sha256:")[:12]


def store(run_dir: Path) -> RecordStore:
    return RecordStore(run_dir / RECORDS_FILE)


def context_event(run_id: str, key: str, data: Mapping[str, object]) -> Event:
    """One context record; ``data`` must be JSON-ready."""
    return Event(run_id=run_id, stage=CONTEXT_STAGE, kind="note", message=key, data=dict(data))


def read_context(records: Iterable[object]) -> dict[str, dict[str, Any]]:
    """Every context key's latest value."""
    out: dict[str, dict[str, object]] = {}
    for record in records:
        if isinstance(record, Event) and record.stage == CONTEXT_STAGE:
            out[record.message] = dict(record.data)
    return out


def cell_records(records: Iterable[object]) -> list[CellRecord]:
    """Cell records in file order, one per (cell key, metric, checkpoint): a cell re-run after a torn write
    appends again, and the first complete copy is the one that counts. So a forged copy inserted before the real
    one would count; the records chain refuses it (R23, ``remnant.records``)."""
    seen: set[tuple[str, str, str, str, str]] = set()
    out: list[CellRecord] = []
    for record in records:
        if isinstance(record, CellRecord):
            # the attack is part of the identity: one Class D relearning cell scores several measurements
            key = (record.cell_key, record.attack, record.metric, record.checkpoint, record.model_state)
            if key not in seen:
                seen.add(key)
                out.append(record)
    return out


__all__ = [
    "CONTEXT_STAGE",
    "PACK_DIR",
    "STATES_DIR",
    "cell_records",
    "context_event",
    "read_context",
    "run_id_for",
    "store",
]
