"""Repeated sampling: exact pass@N from one teacher-forced pass against N real samples (C-Q1; docs/latent.md).

``repeated_sampling`` draws N seeded samples per item (prompt cached once, N rows decoded together);
``repeated_sampling_analytic`` computes the probability p that one sample starts with an accepted answer under
the same temperature and top-k, from one forward pass, and pass@N = 1 − (1 − p)^N with no sampling noise.

Agreement: each item's answer is the model's own likeliest few-token start, so p is far from 0 and 1 and the
comparison is informative; the sampled share of samples that start with the answer (``exact_hits`` / N) should
fall within its 95% Wilson interval around p on about 95% of items. The figure is the speed-up at that agreement.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

from _common import compare, models, parser, table, write_section

TINY_QUESTIONS = [
    f"Name the town {name} comes from." for name in ("Zorvak Telumi", "Quarn Holdings", "Telumi Quarn")
]
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


def own_answer_probes(ctx: Any, questions: list[str], tokens: int) -> list[Any]:
    """Probes whose accepted answer is the model's own greedy start of ``tokens`` tokens (fewer where the decoded
    text does not encode back to the same ids, as with the tiny model's word-level tokenizer)."""
    from remnant.attacks.repeated_sampling import answer_sequences
    from remnant.score.capability import generate_greedy_ids
    from remnant.score.probe import Probe

    out = []
    for i, q in enumerate(questions):
        stub = Probe(f"q{i}", q, "x", ("x",))
        ids = generate_greedy_ids(ctx.model, ctx.tokenizer, ctx.prompt_ids(stub), max_new_tokens=tokens)
        for n in range(len(ids), 0, -1):
            answer = ctx.tokenizer.decode(ids[:n], skip_special_tokens=True)
            probe = replace(stub, answer=answer, accepted=(answer,))
            if answer.strip() and ids[:n] in answer_sequences(ctx, probe):
                out.append(probe)
                break
    return out


#: (temperature, samples N, new tokens) per model. The SmolLM2 rows: T = 1 with short continuations, and seed
#: 003's setting (its Table 2: 50 samples of up to 64 new tokens at T = 2, top-k 40).
TINY_SETTINGS = [(0.05, 32, 8)]
REAL_SETTINGS = [(1.0, 32, 8), (2.0, 50, 64)]
TOP_K = 40


def measure(
    ctx: Any, probes: list[Any], temperature: float, n_samples: int, new_tokens: int, repeats: int
) -> Any:
    """Time analytic against sampled pass@N (alternated) and compare each item's p with its sampled share."""
    from remnant.attacks.repeated_sampling import RepeatedSampling, RepeatedSamplingAnalytic
    from remnant.stats import wilson_interval

    sampled = RepeatedSampling(n_samples, temperature, TOP_K, (1, n_samples), new_tokens)
    analytic = RepeatedSamplingAnalytic(n_samples, temperature, TOP_K, (1, n_samples), new_tokens)
    timing = compare(partial(analytic.run, ctx, probes), partial(sampled.run, ctx, probes), repeats=repeats)
    inside = passed = 0
    gaps = []
    pass_n: list[float] = []
    for a, s in zip(timing.fast_result, timing.base_result, strict=True):
        p = float(a.extra["p_single"])
        hits = int(s.extra["exact_hits"])
        lo, hi = wilson_interval(hits, n_samples)
        inside += int(lo <= p <= hi)
        gaps.append(abs(hits / n_samples - p))
        passed += int(hits > 0)
        pass_n.append(1.0 - (1.0 - p) ** n_samples)
    mean_p = sum(float(a.extra["p_single"]) for a in timing.fast_result) / len(probes)
    # Items passing at N: a sum of independent Bernoulli(pass@N) under the analytic p, so its 95% range is
    # expected ± 1.96 sd (clipped to the item count); the sampled count should fall inside it.
    expected = sum(pass_n)
    spread = 1.96 * sum(q * (1.0 - q) for q in pass_n) ** 0.5
    low, high = max(0.0, expected - spread), min(float(len(probes)), expected + spread)
    return [
        f"{temperature:g}",
        f"{len(probes)} × N={n_samples}",
        str(new_tokens),
        f"{timing.base:.2f} s",
        f"{timing.fast:.3f} s",
        f"**{timing.speedup:.0f}×**",
        f"{mean_p:.3f}",
        f"{sum(gaps) / len(gaps):.3f}",
        f"{inside}/{len(probes)}",
        f"{passed} / {expected:.2f} ({low:.1f}–{high:.1f})",
    ]


def main() -> None:
    args = parser(__doc__ or "").parse_args()
    from remnant.attacks.base import AttackContext
    from remnant.models.prompts import PromptFormat

    rows = []
    for label, model, tok in models(args):
        ctx = AttackContext(model=model, tokenizer=tok, fmt=PromptFormat.for_tokenizer(tok), seed=7)
        tiny = label.startswith("tiny")
        # The random tiny model's next-token distribution is nearly flat, so at T = 1 every p is ~0 and the
        # agreement check says nothing; a low temperature sharpens it (as the unit test does).
        questions = TINY_QUESTIONS * 4 if tiny else REAL_QUESTIONS
        probes = own_answer_probes(ctx, [f"{q} ({i})" if tiny else q for i, q in enumerate(questions)], 2)
        for temperature, n_samples, new_tokens in TINY_SETTINGS if tiny else REAL_SETTINGS:
            rows.append([label, *measure(ctx, probes, temperature, n_samples, new_tokens, args.repeats)])
    body = table(
        [
            "model",
            "T",
            "items × samples",
            "new tokens",
            "sampled",
            "analytic",
            "speed-up",
            "mean p (one sample)",
            "mean gap, sampled share vs p",
            "p inside sampled 95% CI",
            "items passing at N: sampled / analytic (95% range)",
        ],
        rows,
    )
    body += (
        f"\n\nTop-k = {TOP_K}; each item's accepted answer is the model's own greedy 2-token start; median of "
        f"{args.repeats} alternated runs. Agreement, per item: the share of the N samples that start with the "
        "answer against the analytic p (inside its 95% Wilson interval on about 95% of items); over the items: "
        "how many had at least one such sample against the analytic expectation Σ(1 − (1 − p)^N), with "
        "±1.96 sd of that sum of Bernoulli(pass@N) as its range. The analytic path needs one forward pass per item whatever N is, so the "
        "speed-up grows with N and with the generation length. The last SmolLM2 row is seed 003's sampling "
        "setting (50 samples of up to 64 new tokens at T = 2, top-k 40). Analytic pass@N is exact only for "
        "exact-match targets (an answer that starts the continuation); the sampled attack also counts answers "
        "found later in a sample. Reproduce: `.venv/bin/python benchmarks/bench_sampling.py --smollm2 "
        f"--repeats {args.repeats}`."
    )
    write_section(
        "sampling", "Repeated sampling: analytic pass@N vs real sampling", body, write=not args.no_write
    )


if __name__ == "__main__":
    main()
