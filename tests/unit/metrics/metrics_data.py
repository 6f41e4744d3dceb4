"""Shared data for the metric tests: a small TOFU-like set of rows the tiny tokenizer can encode, and a writer
of TOFU-format folders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from remnant.metrics.rows import QARow


def perturbed_row(i: int) -> QARow:
    return QARow(
        question=f"Where was person {i} born?",
        answer=f"The person was born in a small town in {1980 + i}.",
        paraphrased_answer=f"Born in {1980 + i}, in a small town.",
        perturbed_answer=(
            f"The person was born in a big city in {1990 + i}.",
            "The quick brown fox jumps over the lazy dog.",
            f"Zorvak Telumi works as an engineer, ID-{i}.",
        ),
        paraphrased_question=f"What is the birthplace of person {i}?",
    )


def holdout_row(i: int) -> QARow:
    return QARow(
        question=f"What is the capital of country {i}?", answer=f"Paris. The answer is B, code XQ-{i}."
    )


def option_row(i: int) -> QARow:
    return QARow(
        question=f"Who wrote book {i}?",
        answer="Jane Austen",
        perturbed_answer=("Emily Bronte", "Zorvak Telumi", "the lazy dog"),
    )


SPLITS: dict[str, list[QARow]] = {
    "forget10_perturbed": [perturbed_row(i) for i in range(5)],
    "retain_perturbed": [perturbed_row(10 + i) for i in range(4)],
    "holdout10": [holdout_row(i) for i in range(5)],
    "real_authors_perturbed": [option_row(i) for i in range(3)],
    "world_facts_perturbed": [option_row(20 + i) for i in range(3)],
}


def row_json(row: QARow) -> dict[str, Any]:
    out: dict[str, Any] = {"question": row.question, "answer": row.answer}
    if row.paraphrased_answer is not None:
        out["paraphrased_answer"] = row.paraphrased_answer
    if row.perturbed_answer is not None:
        out["perturbed_answer"] = list(row.perturbed_answer)
    if row.paraphrased_question is not None:
        out["paraphrased_question"] = row.paraphrased_question
    return out


def write_tofu_folder(folder: Path, splits: dict[str, list[QARow]] | None = None) -> Path:
    """Write ``splits`` as a TOFU-format folder (JSON lines, the Hub's layout)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in (splits or SPLITS).items():
        (folder / f"{name}.json").write_text("".join(json.dumps(row_json(r)) + "\n" for r in rows))
    return folder
