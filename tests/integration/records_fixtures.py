"""A finished tiny assessment to tamper with, and the edits a party holding its records could make (R23).

:func:`assess_once` runs one uninterrupted assessment on the tiny random Llama (assess_fixtures.py);
:func:`copy_run` copies its folder without the trained states (recompute loads no model), so each case edits its
own copy. The edit helpers work on the raw lines of ``records.jsonl``, as a forger would.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from assess_fixtures import tiny_pack, write_config

from remnant.assess.finalize import without_pins
from remnant.cli import main
from remnant.records import CELL_DETAIL_FIELDS, CELL_PARAMS_MOVED, CHAINED_SINCE, GENESIS, RECORDS_FILE
from remnant.statement.canonical import canonical_json


def assess_once(root: Path, control: Path) -> Path:
    """One complete assessment (no signing key) in ``root/run``."""
    config = write_config(root / "config.toml", pack=tiny_pack(root / "pack"), control=control)
    run = root / "run"
    assert main(["preregister", str(config), "--out", str(run)]) == 0
    assert main(["assess", str(config), "--out", str(run), "--quiet"]) == 0
    return run


def copy_run(source: Path, target: Path) -> Path:
    """``source``'s run folder at ``target``, without the trained states."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("states"))
    return target


def records_path(run: Path) -> Path:
    return run / RECORDS_FILE


def read_lines(run: Path) -> list[bytes]:
    return records_path(run).read_bytes().splitlines(keepends=True)


def write_lines(run: Path, lines: list[bytes]) -> None:
    records_path(run).write_bytes(b"".join(lines))


def entry(line: bytes) -> dict[str, Any]:
    value = json.loads(line)
    assert isinstance(value, dict)
    return value


def line_of(entry_dict: dict[str, Any]) -> bytes:
    return canonical_json(entry_dict) + b"\n"


def find(lines: list[bytes], test: Callable[[dict[str, Any]], bool], start: int = 0) -> int:
    """Index (0-based; the line number is index + 1) of the first line from ``start`` whose entry passes."""
    return next(i for i in range(start, len(lines)) if test(entry(lines[i])))


def is_run_cell(e: dict[str, Any]) -> bool:
    """A κ cell of the prefill attack on the post-removal model: counted from observations, not the last line."""
    return bool(
        e["entry_type"] == "cell"
        and e["attack"] == "prefill"
        and e["model_state"] == "post_removal"
        and e["metric"] == "kappa"
        and e["status"] == "run"
    )


def is_observation(e: dict[str, Any]) -> bool:
    return bool(e["entry_type"] == "observation" and e["attack"] == "prefill")


def edited(line: bytes, **changes: Any) -> bytes:
    """The line with fields changed and its link left as it was (a naive edit)."""
    return line_of({**entry(line), **changes})


def rechain(lines: list[bytes]) -> list[bytes]:
    """Every link recomputed from the first line: what a forger who knows the chain rule writes."""
    out: list[bytes] = []
    prev = GENESIS
    for line in lines:
        out.append(line_of({**entry(line), "prev": prev}))
        prev = hashlib.sha256(out[-1]).hexdigest()
    return out


def stripped(lines: list[bytes]) -> list[bytes]:
    """Every ``prev`` removed, versions kept."""
    return [line_of({k: v for k, v in entry(x).items() if k != "prev"}) for x in lines]


def cell_as_v2(e: dict[str, Any]) -> dict[str, Any]:
    """A cell entry (schema_version 3) as remnant wrote it at schema_version 2: its typed fields back in ``params``
    under their old keys (``records.CELL_PARAMS_MOVED``), a null one left out — but a Class D record's
    ``baseline``, which v2 wrote even when null — and no budget where only the label carried it (a diverged
    curve's record, a relearned copy's utility reading: no step). Any other entry is returned as it is."""
    if e.get("entry_type") != "cell" or e.get("schema_version") != 3:
        return e
    params = dict(e.get("params") or {})
    for key, field in CELL_PARAMS_MOVED.items():
        if e.get(field) is not None or (field == "baseline" and e.get("entities") is not None):
            params[key] = e.get(field)
    if e.get("step") is None:
        params.pop("budget", None)
    out = {k: v for k, v in e.items() if k not in CELL_DETAIL_FIELDS}
    return {**out, "params": params, "schema_version": 2}


def legacy(lines: list[bytes]) -> list[bytes]:
    """The lines exactly as remnant wrote them before the chain: no ``prev``, each type's pre-chain version."""
    out = []
    for line in stripped(lines):
        e = cell_as_v2(entry(line))
        out.append(line_of({**e, "schema_version": CHAINED_SINCE[e["entry_type"]] - 1}))
    return out


def repin(run: Path) -> None:
    """Pin the records as they now are (chain head) in the manifest and the statement, as a run that wrote them
    would have."""
    head = "sha256:" + hashlib.sha256(read_lines(run)[-1]).hexdigest()
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["records"]["head"] = head
    (run / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    statement = json.loads((run / "statement.json").read_text())
    statement["records_head"] = head
    (run / "statement.json").write_text(json.dumps(statement, indent=2, ensure_ascii=False) + "\n")


def as_written_before_typed_fields(run: Path) -> None:
    """Turn a run folder into one written before cell records had typed fields: every cell line in its
    schema_version 2 form (:func:`cell_as_v2`), the chain recomputed over the new bytes and pinned again."""
    write_lines(run, rechain([line_of(cell_as_v2(entry(x))) for x in read_lines(run)]))
    repin(run)


def as_written_before_the_chain(run: Path) -> None:
    """Turn a run folder into one written before the chain: legacy records, no pins in manifest or statement."""
    write_lines(run, legacy(read_lines(run)))
    for name, key in (("manifest.json", "records"), ("statement.json", "records_head")):
        data = json.loads((run / name).read_text())
        del data[key]
        (run / name).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def figures(run: Path) -> bytes:
    """The statement without its pins: verdict, cells, surfaces, facts, tier... as canonical bytes."""
    return canonical_json(without_pins(json.loads((run / "statement.json").read_text())))
