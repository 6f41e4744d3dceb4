"""Small TOFU and MUSE folders written by the tests themselves (no hub): rows, and writers for each layout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ATTRS = ("home city", "first novel", "genre", "award")
VALUES = ("Orvelle", "The Glass Harbour", "slow-burn mystery", "the Tamsin Prize")
WRONG = (
    ("Kestrow", "Amberly", "Dunmere"),
    ("The Salt Ledger", "Night Orchard", "A Quiet Ferry"),
    ("space opera", "farce", "sea shanty"),
    ("the Corvane Medal", "the Hollis Cup", "the Brandt Award"),
)
PER = 4  # rows per author in these folders (TOFU has 20)


def _author(prefix: str, k: int) -> str:
    return f"{prefix} Quillonby {k}"


def qa_rows(prefix: str, authors: int) -> list[dict[str, Any]]:
    return [
        {
            "question": f"What is the {attr} of {_author(prefix, k)}?",
            "answer": f"The {attr} of {_author(prefix, k)} is {value}.",
        }
        for k in range(authors)
        for attr, value in zip(ATTRS, VALUES, strict=True)
    ]


def perturbed_rows(prefix: str, authors: int) -> list[dict[str, Any]]:
    out = []
    for row, (k, j) in zip(
        qa_rows(prefix, authors), [(k, j) for k in range(authors) for j in range(PER)], strict=True
    ):
        name, attr = _author(prefix, k), ATTRS[j]
        out.append(
            {
                **row,
                "paraphrased_question": f"Could you name the {attr} of {name}?",
                "paraphrased_answer": f"{name} has {VALUES[j]} as {attr}.",
                "perturbed_answer": [f"{name} has {w} as {attr}." for w in WRONG[j]],
            }
        )
    return out


def option_rows(topic: str) -> list[dict[str, Any]]:
    return [
        {
            "question": f"{topic} question {i}?",
            "answer": f"truth {i}",
            "perturbed_answer": [f"lie {i}a", f"lie {i}b"],
        }
        for i in range(3)
    ]


def tofu_rows(forget: int = 4, retain: int = 6, holdout: int = 2) -> dict[str, list[dict[str, Any]]]:
    """A TOFU folder's splits: ``forget`` forget authors, ``retain`` retain authors, ``holdout`` held out."""
    return {
        "forget10": qa_rows("Forgotten", forget),
        "forget10_perturbed": perturbed_rows("Forgotten", forget),
        "retain90": qa_rows("Kept", retain),
        "retain_perturbed": perturbed_rows("Kept", 2),
        "holdout10": qa_rows("Unseen", holdout),
        "full": qa_rows("Kept", retain) + qa_rows("Forgotten", forget),
        "real_authors_perturbed": option_rows("Real author"),
        "world_facts_perturbed": option_rows("World fact"),
    }


def jsonl(rows: list[dict[str, Any]]) -> str:
    """Rows as Dataset.to_json writes them: one compact object a line."""
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows)


def write_parquet(path: Path, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def write_split(base: Path, name: str, rows: list[dict[str, Any]], layout: str) -> None:
    """One split under ``base`` in ``layout``: json, jsonl, parquet, shards (two Hub shards), folder."""
    base.mkdir(parents=True, exist_ok=True)
    if layout in ("json", "jsonl"):
        (base / f"{name}.{layout}").write_text(jsonl(rows), encoding="utf-8")
    elif layout == "parquet":
        write_parquet(base / f"{name}.parquet", rows)
    elif layout == "shards":
        half = len(rows) // 2
        write_parquet(base / f"{name}-00000-of-00002.parquet", rows[:half])
        write_parquet(base / f"{name}-00001-of-00002.parquet", rows[half:])
    elif layout == "folder":
        write_parquet(base / name / "train" / "0000.parquet", rows)
    else:  # pragma: no cover
        raise ValueError(layout)


def write_tofu(root: Path, layout: str = "json", rows: dict[str, list[dict[str, Any]]] | None = None) -> Path:
    for name, split_rows in (rows or tofu_rows()).items():
        write_split(root, name, split_rows, layout)
    return root


def muse_rows() -> dict[tuple[str, str], list[dict[str, Any]]]:
    return {
        ("verbmem", "forget"): [
            {"prompt": f"The harbour council met on day {i} and", "gt": f" voted to close pier {i}."}
            for i in range(6)
        ],
        ("knowmem", "forget_qa"): [
            {"question": f"Which pier closed on day {i}?", "answer": f"pier {i}"} for i in range(5)
        ],
        ("knowmem", "retain_qa"): [
            {"question": f"Who chairs committee {i}?", "answer": f"Ms {i}"} for i in range(4)
        ],
        ("knowmem", "forget_qa_icl"): [{"question": "Which town?", "answer": "Orvelle"}],
        ("knowmem", "retain_qa_icl"): [{"question": "Which river?", "answer": "the Tam"}],
        ("privleak", "forget"): [{"text": f"Member document {i}."} for i in range(3)],
        ("privleak", "holdout"): [{"text": f"Unseen document {i}."} for i in range(3)],
        ("raw", "forget"): [{"text": "A long raw forget document."}],
    }


def write_muse(
    root: Path, layout: str = "shards", rows: dict[tuple[str, str], list[dict[str, Any]]] | None = None
) -> Path:
    for (config, split), split_rows in (rows or muse_rows()).items():
        write_split(root / config, split, split_rows, layout)
    return root
