"""κ scoring: teacher-forced greedy match against generate-and-compare, and batched against per-item (R6).

``remnant.score.capability.greedy_match`` decides "greedy decoding reproduces every answer token" from one
teacher-forced forward pass per batch; the baseline generates the greedy continuation (``generate_greedy``, the
harness's generation path, batched and left-padded) and compares it with the answer. Half of the items carry
the model's own greedy continuation as the answer (a match) and half the same with its last token changed (no
match), so both decisions occur; the two paths must agree on every item. A second row times the teacher-forced
path one item at a time, the figure for batching; a third the same path with logits at every position
(``full_logits=True``, the output head on the whole prompt), the figure for computing the head on the
answer-predicting rows only (``logits_to_keep``).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from _common import compare, models, parser, table, write_section

REAL_QUESTIONS = [
    "What is the capital of France?",
    "Name a primary colour.",
    "What is the largest planet in the solar system?",
    "Who wrote Romeo and Juliet?",
    "What gas do plants absorb from the air?",
    "How many legs does a spider have?",
    "What is the boiling point of water in Celsius?",
    "Name an animal that lives in the sea.",
]


def items(model: Any, tok: Any, questions: list[str], length: int) -> tuple[list[Any], list[list[int]]]:
    """Encoded pairs (own continuation, and a one-token corruption of it) and their prompts."""
    from remnant.models.prompts import EncodedPair, PromptFormat, encode_pair
    from remnant.score.capability import generate_greedy_ids

    fmt = PromptFormat.for_tokenizer(tok)
    pairs, prompts = [], []

    def decoded(ids: list[int]) -> str:
        return str(tok.decode(ids, skip_special_tokens=True))

    for q in questions:
        prompt = encode_pair(tok, q, "x", fmt)
        head = prompt.input_ids[: prompt.prompt_len]
        own = generate_greedy_ids(model, tok, head, max_new_tokens=length)
        # the corrupted last token must also decode differently, as scoring decodes: byte tokens can all decode to
        # U+FFFD, and a special token (SmolLM2's end of turn + 1) vanishes with skip_special_tokens
        shift = 1
        while decoded([*own[:-1], (own[-1] + shift) % len(tok)]) == decoded(own):
            shift += 1
        wrong = [*own[:-1], (own[-1] + shift) % len(tok)]
        for answer in (own, wrong):
            pairs.append(EncodedPair(head + answer, [-100] * len(head) + answer, len(head), answer))
            prompts.append(head)
    return pairs, prompts


LENGTH, BATCH = 8, 16


def measure(label: str, model: Any, tok: Any, repeats: int) -> list[list[str]]:
    """The three rows of one model: against generation, against batch 1, and against all-position logits."""
    from remnant.score.capability import generate_greedy, greedy_match

    length, batch = LENGTH, BATCH
    rows: list[list[str]] = []
    tiny = label.startswith("tiny")
    if tiny:
        # sorted: the vocabulary dict's order differs from one process to the next
        words = sorted(w for w in tok.get_vocab() if w.isalpha())[:64]
        questions = [" ".join(words[i : i + 4]) for i in range(0, 64, 2)]
    else:
        questions = [f"{q} Answer briefly ({i})." for i, q in enumerate(REAL_QUESTIONS * 2)]
    saved = model.generation_config.eos_token_id
    model.generation_config.eos_token_id = None  # exactly `length` tokens: compare the whole answer
    try:
        pairs, prompts = items(model, tok, questions, length)
        vs_gen = compare(
            partial(greedy_match, model, pairs, batch_size=batch),
            partial(generate_greedy, model, tok, prompts, max_new_tokens=length, batch_size=batch),
            repeats=repeats,
        )
        vs_one = compare(
            partial(greedy_match, model, pairs, batch_size=batch),
            partial(greedy_match, model, pairs, batch_size=1),
            repeats=repeats,
        )
        vs_full = compare(
            partial(greedy_match, model, pairs, batch_size=batch),
            partial(greedy_match, model, pairs, batch_size=batch, full_logits=True),
            repeats=repeats,
        )
        texts = vs_gen.base_result
        out = {
            "tf": vs_gen.fast_result,
            "one": vs_one.base_result,
            "full": vs_full.base_result,
            "gen": [
                t == tok.decode(p.answer_ids, skip_special_tokens=True)
                for t, p in zip(texts, pairs, strict=True)
            ],
        }
    finally:
        model.generation_config.eos_token_id = saved
    agree = sum(a == b for a, b in zip(out["tf"], out["gen"], strict=True))
    matches = sum(out["tf"])
    assert out["one"] == out["tf"], "batching changed a teacher-forced decision"
    assert out["full"] == out["tf"], "logits on the answer rows only changed a teacher-forced decision"
    n = len(pairs)
    rows.append(
        [
            label,
            f"{n} ({matches} match)",
            "generate + compare",
            f"{vs_gen.base:.2f} s",
            f"{vs_gen.fast:.3f} s",
            f"**{vs_gen.speedup:.1f}×**",
            f"{agree}/{n}",
        ]
    )
    rows.append(
        [
            label,
            f"{n}",
            "teacher-forced, batch 1",
            f"{vs_one.base:.2f} s",
            f"{vs_one.fast:.3f} s",
            f"**{vs_one.speedup:.1f}×**",
            f"{n}/{n}",
        ]
    )
    rows.append(
        [
            label,
            f"{n}",
            "teacher-forced, logits at every position",
            f"{vs_full.base:.2f} s",
            f"{vs_full.fast:.3f} s",
            f"**{vs_full.speedup:.1f}×**",
            f"{n}/{n}",
        ]
    )
    rows.append(by_length_row(label, model, tok, repeats))
    return rows


def canary_pairs(tok: Any) -> list[Any]:
    """The install split of a 24-person canary pack (every attribute), as the installs and stop checks score it:
    questions and answers of varied length in the pack's order."""
    from remnant.models.prompts import PromptFormat, encode_pair
    from remnant.packs import ClassDSpec, mint_class_d
    from remnant.train.data import as_qa

    pack = mint_class_d(ClassDSpec(entities=24, controls=8, general=True, seed=7))
    attributes = tuple(sorted({it.attribute for it in pack.split("install")}))
    fmt = PromptFormat("chat", system_prompt="") if tok.chat_template else PromptFormat("raw")
    return [encode_pair(tok, q.question, q.answer, fmt) for q in as_qa(pack.split("install"), attributes)]


