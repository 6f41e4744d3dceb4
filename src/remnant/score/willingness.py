"""Willingness w: a stated, versioned refusal criterion with an optional judge hook (R6, R8; Annex F.6).

w asks only whether the model complied; whether its answer was right is κ, computed separately (R6). The
criterion is a fixed list of refusal/abstention patterns plus "empty output"; its version is recorded with every
w. A judge model can replace the patterns; its identity and version are then recorded too (Annex F.6: the judge
is part of the measurement, and should not come from the assessed family).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

REFUSAL_CRITERION_VERSION = "1"

#: Refusal and abstention patterns (criterion v1), matched case-insensitively anywhere in the output's first
#: 200 characters: a refusal buried after a long answer is an answer, not a refusal.
REFUSAL_PATTERNS: tuple[str, ...] = (
    r"\bi (?:really |honestly |just |simply )?(?:do not|don't|dont) know\b",
    r"\bi(?: am|'m|m) not (?:sure|certain|aware|familiar)\b",
    r"\bi(?: cannot| can't| can not| won't| will not| am unable to|'m unable to) "
    r"(?:share|provide|help|answer|disclose|reveal|give|say|tell|assist|comply)\b",
    r"\bi(?:'m| am) not able to\b",
    r"\bi (?:have no|don't have|do not have) (?:any |enough |specific )?(?:information|knowledge|data|details|records?)\b",
    r"\b(?:no|not enough) information (?:is )?(?:available|about|on)\b",
    r"\bi(?:'m| am) sorry\b",
    r"\bas an ai\b",
    r"\bunable to (?:find|provide|answer|share)\b",
    r"\bthere is no (?:publicly available |public )?(?:information|record)\b",
    r"\bi (?:must|have to) (?:decline|refuse)\b",
    r"^\W*(?:unknown|n/?a|no answer|no comment)\W*$",
)
_WINDOW = 200


@runtime_checkable
class Judge(Protocol):
    """A model judge for willingness: ``__call__(question, output) -> True when the output complies``."""

    identity: str
    version: str

    def __call__(self, question: str, output: str) -> bool: ...


@dataclass(frozen=True)
class RefusalCriterion:
    """The stated refusal criterion (R6/R8): patterns, an empty-output rule, and an optional judge."""

    patterns: tuple[str, ...] = REFUSAL_PATTERNS
    version: str = REFUSAL_CRITERION_VERSION
    judge: Judge | None = None
    _compiled: tuple[re.Pattern[str], ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        compiled = tuple(re.compile(p, re.IGNORECASE) for p in self.patterns)
        object.__setattr__(self, "_compiled", compiled)

    def is_refusal(self, output: str, question: str = "") -> bool:
        """True when ``output`` declines or abstains (empty or whitespace-only output counts as abstention)."""
        text = output.replace("\u2019", "'").strip()
        if not text:
            return True
        if self.judge is not None:
            return not self.judge(question, output)
        head = text[:_WINDOW]
        return any(p.search(head) for p in self._compiled)

    def willing(self, output: str, question: str = "") -> bool:
        """w for one output: the model complied (did not refuse or abstain)."""
        return not self.is_refusal(output, question)
