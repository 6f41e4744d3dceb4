"""Contamination check of P against supplied corpora by word n-gram overlap (R17).

Method: text is normalised (Unicode NFKC, case-folded, every non-alphanumeric run replaced by one space);
an item is contaminated when any word n-gram (default n=8, or the whole question when shorter) of its question
or of its question followed by its answer occurs in a corpus. The rate is contaminated items / |P|; the check
fails when the rate exceeds the threshold (default 0: any overlap fails).

A corpus that is missing, a folder or unreadable, ``n`` below 1 and a threshold outside [0, 1] are bad input
(ConfigError naming the file or option, R17), never a traceback and never a silently skipped corpus.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from remnant.errors import ConfigError
from remnant.jsonio import read_bytes
from remnant.packs.schema import Pack

_NON_ALNUM = re.compile(r"[^0-9a-z]+")


def normalise(text: str) -> list[str]:
    """NFKC, case-fold, split on runs of non-alphanumerics."""
    return _NON_ALNUM.sub(" ", unicodedata.normalize("NFKC", text).casefold()).split()


def ngrams(words: list[str], n: int) -> set[tuple[str, ...]]:
    if len(words) < n:
        return {tuple(words)} if words else set()
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


@dataclass(frozen=True)
class ContaminationReport:
    """Result of the R17 check: method, corpora, overlapping item ids, rate and verdict."""

    method: str
    n: int
    corpora: tuple[str, ...]
    probe_items: int
    contaminated: tuple[str, ...]
    rate: float = field(init=False)  # contaminated / probe_items
    threshold: float

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "rate", len(self.contaminated) / self.probe_items if self.probe_items else 0.0
        )

    @property
    def passed(self) -> bool:
        return self.rate <= self.threshold

    def to_json(self) -> dict[str, object]:
        return {"requirement": "R17", **asdict(self), "passed": self.passed}


def check_contamination(
    pack: Pack, corpora: Iterable[str | Path], n: int = 8, threshold: float = 0.0
) -> ContaminationReport:
    """Test P (the probe split) against each corpus file for word n-gram overlap (R17)."""
    if n < 1:
        raise ConfigError(f"--n {n}: an n-gram has at least one word", requirement="R17")
    if not 0.0 <= threshold <= 1.0:  # also refuses NaN
        raise ConfigError(
            f"--threshold {threshold}: a contamination rate threshold is in [0, 1]", requirement="R17"
        )
    paths = [Path(c) for c in corpora]
    texts = [read_bytes(path, requirement="R17").decode("utf-8", errors="replace") for path in paths]
    corpus_grams: set[tuple[str, ...]] = set()
    corpus_text = []
    for text in texts:
        words = normalise(text)
        corpus_grams |= ngrams(words, n)
        corpus_text.append(" " + " ".join(words) + " ")
    joined = "\n".join(corpus_text)
    hits: list[str] = []
    for it in pack.split("probe"):
        q = normalise(it.question)
        qa = q + normalise(it.answer)
        if len(q) < n:
            short = " " + " ".join(q) + " "
            if short.strip() and short in joined:
                hits.append(it.id)
                continue
        if (ngrams(q, n) | ngrams(qa, n)) & corpus_grams:
            hits.append(it.id)
    method = (
        f"word {n}-gram overlap of question and question+answer; NFKC, casefold, non-alphanumerics removed"
    )
    return ContaminationReport(
        method, n, tuple(str(p) for p in paths), len(pack.split("probe")), tuple(hits), threshold
    )
