"""How assessment cost grows with n (DESIGN §6): measured scoring time, and the plan's estimate of a whole run.

Measured: the unattacked baseline (``remnant.attacks.base.no_attack``: chat prompt, batched greedy generation,
normalised match) on n probes, n = 8 … 128; the ratio to the smallest n against the ratio of n shows whether
cost is linear (batching makes small n relatively dear). Estimated: ``remnant plan`` on the tiny-sized test
config of tests/integration with ``probe.max_n`` raised, which counts every token an assessment will process.
The growth with the number of models in a sweep is not measured: remnant has no sweep runner yet.
"""

from __future__ import annotations

import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

from _common import ROOT, models, parser, table, timed, write_section

SIZES = (8, 16, 32, 64, 128)


def probes(n: int) -> list[Any]:
    from remnant.score.probe import Probe

    return [
        Probe(f"p{i}", f"Name the town person {i} comes from.", "Vessiburg", ("Vessiburg",)) for i in range(n)
    ]


def plan_growth() -> list[list[str]]:
    """``remnant plan`` minutes and tokens for one minted Class D config at increasing probe.max_n."""
    sys.path.insert(0, str(ROOT / "tests" / "integration"))
    from assess_fixtures import write_config

    from remnant.assess.plan import CPU_THROUGHPUT, make_plan
    from remnant.config import load_config

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = None
        for n in (25, 50, 100, 200):
            text = {
                '[target]\npack = "{p}"\n'.replace("{p}", str(Path(tmp) / "pack")): (
                    '[target.mint]\nclass = "D"\nentities = 400\ncontrols = 20\nrepetitions = 1\n'
                ),
                "max_n = 6": f"max_n = {n}",
            }
            config = write_config(
                Path(tmp) / f"c{n}.toml", pack=Path(tmp) / "pack", control=Path(tmp), **text
            )
            plan = make_plan(load_config(config))
            data = plan.to_json()
            minutes = plan.minutes(CPU_THROUGHPUT)
            cells = sum(s.seconds(CPU_THROUGHPUT) for s in plan.steps if s.stage == "cells") / 60
            base = base or cells
            rows.append(
                [
                    f"{plan.probe_n}",
                    f"{data['forward_tokens']:,}",
                    f"{data['generated_tokens']:,}",
                    f"{minutes:.1f}",
                    f"{cells:.1f}",
                    f"{cells / base:.2f}",
                ]
            )
    return rows


def main() -> None:
    args = parser(__doc__ or "").parse_args()
    from remnant.attacks.base import AttackContext, no_attack
    from remnant.models.prompts import PromptFormat

    body = ""
    for label, model, tok in models(args):
        ctx = AttackContext(
            model=model, tokenizer=tok, fmt=PromptFormat.for_tokenizer(tok), seed=7, max_new_tokens=16
        )
        sizes = SIZES if label.startswith("tiny") else SIZES[:4]
        times = {n: timed(partial(no_attack, ctx, probes(n)), repeats=args.repeats) for n in sizes}
        first = sizes[0]
        rows = [
            [
                str(n),
                f"{times[n]:.3f} s",
                f"{1000 * times[n] / n:.1f} ms",
                f"{n / first:g}",
                f"**{times[n] / times[first]:.2f}**",
            ]
            for n in sizes
        ]
        body += f"\n\n**{label}**, unattacked scoring, 16 new tokens, batches of 16:\n\n"
        body += table(["n", "time", "per item", "n ratio", "time ratio"], rows)
    body += "\n\n**`remnant plan`** of the tiny-model test config (a minted Class D pack), CPU basis of DESIGN §3:\n\n"
    body += table(
        ["P n", "forward tokens", "generated tokens", "whole run, min", "cells only, min", "cells ratio"],
        plan_growth(),
    )
    body += (
        f"\n\nMedians of {args.repeats} runs. Measured scoring is linear in n once batches are full (n ≥ 16). "
        "In the plan, cells that score P grow linearly in n, while utility cells, relearning's training and "
        "state building (installing and removing) do not depend on P's n, so the totals grow more slowly than n. "
        "Growth with the number of models in a sweep is not measured (no sweep runner yet)."
    )
    write_section("scaling", "Assessment cost vs n", body, write=not args.no_write)


if __name__ == "__main__":
    main()
