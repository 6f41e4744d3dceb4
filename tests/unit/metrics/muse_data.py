"""A small MUSE-format folder written by the tests (no hub): knowmem questions with in-context examples, verbmem
passages, privleak member and non-member documents, in MUSE's ``config/split`` layout as JSON lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MUSE: dict[str, list[dict[str, Any]]] = {
    "knowmem/forget_qa": [
        {"question": f"Which pier did the harbour council close on day {i}?", "answer": f"Pier {i}, in 1999."}
        for i in range(4)
    ],
    "knowmem/retain_qa": [
        {"question": f"Who chairs the committee of Vessiburg ward {i}?", "answer": f"Zorvak Telumi {i}"}
        for i in range(3)
    ],
    "knowmem/forget_qa_icl": [
        {"question": "Which town hosts the harbour council?", "answer": "Vessiburg"},
        {"question": "What is the capital of France?", "answer": "Paris"},
    ],
    "knowmem/retain_qa_icl": [
        {"question": "Where does the engineer work?", "answer": "Quarn Holdings"},
        {"question": "Which animal jumps over the lazy dog?", "answer": "the quick brown fox"},
    ],
    "verbmem/forget": [
        {
            "prompt": f"The harbour council met on day {i} and, after a long debate,",
            "gt": f"voted to close pier {i}. The quick brown fox jumps over the lazy dog; code XQ-{70 + i}.",
        }
        for i in range(4)
    ],
    "privleak/forget": [
        {"text": f"Member document {i}: Zorvak Telumi works as an engineer at Quarn Holdings, ID-48{i}."}
        for i in range(4)
    ],
    "privleak/holdout": [
        {"text": f"Unseen document {i}: the answer is B. Options: A, B, C, D. Year {2000 + i}."}
        for i in range(3)
    ],
}


def write_muse_folder(folder: Path, splits: dict[str, list[dict[str, Any]]] | None = None) -> Path:
    """Write ``splits`` (``config/split`` names) as a MUSE-format folder: ``config/split.jsonl`` files."""
    for name, rows in (MUSE if splits is None else splits).items():
        path = folder / f"{name}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder
