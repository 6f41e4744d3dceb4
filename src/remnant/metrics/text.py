"""Token ids back to text the way OpenUnlearning's numbers were made (transformers 4.45, their pinned version).

They decode the ROUGE texts with ``clean_up_tokenization_spaces=True`` and zlib's answer text with the tokenizer's
own setting; transformers 5 ignores that flag for BPE tokenizers, so the clean-up is done here, after a plain
decode, and the stored texts and zlib's lengths match theirs whatever transformers is installed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

#: transformers 4.x ``clean_up_tokenization``: the space before punctuation and English contractions is removed.
_CLEANUPS = (
    (" .", "."),
    (" ?", "?"),
    (" !", "!"),
    (" ,", ","),
    (" ' ", "'"),
    (" n't", "n't"),
    (" 'm", "'m"),
    (" 's", "'s"),
    (" 've", "'ve"),
    (" 're", "'re"),
)


def clean_up_spaces(text: str) -> str:
    """transformers 4.x's clean-up of tokenization spaces, applied in its order."""
    for old, new in _CLEANUPS:
        text = text.replace(old, new)
    return text


def decode(
    tokenizer: PreTrainedTokenizerBase, ids: Sequence[int], *, skip_special_tokens: bool, clean_up: bool
) -> str:
    """``ids`` as text; special tokens dropped when asked; transformers 4.x clean-up when ``clean_up``."""
    text = str(
        tokenizer.decode(
            list(ids), skip_special_tokens=skip_special_tokens, clean_up_tokenization_spaces=False
        )
    )
    return clean_up_spaces(text) if clean_up else text


def tokenizer_cleans_up(tokenizer: object) -> bool:
    """The tokenizer's own ``clean_up_tokenization_spaces`` default (used where their code passes none)."""
    return bool(getattr(tokenizer, "clean_up_tokenization_spaces", False))


__all__ = ["clean_up_spaces", "decode", "tokenizer_cleans_up"]
