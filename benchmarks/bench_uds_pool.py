"""UDS over a pool: per-model cost of remnant's stage 2 against the UDS reference code's, at equal scores.

A pool of ``--models`` models shares one full and one retain model (SmolLM2-135M-Instruct and weight-perturbed
copies of it: each pool model is a different perturbation, so every model has its own UDS). Both tools cache
stage 1 (retain patched into full) once for the pool; each pool model then costs one stage 2.

- remnant: ``stage1`` once, then ``score_source`` per model (the fast path: the target's prefix keys and values
  kept from stage 1, one window forward whose batch grows along the depth). A pool knows its models' digests,
  so ``source_digest`` is passed, as the sweep passes its state digests.
- the reference: ``compute_uds.py``'s ``_run_s1_s2_side_by_side_logprob_batch`` from a checkout of
  ``gnueaj/unlearning-depth-score`` (``--reference DIR`` or ``REMNANT_UDS_REFERENCE``; never vendored), imported as
  it is, at its command line's defaults
  (batch size 1, S1 cache on, every layer): the first model computes and saves stage 1, every later one reads
  it. Its per-model run also greedily generates 30 tokens from the retain and the audited model per example
  for its log; that is part of what it costs per model, and is reported separately.

The two are timed in alternation, one pool model at a time; the figure is the ratio of the medians of the
per-model costs. The examples are the first ``--examples`` records of the reference's own
``tofu_data/forget10_filtered.json``, read by each tool its own way; each model's UDS and every example's
score must agree (the script fails otherwise). Run: ``.venv/bin/python benchmarks/bench_uds_pool.py --smollm2
--reference DIR`` (DIR: ``git clone https://github.com/gnueaj/unlearning-depth-score``); without ``--smollm2`` and a
checkout named the script says so and measures nothing (a plain ``make bench`` runs it that way).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _common import parser, setup, smollm2, table, write_section
from bench_uds import perturbed

#: Largest accepted difference between the two tools' UDS (float32 arithmetic in a different order).
TOLERANCE = 1e-4


def reference_module(checkout: Path) -> Any:
    """The reference's ``compute_uds`` module, imported from ``checkout``."""
    if not (checkout / "compute_uds.py").is_file():
        sys.exit(
            f"--reference {checkout}: no compute_uds.py there (a checkout of gnueaj/unlearning-depth-score)"
        )
    sys.path.insert(0, str(checkout))
    import compute_uds

    return compute_uds


def run_reference(
    ref: Any, full: Any, retain: Any, source: Any, tok: Any, records: list[Any], cache: Any
) -> Any:
    """One pool model through the reference: (per-example UDS, mean UDS, the S1 cache it wrote or was given)."""
    layers = list(range(len(full.model.layers)))
    with (
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
    ):  # its log, bars
        results, mean, _, _, written = ref._run_s1_s2_side_by_side_logprob_batch(
            retain,
            source,
            full,
            tok,
            records,
            layers,
            s1_cache_entries=cache,
            save_s1_cache=cache is None,
            batch_size=1,
        )
    return [r["uds"] for r in results], mean, cache if cache is not None else written


