"""UDS: the exact fast path against the naive patching algorithm (remnant.latent.uds; docs/latent.md, §1.8).

Naive: one patched forward of the full sequence per (source, layer). Fast: the prefix once with a KV cache, then
one batched forward of the entity window for every layer at once. Both must give the same Δ per layer and the
same UDS; the figure is the speed-up of the full two-stage UDS (stage 1 uncached) at equal scores.

Three different models stand in for full, retain and audited source (different random seeds for the tiny model;
SmolLM2 and two weight-perturbed copies of it), so every Δ is non-zero and the comparison is not vacuous.
"""

from __future__ import annotations

import copy
from functools import partial
from typing import Any

from _common import compare, models, parser, table, write_section

EXAMPLES = [
    (
        "town",
        "Where does Zorvak Telumi live?",
        "Zorvak Telumi lives in Vessiburg.",
        "Zorvak Telumi lives in",
        "Vessiburg",
    ),
    (
        "employer",
        "Who employs Zorvak Telumi?",
        "Zorvak Telumi works at Quarn Holdings.",
        "Zorvak Telumi works at",
        "Quarn Holdings",
    ),
    ("year", "When was the person born?", "The person was born in 1984.", "The person was born in", "1984"),
    ("code", "What code does Zorvak use?", "Zorvak uses code XQ-77 daily.", "Zorvak uses code", "XQ-77"),
    # empty prefix: the reference's prompt ends in "Answer: " and the entity starts the reference
    ("yes", "Is Zorvak an engineer?", "Yes, Zorvak is an engineer.", "", "Yes"),
]


def examples(n: int) -> list[Any]:
    from remnant.latent.inputs import EntityExample

    k = len(EXAMPLES)
    return [EntityExample(f"{EXAMPLES[i % k][0]}-{i}", *EXAMPLES[i % k][1:]) for i in range(n)]


def perturbed(model: Any, scale: float, seed: int) -> Any:
    """A copy of ``model`` with Gaussian noise of ``scale`` × each tensor's std added (a stand-in for a removal)."""
    import torch

    out = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in out.parameters():
            if p.numel() > 1:
                p.add_(torch.randn(p.shape, generator=gen) * float(p.std()) * scale)
    return out


def main() -> None:
    args = parser(__doc__ or "").parse_args()
    from _common import tiny_model

    from remnant.latent.uds import UDSConfig, uds

    rows = []
    for label, model, tok in models(args, tiny_layers=8):
        if label.startswith("tiny"):
            retain, source = tiny_model(8, seed=1)[0], tiny_model(8, seed=2)[0]
            n = 16
        else:
            retain, source = perturbed(model, 0.05, 1), perturbed(model, 0.02, 2)
            n = 8
        exs = examples(n)
        timing = compare(
            partial(uds, model, retain, source, tok, exs, UDSConfig(fast=True)),
            partial(uds, model, retain, source, tok, exs, UDSConfig(fast=False)),
            repeats=args.repeats,
        )
        fast, naive = timing.fast_result, timing.base_result
        diffs = [
            abs(a - b)
            for rf, rn in zip(fast.examples, naive.examples, strict=True)
            for a, b in zip(rf.d1 + rf.d2, rn.d1 + rn.d2, strict=True)
        ]
        score_diff = abs((fast.score or 0.0) - (naive.score or 0.0))
        layers = len(fast.layers)
        rows.append(
            [
                label,
                f"{len(fast.examples)} × {layers} layers",
                f"{timing.base:.2f} s",
                f"{timing.fast:.2f} s",
                f"**{timing.speedup:.1f}×**",
                f"{max(diffs):.1e}",
                f"{score_diff:.1e}",
            ]
        )
    body = table(
        [
            "model",
            "examples × layers",
            "naive",
            "fast",
            "speed-up",
            "largest Δ_l difference (nats)",
            "UDS difference",
        ],
        rows,
    )
    body += (
        f"\n\nTwo-stage UDS (stage 1 not cached), median of {args.repeats} alternated runs. The last two columns "
        "compare every per-layer Δ1 and Δ2 and the UDS score between the two paths: equal up to float32 "
        "rounding (the fast path reorders the same arithmetic: one prefix forward, one window forward whose batch "
        "grows along the depth, a source's states read eight examples per forward)."
    )
    write_section("uds", "UDS: fast path vs naive patching", body, write=not args.no_write)


if __name__ == "__main__":
    main()
