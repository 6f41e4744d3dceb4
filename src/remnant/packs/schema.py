"""Target-pack schema: ``pack.json`` (manifest) + ``items.jsonl`` (one item a line), with digest checks.

The manifest records the canary design D5 asks for (attribute cardinalities, repetitions in the install set,
surface forms, population statistics), the splits (R16, C-W6), the collision filter (D2) and the digest. The
digest is unkeyed (anyone who edits a pack can reseal it), so :func:`load_pack` reads both files strictly
(``remnant.jsonio``) and re-runs the split rules minting runs (:mod:`remnant.packs.splits`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from remnant.atomic import write_atomic, write_json
from remnant.errors import PackError
from remnant.jsonio import loads_strict
from remnant.packs.digest import item_digest, pack_digest
from remnant.statement.canonical import canonical_text

#: Version of the target-pack schema; one of the Z1 triple (Standard, pack schema, harness).
PACK_SCHEMA_VERSION = "1.0"

#: The split names every pack carries (install, removal, probe P, relearn R, retain, controls, general).
SPLIT_NAMES: tuple[str, ...] = ("install", "removal", "probe", "relearn", "retain", "controls", "general")

MANIFEST_FILE = "pack.json"
ITEMS_FILE = "items.jsonl"

#: Longest text field an item may hold (a minted question is under 120 characters): a pack is read whole and
#: every question is tokenised, so a megabyte "question" is refused rather than carried into every prompt.
MAX_TEXT = 10_000
#: Longest id (item, entity, split, template); minted ones are under 40 characters.
MAX_ID = 200
#: Longest line of ``items.jsonl`` read at all (an item is a few hundred bytes).
MAX_ITEM_LINE = 200_000

ItemKind = Literal["fact", "link", "infer", "mcq", "general"]
Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT)]
Ident = Annotated[str, Field(min_length=1, max_length=MAX_ID)]


def _absent(value: object) -> bool:
    return value is None


class Item(BaseModel):
    """One question with its ground truth. ``split`` is the item's primary split (see ``Manifest.splits``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: Ident = Field(description="Unique item id within the pack.")
    kind: ItemKind = Field(
        description="fact (singling out), link (D-3), infer (D-4), mcq (Class C), general."
    )
    entity_id: Ident | None = Field(default=None, description="Entity the item is about (None for general).")
    attribute: Ident | None = Field(default=None, description="Attribute asked for.")
    question: Text = Field(description="Question text shown to the model.")
    answer: Text = Field(description="Reference answer phrasing (used as the training target).")
    accepted: list[Text] = Field(min_length=1, description="Accepted answers for normalised match (D-2.2).")
    template_id: Ident = Field(description="Question template id.")
    phrasing: Literal["install", "probe"] = Field(description="Install phrasing or held-out probe phrasing.")
    options: list[Text] | None = Field(
        default=None, min_length=2, description="Forced-choice options (link, mcq)."
    )
    answer_index: int | None = Field(default=None, description="Index of the true option.")
    given: dict[str, Text] | None = Field(default=None, description="Attributes shown in context (infer).")
    split: Ident = Field(description="Primary split name.")
    # Truth-ratio fields (TOFU's names, docs/formats.md). Left out of the dump when absent, so items without
    # them keep their canonical JSON and every pack minted or written before them keeps its digest.
    paraphrased_answer: Text | None = Field(
        default=None,
        exclude_if=_absent,
        description="The same fact in other words (truth ratio's 'correct').",
    )
    perturbed_answer: list[Text] | None = Field(
        default=None,
        min_length=1,
        exclude_if=_absent,
        description="Wrong answers in the paraphrased answer's template (truth ratio's 'wrong'; TOFU has 5).",
    )
    paraphrased_question: Text | None = Field(
        default=None, exclude_if=_absent, description="The question in other words (TOFU's other wording)."
    )

    @model_validator(mode="after")
    def _forced_choice(self) -> Item:
        """A forced-choice item has options and the index of a true one (D-3.2); nothing else has an index."""
        if self.kind in ("link", "mcq") and (self.options is None or self.answer_index is None):
            raise ValueError(f"a {self.kind} item needs options and answer_index")
        if self.answer_index is not None and not (
            self.options is not None and 0 <= self.answer_index < len(self.options)
        ):
            raise ValueError(f"answer_index {self.answer_index} is not the index of one of its options")
        return self


