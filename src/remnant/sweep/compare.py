"""Whether two sweeps recorded the same thing, order aside (the local and the Ray executor, a killed and a clean run).

Pure: reads records only. A record's ``elapsed_s`` differs between any two runs and is left out; a failed cell
record that a ``--retry-failed`` run superseded (the same cell recorded again with another status) is left out.
"""

from __future__ import annotations

import json
from pathlib import Path

from remnant.records import CellRecord, Observation, Reading, RecordStore


def comparable_records(records_file: Path) -> set[str]:
    """The store's cell records, observations and audit readings as canonical JSON lines, less timings and
    superseded failures."""
    records = [
        r for r in RecordStore(records_file).read() if isinstance(r, CellRecord | Observation | Reading)
    ]
    retried = {r.cell_key for r in records if isinstance(r, CellRecord) and r.status != "failed"}
    out: set[str] = set()
    for record in records:
        if isinstance(record, CellRecord) and record.status == "failed" and record.cell_key in retried:
            continue
        data = record.model_dump(mode="json")
        data.pop("elapsed_s", None)
        out.add(json.dumps(data, sort_keys=True))
    return out


__all__ = ["comparable_records"]
