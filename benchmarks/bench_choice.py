"""Forced choice by option log-likelihood: one batched forward per item against one forward per option (R6, D-3.1).

``remnant.score.kappa.choice_by_loglik`` (what pack binding and, through ``answer_loglikelihoods``, Class D
linkability use) scores every option of an item in one right-padded forward whose output head reads only the
answer positions, the question's prompt run once and its cache repeated to every option. The baseline is the path
before: one forward per option with the head on every position, the summed log-probability of the option's tokens
read from the full log-softmax. Items are the link items of a minted Class D pack (four options each: the entity's employer and three others'), asked in the model's own
prompt format; both paths must pick the same option on every item.
"""

from __future__ import annotations

from typing import Any

from _common import compare, models, parser, table, write_section


def per_option(model: Any, tok: Any, fmt: Any, probe: Any) -> int:
    """The baseline: one forward per option, every position's logits."""
    import torch

    from remnant.models.prompts import continuation, render_prompt_ids

    prompt = render_prompt_ids(tok, probe.question, fmt)
    scores = []
    with torch.no_grad():
        for option in probe.options:
            answer = list(tok(continuation(fmt, option), add_special_tokens=False)["input_ids"])
            ids = torch.tensor([prompt + answer])
            logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), dim=-1)
            scores.append(float(logp[len(prompt) - 1 :].gather(1, ids[0, len(prompt) :, None]).sum()))
    return max(range(len(scores)), key=scores.__getitem__)


def measure(label: str, model: Any, tok: Any, repeats: int) -> list[str]:
    from remnant.models.prompts import PromptFormat
    from remnant.packs import ClassDSpec, mint_class_d
    from remnant.score.kappa import choice_by_loglik
    from remnant.score.probe import Probe

    pack = mint_class_d(ClassDSpec(entities=20, controls=10, seed=11, general=False))
    probes = [
        Probe.from_item(it) for s in ("probe", "retain", "controls") for it in pack.split(s) if it.options
    ]
    fmt = PromptFormat.for_tokenizer(tok)
    t = compare(
        lambda: [choice_by_loglik(model, tok, fmt, p) for p in probes],
        lambda: [per_option(model, tok, fmt, p) for p in probes],
        repeats=repeats,
    )
    same = sum(a == b for a, b in zip(t.fast_result, t.base_result, strict=True))
    options = sorted({len(p.options or ()) for p in probes})
    return [
        label,
        f"{len(probes)} × {'/'.join(map(str, options))} options",
        f"{t.base:.2f} s",
        f"{t.fast:.2f} s",
        f"{t.speedup:.2f}×",
        f"{same}/{len(probes)}",
    ]


def main() -> None:
    args = parser(__doc__ or "").parse_args()
    rows = [measure(label, model, tok, args.repeats) for label, model, tok in models(args)]
    header = ["model", "items", "per option, all logits", "batched, answer logits", "speed-up", "same choice"]
    body = table(header, rows)
    body += (
        f"\n\nMedian of {args.repeats} alternated runs after a warm-up of each. The baseline pays for the prompt "
        "once per option; the batched path runs the question once and repeats its cache to every option, with the "
        "output head on the answer tokens only (with a chat template the ~40-token prompt dominates). Reproduce: "
        "`.venv/bin/python benchmarks/bench_choice.py --smollm2 --repeats 3`."
    )
    write_section(
        "choice",
        "Forced choice: batched option log-likelihoods vs one forward per option",
        body,
        write=not args.no_write,
    )


if __name__ == "__main__":
    main()
