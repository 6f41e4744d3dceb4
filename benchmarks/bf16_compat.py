"""bf16 and ``compat="openunlearning"``: the forget loss of NPO, UNDIAL and CE-U on a bf16 model, three ways
(docs/methods.md, "bf16"):

- remnant: the method's ``loss`` with ``compat="openunlearning"`` (logits upcast to fp32 before the softmax);
- theirs in bf16: OpenUnlearning's arithmetic in the model's dtype, as their trainers run it on bf16 logits
  (``compute_batch_nll``'s cross-entropy over a (B, V, T) view and its sum, ``compute_dpo_loss``,
  ``compute_undial_loss``, CE-U's loss; written here from their code's semantics, as the unit tests do);
- float64: the same formula on the same bf16 logits, upcast: the loss those logits define.

Same bf16 weights, same batch, one forward per model: any difference is the loss arithmetic alone. The batch is
the unit tests' right-padded micro-batch (tests/unit/train/_methods_installed.py); the policy is the model with
noise of ``--noise`` × each tensor's std added, the reference the model itself. Prints a table; writes nothing.

    .venv/bin/python benchmarks/bf16_compat.py [--smollm2] [--rows 4]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "unit" / "train"))
from _common import smollm2, tiny_model  # noqa: E402

IGNORE = -100


def batch_nll(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Their ``compute_batch_nll``: cross-entropy over the (B, V, T) view, summed over T, in ``logits``' dtype."""
    per_token = F.cross_entropy(
        logits[..., :-1, :].transpose(-1, -2), labels[..., 1:], ignore_index=IGNORE, reduction="none"
    )
    return per_token.sum(dim=-1)


def npo_theirs(policy: torch.Tensor, ref: torch.Tensor, labels: torch.Tensor, beta: float) -> torch.Tensor:
    """``compute_dpo_loss`` without a winner: −(2/β)·mean logsigmoid(−β·(−(nll − nll_ref)))."""
    lose_ratio = -(batch_nll(policy, labels) - batch_nll(ref, labels))
    return -2.0 / beta * F.logsigmoid(beta * (0.0 - lose_ratio)).mean()


def undial_theirs(policy: torch.Tensor, ref: torch.Tensor, labels: torch.Tensor, beta: float) -> torch.Tensor:
    """``compute_undial_loss``: every position, a −100 label taken as index V − 100."""
    student, teacher, next_labels = policy[..., :-1, :], ref[..., :-1, :], labels[..., 1:]
    mask = torch.zeros_like(teacher)
    mask[
        torch.arange(mask.shape[0]).view(-1, 1, 1),
        torch.arange(mask.shape[1]).view(1, -1, 1),
        next_labels[..., None],
    ] = 1.0
    soft = F.softmax(teacher - mask * beta, dim=-1)
    flat = student.reshape(-1, student.shape[-1])
    return F.cross_entropy(flat, soft.reshape(-1, soft.shape[-1]), reduction="none").mean()


def ceu_theirs(policy: torch.Tensor, ref: torch.Tensor, labels: torch.Tensor, n: int) -> torch.Tensor:
    """CE-U: the first ``n`` answer tokens dropped, the true token's logit −inf in the detached target."""
    valid = labels != IGNORE
    next_labels = labels.masked_fill((valid.cumsum(-1) <= n) & valid, IGNORE)[:, 1:]
    keep = next_labels != IGNORE
    z, y = policy[:, :-1][keep], next_labels[keep]
    target = F.softmax(z.detach().scatter(-1, y[:, None], float("-inf")), dim=-1)
    return F.cross_entropy(z, target, reduction="mean")


def measure(label: str, model: Any, tok: Any, rows: int, noise: float) -> list[str]:
    from _methods_installed import micro_batch  # type: ignore[import-not-found,unused-ignore]
    from bench_uds import perturbed

    from remnant import registry
    from remnant.train.methods.base import StepContext

    policy = perturbed(model, noise, 7).to(torch.bfloat16).eval()  # a copy, perturbed in fp32
    reference = model.to(torch.bfloat16).eval()
    batch = micro_batch(tok, rows)
    forget = batch.forget
    with torch.no_grad():
        z = policy(input_ids=forget["input_ids"], attention_mask=forget["attention_mask"]).logits
        z_ref = reference(input_ids=forget["input_ids"], attention_mask=forget["attention_mask"]).logits
    labels = forget["labels"]
    ctx = StepContext(reference=reference, generator=torch.Generator().manual_seed(0))
    Theirs = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    cases: dict[str, tuple[dict[str, float], Theirs]] = {
        "npo": ({"alpha": 0.0}, lambda a, b: npo_theirs(a, b, labels, 0.1)),
        "undial": ({}, lambda a, b: undial_theirs(a, b, labels, 10.0)),
        "ceu": ({}, lambda a, b: ceu_theirs(a, b, labels, 1)),
    }
    out = []
    for name, (params, theirs) in cases.items():
        method = registry.create("method", name, {**params, "compat": "openunlearning"})
        with torch.no_grad():
            ours = float(method.loss(policy, batch, ctx).parts["forget"])
            bf16 = float(theirs(z, z_ref))
            f64 = float(theirs(z.double(), z_ref.double()))
        out.append(
            f"| {label} | {name} | {f64:.5f} | {ours:.5f} | {bf16:.5f} | {abs(ours - f64):.1e} | {abs(bf16 - f64):.1e} "
            f"| {abs(ours - bf16):.1e} |"
        )
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smollm2", action="store_true", help="also SmolLM2-135M-Instruct (zoo cache)")
    p.add_argument("--rows", type=int, default=4, help="forget rows in the micro-batch (default 4)")
    args = p.parse_args()
    torch.set_num_threads(1)
    lines = [
        "| model | method | float64 of the bf16 logits | remnant (compat) | theirs in bf16 | remnant − f64 | theirs − f64 | remnant − theirs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    model, tok = tiny_model(2)
    lines += measure("tiny Llama", model, tok, args.rows, 1.0)
    if args.smollm2:
        model, tok = smollm2()
        lines += measure("SmolLM2-135M", model, tok, args.rows, 0.05)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
