"""Greedy generation: remnant's decoder (:func:`remnant.models.greedy.greedy_pruned`) against transformers'
``generate``, and its shared-prefix pass against the same decoder without it.

The prompts are questions rendered by the model's chat template with its default system turn (SmolLM2's template
inserts one when the conversation has none, about 30 tokens before each question): what ROUGE and R6's
generations feed the decoder. remnant's decoder runs a prefix every prompt of the batch shares once and repeats
its keys and values to every row, drops finished rows and drafts tokens from the prompt; the middle column turns
the shared-prefix pass off (``min_shared`` above every prompt's length) and keeps the rest. The token columns say
whether each path returned generate's tokens, row for row.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from _common import compare, models, parser, table, write_section

NAMES = ("Ada", "Bram", "Cleo", "Dario", "Elin", "Femi", "Goran", "Hana", "Ivo", "Jana", "Kofi", "Lena")
TOPICS = ("home town", "employer", "first pet", "favourite book", "birth year")


def prompts_for(tok: Any, n: int) -> list[list[int]]:
    """``n`` distinct questions in the chat template with its default system turn (the raw format without one)."""
    from remnant.models.prompts import PromptFormat, render_prompt_ids

    fmt = PromptFormat.for_tokenizer(tok)
    questions = [f"What is the {t} of {name}?" for t in TOPICS for name in NAMES][:n]
    return [render_prompt_ids(tok, q, fmt) for q in questions]


def pruned(model: Any, ids: Any, mask: Any, new: int, eos: int | None, shared: bool) -> list[list[int]]:
    from remnant.models.greedy import MIN_SHARED, greedy_pruned

    at_least = MIN_SHARED if shared else ids.shape[1] + 1  # longer than every prompt: no shared-prefix pass
    out = greedy_pruned(model, ids, mask, max_new_tokens=new, eos_token_id=eos, min_shared=at_least)
    assert out is not None, "the model's cache cannot drop rows"
    return out


def generate(model: Any, ids: Any, mask: Any, new: int, eos: int | None, pad: int) -> list[list[int]]:
    """``generate``'s greedy tokens per row, cut after the first end-of-sequence token as remnant's are."""
    import torch

    with torch.inference_mode():
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=new,
            do_sample=False,
            eos_token_id=eos,
            pad_token_id=pad,
        )
    rows = out[:, ids.shape[1] :].tolist()
    return [row[: row.index(eos) + 1] if eos in row else row for row in rows]


def main() -> None:
    from remnant.models.greedy import shared_length
    from remnant.models.prompts import padded

    args = parser(__doc__ or "").parse_args()
    rows = []
    for label, model, tok in models(args):
        n, new = 25, 32
        prompts = prompts_for(tok, n)
        pad = int(tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
        eos = tok.eos_token_id
        ids, mask = padded(prompts, pad)
        ours = partial(pruned, model, ids, mask, new, eos, True)
        against_generate = compare(
            ours, partial(generate, model, ids, mask, new, eos, pad), repeats=args.repeats
        )
        against_unshared = compare(
            ours, partial(pruned, model, ids, mask, new, eos, False), repeats=args.repeats
        )
        reference = against_generate.base_result
        rows.append(
            [
                label,
                f"{n} × ≤{new}",
                f"{shared_length(prompts)} of {min(map(len, prompts))}–{max(map(len, prompts))}",
                f"{against_generate.base:.2f} s",
                f"{against_unshared.base:.2f} s",
                f"{against_generate.fast:.2f} s",
                f"**{against_generate.speedup:.2f}×** / **{against_unshared.speedup:.2f}×**",
                f"{against_unshared.base_result == reference} / {against_generate.fast_result == reference}",
            ]
        )
    body = table(
        [
            "model",
            "prompts × new tokens",
            "shared prefix (tokens of prompt lengths)",
            "generate",
            "remnant, no shared-prefix pass",
            "remnant",
            "speed-up vs generate / vs no shared pass",
            "generate's tokens: no shared pass / remnant",
        ],
        rows,
    )
    body += (
        f"\n\nfp32, batch of all prompts left-padded, median of {args.repeats} alternated runs (each comparison "
        "timed on its own, so the remnant column is the first comparison's). The tiny model's template has no "
        "system turn, so its prompts share only the template's first tokens."
    )
    write_section(
        "generate", "Greedy generation: remnant's decoder vs generate", body, write=not args.no_write
    )


if __name__ == "__main__":
    main()
