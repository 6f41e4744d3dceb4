"""Target-pack schema: ``pack.json`` (manifest) + ``items.jsonl`` (one item a line), with digest checks.

The manifest records the canary design D5 asks for (attribute cardinalities, repetitions in the install set,
surface forms, population statistics), the splits (R16, C-W6), the collision filter (D2) and the digest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from remnant.atomic import write_atomic
from remnant.errors import PackError
from remnant.packs.digest import canonical_json, item_digest, pack_digest

#: Version of the target-pack schema; one of the Z1 triple (Standard, pack schema, harness).
PACK_SCHEMA_VERSION = "1.0"

#: The split names every pack carries (install, removal, probe P, relearn R, retain, controls, general).
SPLIT_NAMES: tuple[str, ...] = ("install", "removal", "probe", "relearn", "retain", "controls", "general")

ItemKind = Literal["fact", "link", "infer", "mcq", "general"]


class Item(BaseModel):
    """One question with its ground truth. ``split`` is the item's primary split (see ``Manifest.splits``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(description="Unique item id within the pack.")
    kind: ItemKind = Field(
        description="fact (singling out), link (D-3), infer (D-4), mcq (Class C), general."
    )
    entity_id: str | None = Field(default=None, description="Entity the item is about (None for general).")
    attribute: str | None = Field(default=None, description="Attribute asked for.")
    question: str = Field(description="Question text shown to the model.")
    answer: str = Field(description="Reference answer phrasing (used as the training target).")
    accepted: list[str] = Field(description="Accepted answers for normalised match (D-2.2).")
    template_id: str = Field(description="Question template id.")
    phrasing: Literal["install", "probe"] = Field(description="Install phrasing or held-out probe phrasing.")
    options: list[str] | None = Field(default=None, description="Forced-choice options (link, mcq).")
    answer_index: int | None = Field(default=None, description="Index of the true option.")
    given: dict[str, str] | None = Field(default=None, description="Attributes shown in context (infer).")
    split: str = Field(description="Primary split name.")


class Entity(BaseModel):
    """A minted fictional entity (D1) with linked attributes (D3); role says which split it feeds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str
    role: Literal["forget_probe", "forget_relearn", "retain", "control", "item"]
    attributes: dict[str, str]


class CollisionFilter(BaseModel):
    """The real-entity collision filter and its version (D2)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    version: str
    source: str
    entries: int
    rejected: int = Field(description="Minted candidate names rejected because they matched a real entry.")


class Manifest(BaseModel):
    """``pack.json``: everything about a pack except its items."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    version: str
    schema_version: str
    pack_class: Literal["C", "D"] = Field(alias="class")
    seed: int
    design: dict[str, Any] = Field(description="D5 canary design and population statistics.")
    splits: dict[str, list[str]]
    counts: dict[str, int]
    collision_filter: CollisionFilter | None
    entities: list[Entity]
    chance_rate: float | None = Field(default=None, description="Chance rate for forced-choice targets.")
    digest: str = ""


@dataclass(frozen=True)
class Pack:
    """A loaded pack: manifest plus items in file order (with an id index)."""

    manifest: Manifest
    items: tuple[Item, ...]
    _by_id: dict[str, Item] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_id", {it.id: it for it in self.items})

    @property
    def digest(self) -> str:
        return self.manifest.digest

    def item(self, item_id: str) -> Item:
        """The item with ``item_id`` (PackError if absent)."""
        try:
            return self._by_id[item_id]
        except KeyError:
            raise PackError(f"pack {self.manifest.id}: no item {item_id!r}") from None

    def split(self, name: str) -> list[Item]:
        """Items of split ``name`` in the manifest's order."""
        if name not in self.manifest.splits:
            raise PackError(
                f"pack {self.manifest.id}: no split {name!r} (has {sorted(self.manifest.splits)})"
            )
        return [self._by_id[i] for i in self.manifest.splits[name]]

    def entity(self, entity_id: str) -> Entity:
        for ent in self.manifest.entities:
            if ent.id == entity_id:
                return ent
        raise PackError(f"pack {self.manifest.id}: no entity {entity_id!r}")


