"""Evaluation throughput as a fraction of the machine's measured matmul peak (DESIGN §3, §6).

The baseline is this process's own fp32 matrix-multiply rate (square 1024 and 2048 products; the better one is
the peak). The forward pass is timed on a 16 × 128-token batch (the scoring shape) without gradient; its work is
counted as 2 FLOPs per weight per token for every matrix in the blocks and the output head, plus the causal
attention products (2 · layers · (seq/2) · hidden · 2 per token). The fraction says how much of the CPU the
scoring path uses; the tiny model is overhead-bound by construction and is shown for contrast.
"""

from __future__ import annotations

from typing import Any

from _common import models, parser, table, timed, write_section


def matmul_peak(repeats: int) -> tuple[float, int]:
    """Best fp32 GFLOP/s over square products of size 1024 and 2048, and the size that reached it."""
    import torch

    best, size = 0.0, 0
    gen = torch.Generator().manual_seed(0)
    for n in (1024, 2048):
        a, b = torch.randn(n, n, generator=gen), torch.randn(n, n, generator=gen)
        seconds = timed(lambda a=a, b=b: torch.mm(a, b), repeats=repeats)
        rate = 2 * n**3 / seconds / 1e9
        if rate > best:
            best, size = rate, n
    return best, size


def forward_flops_per_token(model: Any, seq: int) -> float:
    """2 FLOPs per matrix weight (blocks and head; embeddings are lookups) plus causal attention, per token."""
    import torch

    matrices = sum(
        m.weight.numel()
        for name, m in model.named_modules()
        if isinstance(m, torch.nn.Linear) and "embed" not in name
    )
    cfg = model.config
    attention = 2 * cfg.num_hidden_layers * (seq / 2) * cfg.hidden_size * 2
    return 2.0 * matrices + attention


def main() -> None:
    args = parser(__doc__ or "").parse_args()
    import torch

    batch, seq = 16, 128
    sets = models(args)
    peak, size = matmul_peak(args.repeats)
    rows = []
    for label, model, tok in sets:
        gen = torch.Generator().manual_seed(1)
        ids = torch.randint(0, len(tok), (batch, seq), generator=gen)

        def forward(ids: Any = ids, model: Any = model) -> None:
            with torch.no_grad():
                model(input_ids=ids)

        seconds = timed(forward, repeats=args.repeats)
        tokens_per_s = batch * seq / seconds
        gflops = forward_flops_per_token(model, seq) * tokens_per_s / 1e9
        rows.append(
            [
                label,
                f"{tokens_per_s:,.0f}",
                f"{gflops:.1f}",
                f"{peak:.1f} (n = {size})",
                f"**{gflops / peak:.0%}**",
            ]
        )
    body = table(
        ["model", "forward tokens/s", "achieved GFLOP/s", "fp32 matmul peak GFLOP/s", "fraction"], rows
    )
    body += (
        f"\n\nForward pass of a {batch} × {seq}-token batch, fp32, no gradient, median of {args.repeats} runs; "
        "the peak is measured in the same process just before. DESIGN §3 recorded 460 tokens/s for SmolLM2 on "
        "this machine's 2 cores with both threads free."
    )
    write_section("throughput", "Evaluation throughput vs matmul peak", body, write=not args.no_write)


if __name__ == "__main__":
    main()