def by_length_row(label: str, model: Any, tok: Any, repeats: int) -> list[str]:
    """Batches of 32 cut in order of length (the default) against batches in the pairs' own order."""
    from remnant.score.capability import greedy_match

    pairs = canary_pairs(tok)
    vs_order = compare(
        partial(greedy_match, model, pairs, batch_size=32),
        partial(greedy_match, model, pairs, batch_size=32, by_length=False),
        repeats=repeats,
    )
    same = sum(a == b for a, b in zip(vs_order.fast_result, vs_order.base_result, strict=True))
    n = len(pairs)
    return [
        label,
        f"{n} (canary pack)",
        "teacher-forced, batches of 32 in the pack's order",
        f"{vs_order.base:.2f} s",
        f"{vs_order.fast:.3f} s (by length)",
        f"**{vs_order.speedup:.2f}×**",
        f"{same}/{n}",
    ]


def main() -> None:
    args = parser(__doc__ or "").parse_args()
    length, batch = LENGTH, BATCH
    rows = []
    for label, model, tok in models(args):
        rows += measure(label, model, tok, args.repeats)
    body = table(
        [
            "model",
            "items",
            "baseline",
            "baseline time",
            f"teacher-forced, batch {batch}",
            "speed-up",
            "same decision",
        ],
        rows,
    )
    body += (
        f"\n\nAnswers of {length} tokens (end-of-sequence disabled while generating so the whole answer is "
        f"compared); batches of {batch}; median of {args.repeats} alternated runs. Generation compares decoded "
        "text, as scoring does; an item where it disagrees with the teacher-forced decision would show in the "
        "last column (left-padding may, rarely, change a near-tie argmax). With a chat template the prompt "
        "(~40 tokens here) dominates the cost and both paths pay for it once. `greedy_match` applies the output "
        "head (SmolLM2's is 49,152 words wide, about a quarter of a block stack's work per position, so about "
        "1.3× is all there is to gain) only on the rows that predict answer tokens, through transformers' boolean `logits_to_keep`; the last row is the "
        "same pass with the head on every prompt position (`full_logits=True`, the path before), which made "
        "teacher forcing no faster than generation on SmolLM2 (0.9×, measured 2026-12-03). The last row scores "
        "the install split of a 24-person canary pack (chat format, every attribute) in batches of 32 cut in "
        "order of length, the default, against batches in the pack's order, each padded to its longest row."
    )
    write_section(
        "greedy_match", "κ: teacher-forced greedy match vs generation", body, write=not args.no_write
    )


if __name__ == "__main__":
    main()