def manifest_dict(manifest: Manifest) -> dict[str, Any]:
    """The manifest as the JSON object written to pack.json (``class`` key, not ``pack_class``)."""
    return manifest.model_dump(mode="json", by_alias=True)


def item_dict(item: Item) -> dict[str, Any]:
    return item.model_dump(mode="json")


def compute_digest(manifest: Manifest, items: tuple[Item, ...] | list[Item]) -> str:
    """The pack digest of ``manifest`` and ``items`` (the manifest's own digest field is ignored)."""
    return pack_digest(manifest_dict(manifest), (item_digest(item_dict(it)) for it in items))


def seal(manifest: Manifest, items: list[Item]) -> Pack:
    """Return a Pack whose manifest carries the digest of its contents, after checking its splits (R16)."""
    from remnant.packs.splits import check_splits

    items_t = tuple(items)
    unsealed = Pack(manifest.model_copy(update={"digest": ""}), items_t)
    check_splits(unsealed)
    digest = compute_digest(unsealed.manifest, items_t)
    return Pack(unsealed.manifest.model_copy(update={"digest": digest}), items_t)


def write_json_atomic(path: Path, value: Any) -> None:
    """Write ``value`` as indented, key-sorted JSON to ``path`` atomically."""
    write_atomic(path, json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def write_pack(pack: Pack, directory: str | Path) -> Path:
    """Write ``items.jsonl`` then ``pack.json`` atomically into ``directory`` (created if needed)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    lines = "".join(canonical_json(item_dict(it)) + "\n" for it in pack.items)
    write_atomic(out / "items.jsonl", lines)
    write_atomic(
        out / "items.sha256", "".join(f"{item_digest(item_dict(it))}  {it.id}\n" for it in pack.items)
    )
    write_json_atomic(out / "pack.json", manifest_dict(pack.manifest))
    return out


def load_pack(directory: str | Path) -> Pack:
    """Load and verify a pack; PackError names the file and the first mismatching item on a digest failure."""
    root = Path(directory)
    mpath, ipath = root / "pack.json", root / "items.jsonl"
    for p in (mpath, ipath):
        if not p.is_file():
            raise PackError(f"{p}: missing (a pack is a folder with pack.json and items.jsonl)")
    try:
        manifest = Manifest.model_validate(json.loads(mpath.read_text(encoding="utf-8")))
    except (ValidationError, json.JSONDecodeError) as exc:
        raise PackError(f"{mpath}: invalid manifest: {exc}") from None
    if manifest.schema_version != PACK_SCHEMA_VERSION:
        raise PackError(
            f"{mpath}: schema_version {manifest.schema_version!r}, this harness reads {PACK_SCHEMA_VERSION!r}",
            requirement="Z1",
        )
    items: list[Item] = []
    for lineno, line in enumerate(ipath.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(Item.model_validate(json.loads(line)))
        except (ValidationError, json.JSONDecodeError) as exc:
            raise PackError(f"{ipath}:{lineno}: invalid item: {exc}") from None
    pack = Pack(manifest, tuple(items))
    actual = compute_digest(manifest, pack.items)
    if actual != manifest.digest:
        raise PackError(
            f"{ipath}: digest mismatch (pack.json says {manifest.digest}, contents give {actual})"
            + _first_mismatch(root, manifest, pack.items)
        )
    return pack


def _first_mismatch(root: Path, manifest: Manifest, items: tuple[Item, ...]) -> str:
    """Name the first item whose digest differs from ``items.sha256`` (or that the splits do not list)."""
    listed = {i for split in manifest.splits.values() for i in split}
    sums = root / "items.sha256"
    recorded: dict[str, str] = {}
    if sums.is_file():
        for line in sums.read_text(encoding="utf-8").splitlines():
            digest, _, item_id = line.partition("  ")
            recorded[item_id] = digest
    for it in items:
        if recorded and recorded.get(it.id) != item_digest(item_dict(it)):
            return f"; first mismatching item: {it.id!r}"
        if it.id not in listed:
            return f"; first mismatching item: {it.id!r} (not in any split)"
    missing = sorted(listed - {it.id for it in items})
    if missing:
        return f"; first mismatching item: {missing[0]!r} (listed in splits, missing from items.jsonl)"
    return "; every item matches items.sha256, so pack.json itself was changed"
