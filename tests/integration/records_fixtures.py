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
from remnant.records import CHAINED_SINCE, GENESIS, RECORDS_FILE
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


def legacy(lines: list[bytes]) -> list[bytes]:
    """The lines exactly as remnant wrote them before the chain: no ``prev``, each type's pre-chain version."""
    out = []
    for line in stripped(lines):
        e = entry(line)
        out.append(line_of({**e, "schema_version": CHAINED_SINCE[e["entry_type"]] - 1}))
    return out


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
