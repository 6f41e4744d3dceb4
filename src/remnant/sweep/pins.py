"""Which stored checkpoints a sweep may use: the weights pinned in sweep records, never the store's word (R23).

The checkpoint store (:mod:`remnant.states.store`) is a cache that anyone with the folder can write: a
``meta.json`` whose weights digest was recomputed over a rewritten delta describes the rewritten weights
faithfully, so nothing in the store can vouch for itself. The authority is the *pin* — a checkpoint's status
and the digest of the weights its build measured — carried in the ``build`` events of the hash-chained records
(``records.jsonl``) of the sweep that built it:

- A task that stores checkpoints reports their pins with its build result, and the driver appends them to the
  sweep's records in the build event.
- Before any task runs, the driver resolves every stored checkpoint of the pool (:func:`trust_store`). Pinned
  by this sweep's records: the store's meta must agree with the pin (IntegrityError otherwise). Not pinned here,
  but its ``meta.json`` names the records of the sweep that built it (``built_by``) and those records pin it:
  adopted, after the same check, and appended to this sweep's records as a ``build`` note naming where the pin
  came from. Pinned nowhere this sweep can read (a build killed before its event was written, a store from before
  pins, the building sweep's folder since deleted): untrusted, so the task that needs it builds it again.
- A task uses a stored checkpoint only when its workspace pins it or this very run built it (``built_by.run`` is
  the run's token), and checks the weights it loads against the pin (:func:`remnant.sweep.weights.load_chain`);
  a rebuild of a checkpoint this sweep pinned must give the pinned weights.
- ``remnant sweep export`` loads only what the sweep's own records pin, checked the same way.

Someone who also rewrites a sweep's records and recomputes their hash chain can pin what they like: that is
forging records, which ``remnant recompute --expect-head`` catches where the assessor pinned the head. Pure: no
torch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from remnant.errors import IntegrityError, RecordError
from remnant.records import AnyRecord, Event, RecordStore
from remnant.states.store import HEX64, STORE_RULE, CheckpointMeta, CheckpointStore

#: The event stage whose ``data.pins`` pin checkpoints (the build events of remnant.sweep.driver).
PIN_STAGE = "build"


class Pin(BaseModel):
    """What a checkpoint holds, as the run that built it measured: its status and weights digest (R23)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    status: Literal["ok", "diverged"] = Field(description="ok (weights stored) or diverged (Annex B.6).")
    weights_digest: str | None = Field(
        default=None, pattern=HEX64, description="Digest of the built weights (ok only)."
    )


def pin_of(meta: CheckpointMeta) -> Pin:
    """The pin a build reports for the checkpoint it just stored (its own measurement, written by itself)."""
    return Pin(status=meta.status, weights_digest=meta.weights_digest if meta.status == "ok" else None)


def pins_in(records: Iterable[AnyRecord], source: str) -> dict[str, Pin]:
    """Every checkpoint pinned by the build events of ``records`` (read from ``source``); a key pinned twice
    to different weights is refused: the records then describe two different models under one key."""
    from remnant.packs.schema import describe_validation

    out: dict[str, Pin] = {}
    for record in records:
        if not isinstance(record, Event) or record.stage != PIN_STAGE:
            continue
        raw = record.data.get("pins", {})
        if not isinstance(raw, dict):
            raise RecordError(
                f"{source}: a build event's field 'data.pins' is not an object", requirement=STORE_RULE
            )
        for key, value in raw.items():
            try:
                pin = Pin.model_validate(value)
            except ValidationError as exc:
                raise RecordError(
                    f"{source}: the pin of checkpoint {str(key)[:12]}…: {describe_validation(exc)}",
                    requirement=STORE_RULE,
                ) from None
            if out.setdefault(str(key), pin) != pin:
                raise IntegrityError(
                    f"{source}: checkpoint {str(key)[:12]}… is pinned to two different weights: its records "
                    "describe two models under one key (use a new sweep folder)",
                    requirement=STORE_RULE,
                )
    return out


def read_pins(records: Path) -> dict[str, Pin]:
    """The pins of the records file ``records`` (its hash chain verified); none when it does not exist."""
    return pins_in(RecordStore(records).read(), str(records)) if records.exists() else {}


def check_against(meta: CheckpointMeta, pin: Pin, where: str | Path, pinned_by: str) -> None:
    """IntegrityError unless the store's ``meta`` describes the pinned checkpoint (R23)."""
    if meta.status != pin.status or (pin.status == "ok" and meta.weights_digest != pin.weights_digest):
        found = meta.status if meta.status != "ok" else f"weights {str(meta.weights_digest)[:12]}…"
        wanted = pin.status if pin.status != "ok" else f"weights {str(pin.weights_digest)[:12]}…"
        raise IntegrityError(
            f"{where}: says {found}, and {pinned_by} pin {wanted}: the store was changed after the build, "
            "so it is not the checkpoint its key names (move the folder aside to rebuild it)",
            requirement=STORE_RULE,
        )


def _foreign_pin(meta: CheckpointMeta, own: Path, cache: dict[str, dict[str, Pin]]) -> tuple[Pin, str] | None:
    """The pin of ``meta``'s checkpoint in the records of the sweep that built it, when another sweep built it
    and its records can be read; None otherwise (module docstring: untrusted, rebuilt)."""
    if meta.built_by is None:
        return None
    records = Path(meta.built_by.records)
    if not records.is_absolute() or records.resolve() == own.resolve():
        return None
    if str(records) not in cache:
        try:
            cache[str(records)] = read_pins(records) if records.is_file() else {}
        except (RecordError, OSError):  # unreadable or still being written: pins nothing this sweep can trust
            cache[str(records)] = {}
    pin = cache[str(records)].get(meta.key)
    return None if pin is None else (pin, str(records))


def trust_store(
    keys: Iterable[str], store: CheckpointStore, records: RecordStore, run_id: str, say: Callable[[str], None]
) -> dict[str, Pin]:
    """The pins a run's tasks may use (module docstring): this sweep's own, checked against the store, and those
    adopted from the records of the sweep that built a stored checkpoint (appended here as one ``build`` note).
    ``keys`` are the pool's checkpoint keys; a stored one left out of the answer is rebuilt by its task."""
    own = pins_in(records.read(), str(records.path)) if records.path.exists() else {}
    trusted = dict(own)
    adopted: dict[str, dict[str, object]] = {}
    sources: dict[str, str] = {}
    cache: dict[str, dict[str, Pin]] = {}
    for key in dict.fromkeys(keys):
        if not store.has(key):
            continue
        meta = store.meta(key)
        if key in own:
            check_against(meta, own[key], store.where(key), f"this sweep's records ({records.path})")
            continue
        found = _foreign_pin(meta, records.path, cache)
        if found is None:
            continue
        pin, source = found
        check_against(meta, pin, store.where(key), f"the records of the sweep that built it ({source})")
        trusted[key] = pin
        adopted[key] = pin.model_dump(mode="json")
        sources[key] = source
    if adopted:
        records.append(
            Event(
                run_id=run_id,
                stage=PIN_STAGE,
                kind="note",
                message=f"{len(adopted)} stored checkpoint(s) pinned by the records of the sweeps that built them",
                data={"pins": adopted, "pinned_by": sources},
            )
        )
        say(f"{len(adopted)} stored checkpoint(s) pinned from the records of the sweeps that built them")
    return trusted


__all__ = ["PIN_STAGE", "Pin", "check_against", "pin_of", "pins_in", "read_pins", "trust_store"]