class Entity(BaseModel):
    """A minted fictional entity (D1) with linked attributes (D3); role says which split it feeds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: Ident
    name: Text
    role: Literal["forget_probe", "forget_relearn", "retain", "control", "item"]
    attributes: dict[str, Text]


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

    id: Ident
    version: Ident
    schema_version: str
    pack_class: Literal["C", "D"] = Field(alias="class")
    seed: int
    design: dict[str, Any] = Field(description="D5 canary design and population statistics.")
    splits: dict[Ident, list[Ident]]
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


def manifest_dict(manifest: Manifest) -> dict[str, object]:
    """The manifest as the JSON object written to pack.json (``class`` key, not ``pack_class``)."""
    return manifest.model_dump(mode="json", by_alias=True)


def item_dict(item: Item) -> dict[str, object]:
    return item.model_dump(mode="json")


def compute_digest(manifest: Manifest, items: tuple[Item, ...] | list[Item]) -> str:
    """The pack digest of ``manifest`` and ``items`` (the manifest's own digest field is ignored)."""
    return pack_digest(manifest_dict(manifest), (item_digest(item_dict(it)) for it in items))


def seal(manifest: Manifest, items: list[Item], *, required: Collection[str] | None = None) -> Pack:
    """Return a Pack whose manifest carries the digest of its contents, after the split rules that every load
    runs too (R16, C-W6, D4; :func:`remnant.packs.splits.check_splits`). ``required`` overrides the splits
    that must hold items (default: those the pack's class requires)."""
    from remnant.packs.splits import check_splits

    items_t = tuple(items)
    unsealed = Pack(manifest.model_copy(update={"digest": ""}), items_t)
    check_splits(unsealed, required=required)
    digest = compute_digest(unsealed.manifest, items_t)
    return Pack(unsealed.manifest.model_copy(update={"digest": digest}), items_t)


def write_pack(pack: Pack, directory: str | Path) -> Path:
    """Write ``items.jsonl`` then ``pack.json`` atomically into ``directory`` (created if needed)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    lines = "".join(canonical_text(item_dict(it)) + "\n" for it in pack.items)
    write_atomic(out / "items.jsonl", lines)
    write_atomic(
        out / "items.sha256", "".join(f"{item_digest(item_dict(it))}  {it.id}\n" for it in pack.items)
    )
    write_json(out / "pack.json", manifest_dict(pack.manifest), sort_keys=True)
    return out


def load_pack(directory: str | Path) -> Pack:
    """Load and verify a pack: strict JSON, schema, digest, then the split rules minting runs (R16, C-W6, D4).

    Every refusal is a :class:`PackError` naming the file (and the line, split or item) and the requirement.
    """
    from remnant.packs.splits import check_splits

    root = Path(directory)
    if not root.is_dir():
        what = "not a folder" if root.exists() else "missing"
        raise PackError(
            f"{root}: {what} (a pack is a folder with {MANIFEST_FILE} and {ITEMS_FILE})", requirement="R2"
        )
    mpath, ipath = root / MANIFEST_FILE, root / ITEMS_FILE
    manifest = _read_manifest(mpath)
    pack = Pack(manifest, _read_items(ipath))
    actual = compute_digest(manifest, pack.items)
    if actual != manifest.digest:
        raise PackError(
            f"{ipath}: digest mismatch (pack.json says {manifest.digest}, contents give {actual})"
            + _first_mismatch(root, manifest, pack.items),
            requirement="R23",
        )
    check_splits(pack, source=str(mpath))
    return pack


def _read_file(path: Path) -> bytes:
    if not path.exists():
        raise PackError(
            f"{path}: missing (a pack is a folder with {MANIFEST_FILE} and {ITEMS_FILE})", requirement="R2"
        )
    if not path.is_file():
        raise PackError(f"{path}: is a folder or other non-file, not a pack file", requirement="R2")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise PackError(f"{path}: cannot read: {exc.strerror or exc}", requirement="R2") from None


def describe_validation(exc: ValidationError) -> str:
    """A pydantic error as one line: the first problem's field and message, and how many more there are."""
    errors = exc.errors()
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "(top level)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"field {where!r}: {first['msg']}{more}"


def _read_manifest(path: Path) -> Manifest:
    data = loads_strict(_read_file(path), source=str(path), requirement="Z1", error=PackError)
    if not isinstance(data, dict):
        raise PackError(f"{path}: a pack manifest is a JSON object", requirement="Z1")
    version = data.get("schema_version")
    if version != PACK_SCHEMA_VERSION:
        found = "no schema_version" if version is None else f"schema_version {str(version)[:40]!r}"
        raise PackError(f"{path}: {found}, this harness reads {PACK_SCHEMA_VERSION!r}", requirement="Z1")
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        raise PackError(f"{path}: invalid manifest: {describe_validation(exc)}", requirement="Z1") from None


def _read_items(path: Path) -> tuple[Item, ...]:
    """Every item of ``items.jsonl``; each line read strictly, a repeated id refused with both line numbers."""
    try:
        text = _read_file(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PackError(f"{path}: not UTF-8: {exc}", requirement="Z1") from None
    items: list[Item] = []
    first_line: dict[str, int] = {}
    # split on "\n" only: str.splitlines() would also split inside a JSON string holding U+2028
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        if len(line) > MAX_ITEM_LINE:
            raise PackError(f"{where}: line longer than {MAX_ITEM_LINE} characters", requirement="Z1")
        data = loads_strict(line, source=where, requirement="Z1", error=PackError)
        if not isinstance(data, dict):
            raise PackError(f"{where}: an item is a JSON object", requirement="Z1")
        try:
            item = Item.model_validate(data)
        except ValidationError as exc:
            raise PackError(f"{where}: invalid item: {describe_validation(exc)}", requirement="Z1") from None
        if item.id in first_line:
            raise PackError(
                f"{path}: item id {item.id!r} appears twice in items.jsonl (lines {first_line[item.id]} and "
                f"{lineno})",
                requirement="R16",
            )
        first_line[item.id] = lineno
        items.append(item)
    return tuple(items)


def _first_mismatch(root: Path, manifest: Manifest, items: tuple[Item, ...]) -> str:
    """Name the first item whose digest differs from ``items.sha256`` (or that the splits do not list)."""
    listed = {i for split in manifest.splits.values() for i in split}
    recorded: dict[str, str] = {}
    try:  # only a hint: an unreadable items.sha256 leaves it out
        lines = (root / "items.sha256").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        lines = []
    for line in lines:
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
