"""Versioned answer normalisation for capability κ (R6: κ is a normalised match of the attribute).

The version is recorded with every κ so a statement names exactly how answers were compared.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Sequence

NORMALISATION_VERSION = "1"

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_THOUSANDS = re.compile(r"(?<=\d)[,_ ](?=\d{3}\b)")
_PUNCT = str.maketrans({c: " " for c in string.punctuation})


def normalise_answer(text: str) -> str:
    """Lower-case, NFKC, thousands separators dropped ("1,984" → "1984"), punctuation and articles removed,
    whitespace collapsed (normalisation version ``NORMALISATION_VERSION``)."""
    s = unicodedata.normalize("NFKC", text).lower()
    while _THOUSANDS.search(s):
        s = _THOUSANDS.sub("", s)
    s = re.sub(r"(?<=\d)\.0+\b", "", s)  # "12.0" == "12"
    s = s.translate(_PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def answer_matches(generated: str, accepted: Sequence[str]) -> bool:
    """True when any accepted answer, normalised, occurs as a whole-word span of the normalised generation."""
    gen = f" {normalise_answer(generated)} "
    for ans in accepted:
        a = normalise_answer(ans)
        if a and f" {a} " in gen:
            return True
    return False
