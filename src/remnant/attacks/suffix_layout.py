"""Where an optimised suffix sits in a rendered prompt: ``[before][suffix][after]`` (docs/latent.md–§4.8).

GCG and the soft-prompt attack both append their optimised tokens to the user's question, inside the model's
chat template (or the raw ``Question: …\\nAnswer:`` format), so the control and the post-removal model see the
same layout (C-Q4). The template is rendered once with a placeholder and split there; the two halves are
tokenised separately, so the suffix never re-tokenises with its neighbours and generation runs from ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from remnant.errors import ModelError
from remnant.models.prompts import PromptFormat, render_text

#: A string no question or template contains; the rendered text is split at it.
PLACEHOLDER = "\x00REMNANT_SUFFIX\x00"


@dataclass(frozen=True)
class SuffixLayout:
    """Token ids before and after the optimised suffix (``after`` ends where the model's answer starts)."""

    before: tuple[int, ...]
    after: tuple[int, ...]

    def prompt_ids(self, suffix: Sequence[int]) -> list[int]:
        """The full prompt with ``suffix`` in place: what greedy generation starts from."""
        return [*self.before, *(int(t) for t in suffix), *self.after]


def suffix_layout(tokenizer: Any, question: str, fmt: PromptFormat) -> SuffixLayout:
    """Split the rendered prompt of ``question`` around a suffix appended to it (nanoGCG's default place)."""
    text = render_text(tokenizer, fmt, f"{question}{PLACEHOLDER}")
    if fmt.style == "chat" and text.count(PLACEHOLDER) != 1:
        raise ModelError("the chat template does not carry the user's message through verbatim")
    head, tail = text.split(PLACEHOLDER)
    after = tokenizer(tail, add_special_tokens=False)["input_ids"]
    before = tokenizer(head, add_special_tokens=fmt.style == "raw")["input_ids"]
    return SuffixLayout(before=tuple(int(t) for t in before), after=tuple(int(t) for t in after))