def generation_share(ref: Any, model: Any, tok: Any, records: list[Any]) -> float:
    """Seconds the reference spends per model on its log's greedy generations (retain and audited model)."""
    start = time.perf_counter()
    for item in records:
        ref.generate_baseline(model, tok, f"Question: {item['question']}\nAnswer: {item['prefix']}", 30)
    return 2 * (time.perf_counter() - start)  # one model timed; the reference generates from two


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument(
        "--reference",
        type=Path,
        default=os.environ.get("REMNANT_UDS_REFERENCE") or None,
        help="checkout of gnueaj/unlearning-depth-score (default: $REMNANT_UDS_REFERENCE)",
    )
    p.add_argument("--models", type=int, default=10, help="pool models sharing one full and retain model")
    p.add_argument("--examples", type=int, default=4, help="first N records of forget10_filtered.json")
    args = p.parse_args()
    if args.reference is None or not args.smollm2:
        print(
            "bench_uds_pool: runs with --smollm2 and --reference (or REMNANT_UDS_REFERENCE), the UDS reference's "
            "checkout; nothing measured"
        )
        return
    setup(args)
    ref = reference_module(args.reference)

    from remnant.latent.cache import model_digest
    from remnant.latent.uds import UDSConfig, score_source, stage1
    from remnant.latent.uds_data import load_uds_examples

    data = args.reference / "tofu_data" / "forget10_filtered.json"
    records = json.loads(data.read_text())[: args.examples]
    examples = load_uds_examples(data)[: args.examples]
    full, tok = smollm2()
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token  # as the reference's load_tokenizer does
    retain = perturbed(full, 0.05, 1)
    pool = [perturbed(full, 0.01 + 0.004 * k, 10 + k) for k in range(args.models)]
    digests = [model_digest(m) for m in pool]
    cfg = UDSConfig(uds_compat=True)  # the reference reads hidden_states[l + 1] (docs/latent.md)

    start = time.perf_counter()
    s1 = stage1(full, retain, tok, examples, cfg)
    ours_stage1 = time.perf_counter() - start
    ours, theirs, diffs, scores = [], [], [], []
    cache = None
    for model, digest in zip(pool, digests, strict=True):
        start = time.perf_counter()
        result = score_source(full, model, s1, cfg, source_digest=digest)
        ours.append(time.perf_counter() - start)
        start = time.perf_counter()
        per_example, mean, written = run_reference(ref, full, retain, model, tok, records, cache)
        seconds = time.perf_counter() - start
        if cache is None:
            ref_first, cache = seconds, written
        else:
            theirs.append(seconds)
        mine = [e.uds for e in result.examples]
        diffs.append(max(abs((a or 0.0) - (b or 0.0)) for a, b in zip(mine, per_example, strict=True)))
        scores.append((result.score, mean))
    worst = max(diffs)
    if worst > TOLERANCE:
        sys.exit(f"the two tools disagree: largest per-example UDS difference {worst:.1e} > {TOLERANCE}")
    generation = generation_share(ref, pool[0], tok, records)
    ours_med, theirs_med = statistics.median(ours), statistics.median(theirs)
    n = len(pool)
    amortised_ours = (ours_stage1 + sum(ours)) / n
    amortised_theirs = (ref_first + sum(theirs)) / n
    row = [
        "SmolLM2-135M-Instruct (30 layers, fp32)",
        f"{n} models × {len(examples)} examples",
        f"{theirs_med:.2f} s ({generation:.2f} s of it generation)",
        f"{ours_med:.2f} s",
        f"**{theirs_med / ours_med:.1f}×**",
        f"{(theirs_med - generation) / ours_med:.1f}×",
        f"{amortised_theirs / amortised_ours:.1f}×",
        f"{worst:.1e}",
        f"{min(s for s, _ in scores):.3f}–{max(s for s, _ in scores):.3f}",
    ]
    body = table(
        [
            "model",
            "pool",
            "reference per model (S1 cached)",
            "remnant per model",
            "speed-up",
            "without the reference's log generations",
            "with stage 1 amortised",
            "largest per-example UDS difference",
            "pool UDS range",
        ],
        [row],
    )
    body += (
        f"\n\nPer-model cost: the median over the pool of one model's stage 2 (remnant: every model, reading the "
        "full model's prefixes kept by stage 1; the reference: every model after the first, which computes its "
        f"S1 cache). Stage 1: remnant {ours_stage1:.2f} s, the reference's first model {ref_first:.2f} s. "
        "Both run the same model objects in fp32 on the CPU, timed in alternation; the reference at its command "
        "line's defaults (batch size 1, every layer), remnant with `uds_compat=True`, the reference's last-layer "
        'reading. "Without the reference\'s log generations" subtracts the greedy generations it makes per model '
        "for its log (30 tokens from the retain and the audited model per example), timed separately. Reproduce: "
        f"`.venv/bin/python benchmarks/bench_uds_pool.py --smollm2 --reference DIR --models {n} --examples {len(examples)}` "
        "(DIR: a checkout of gnueaj/unlearning-depth-score)."
    )
    write_section(
        "uds-pool",
        "UDS over a pool: per-model cost against the reference code",
        body,
        write=not args.no_write,
    )


if __name__ == "__main__":
    main()
