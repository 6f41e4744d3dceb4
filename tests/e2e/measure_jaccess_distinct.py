"""Measure J-Access's criterion on SmolLM2: is the NPO model's access above the retain-only level?

Not a test: the script behind the J-Access tables in docs/latent.md, with the knobs the slow test fixes (lens
prompts, k). ``--recipe jaccess`` (default) reads ``canary_states.JACCESS_RECIPE``'s states (one home town per
person, each town's first token at least three characters and no other town's, 16 forget people), the states
``test_e2e_access.py`` asserts on; ``--recipe canary`` reads ``SMALL_RECIPE``'s states (towns drawn with
replacement, one-letter first tokens; the states the slow tests shared when docs/latent.md measured them), where the retain-only anchor knows some forget towns. It builds (or
reuses) the control, installed (100 %) and NPO states and the retain-only (0 %) model, fits the Jacobian lens on
the installed model, and prints κ per state and, per k and readout (Jacobian lens, without generic tokens, logit
lens), A(NPO) / A(100 %) / A(0 %) on NPO's silent probes, the paired 2x2 and A(NPO) − A(0 %) with Newcombe's
paired interval.

    OMP_NUM_THREADS=1 REMNANT_TEST_STATES=/tmp/remnant-states \\
        .venv/bin/python tests/e2e/measure_jaccess_distinct.py --lens-prompts 6 --k 10 20 50 --json /tmp/j.json

One torch thread (these machines have two cores); what each stage takes: docs/latent.md, "J-Access on states
built for it".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", choices=("jaccess", "canary"), default="jaccess")
    parser.add_argument(
        "--lens-prompts", type=int, default=6, help="generic paragraphs the lens is fitted on"
    )
    parser.add_argument("--k", type=int, nargs="*", default=[10], help="top-k values to read at")
    parser.add_argument(
        "--layers",
        type=int,
        nargs=2,
        default=None,
        metavar=("FIRST", "LAST"),
        help="read blocks FIRST..LAST only",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    from canary_states import JACCESS_RECIPE, SMALL_RECIPE, STAGES, build_canary_states, score_sets
    from jaccess_measure import LENS, LENS_TEXT, audit_inputs, measure

    from remnant.latent.jacobian_lens import fit_lens
    from remnant.models import zoo
    from remnant.train.data import as_qa

    base = Path(os.environ.get("REMNANT_TEST_STATES", "/tmp/remnant-states"))
    t0 = time.perf_counter()
    recipe = JACCESS_RECIPE if args.recipe == "jaccess" else SMALL_RECIPE
    cs = build_canary_states(zoo.fetch("smollm2-135m-instruct"), base, recipe, STAGES)
    print(f"states {cs.root} ({time.perf_counter() - t0:.0f} s)", flush=True)
    fmt, attrs = cs.fmt(), cs.attributes
    t0 = time.perf_counter()
    inputs = audit_inputs(cs)
    tok, states = inputs.tok, inputs.states
    probe_items, decoy_items = inputs.probe_items, inputs.decoy_items
    print(f"models loaded, retain-only built or reused ({time.perf_counter() - t0:.0f} s)", flush=True)
    sets = {"forget": as_qa(probe_items, attrs), "retain": as_qa(inputs.retained_items, attrs)}
    kappa = {n: score_sets(m, tok, sets, fmt) for n, m in states.items()}
    print("κ (teacher-forced greedy match, k/n) " + json.dumps(kappa), flush=True)

    t0 = time.perf_counter()
    lens_prompts = [list(tok(text)["input_ids"]) for text in LENS_TEXT[: args.lens_prompts]]
    lens = fit_lens(states["100%"], lens_prompts, LENS, cache_dir=cs.root / "latent-cache")
    print(f"lens on {lens.n_prompts} prompts ({time.perf_counter() - t0:.0f} s)", flush=True)
    t0 = time.perf_counter()
    band = tuple(range(args.layers[0], args.layers[1] + 1)) if args.layers else None
    rows = measure(states, tok, fmt, probe_items, decoy_items, lens, tuple(args.k), band)
    for row in rows:
        print(row.line(len(probe_items)), flush=True)
    print(f"readouts ({time.perf_counter() - t0:.0f} s)")
    if args.json is not None:
        figures = {
            "recipe": args.recipe,
            "states": str(cs.root),
            "kappa": kappa,
            "lens_prompts": lens.n_prompts,
            "rows": [
                {"k": r.k, "readout": r.label, "cells": r.cells, "generic": list(r.generic)}
                | r.result.model_dump(mode="json")
                for r in rows
            ],
        }
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
