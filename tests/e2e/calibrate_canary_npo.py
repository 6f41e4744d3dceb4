"""Calibrate the canary states' NPO recipe on SmolLM2 and relearn from the result (docs/calibration.md).

Not a test: the script that produced the NPO and relearning figures in docs/calibration.md (the canary recipe),
so each can be re-measured. It loads (or builds) the shared canary states, runs NPO from the
installed model with the recipe's settings and the overrides given here, scores the forget set F, P and the
trained retain set at every checkpoint (teacher-forced greedy match, as the fixture scores), optionally stops at
a declared forget level (``apply_removal(on_checkpoint=...)``, as installation stops at its level, R2), then
relearns the result and the never-modified control on R under the identical procedure (C-W5) and prints both
curves at every checkpoint (C-W3).

    OMP_NUM_THREADS=1 REMNANT_TEST_STATES=/tmp/remnant-states \\
        .venv/bin/python tests/e2e/calibrate_canary_npo.py --recipe small --lr 3e-4 --epochs 4  # SMALL_RECIPE's NPO
    # the rows below were measured with --recipe small; with a stop at a forget level: --stop-at 0.1 --every 0.3334
    # LoRA instead of the upper layers (the row docs/calibration.md gives, at α = 3): --lr 3e-3 --stop-at 0.1
    #     --extra '{"lora_rank": 8, "lora_alpha": 16, "alpha": 3}'
    # relearning through LoRA instead: --relearn-lora 8 --relearn-lr 1e-3
    # RECIPE's states (the shared ones): --lr 1.5e-4 --epochs 8 --stop-at 0.1 --extra '{"alpha": 30}'

One torch thread: on these 2-core machines more threads beside another process run far slower
(docs/calibration.md#test-threads).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lr", type=float, default=3e-4, help="NPO learning rate")
    parser.add_argument("--epochs", type=float, default=4.0, help="NPO epoch ceiling")
    parser.add_argument("--every", type=float, default=1 / 3, help="checkpoint spacing in epochs")
    parser.add_argument("--stop-at", type=float, default=None, help="stop once κ on F is at or below this")
    parser.add_argument("--extra", default="{}", help="further NPO parameters as JSON (e.g. LoRA)")
    parser.add_argument("--relearn-lr", type=float, default=3e-4)
    parser.add_argument("--relearn-lora", type=int, default=None, help="relearn through LoRA of this rank")
    parser.add_argument("--save", type=Path, default=None, help="save the NPO model here (safetensors)")
    parser.add_argument(
        "--recipe", choices=("small", "shared"), default="shared", help="SMALL_RECIPE or RECIPE's states"
    )
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    from canary_states import RECIPE, SMALL_RECIPE, build_canary_states, checkpoint_marks, relearn_spec

    from remnant import registry
    from remnant.models import load_model, save_model, zoo
    from remnant.studies.relearn_criterion import relearn_attack
    from remnant.train.relearn import greedy_scorer
    from remnant.train.removal import apply_removal

    base = Path(os.environ.get("REMNANT_TEST_STATES", "/tmp/remnant-states"))
    recipe = SMALL_RECIPE if args.recipe == "small" else RECIPE
    states = build_canary_states(zoo.fetch("smollm2-135m-instruct"), base, recipe)
    fmt, sets = states.fmt(), states.sets()
    pre = load_model(states.installed_dir, dtype="fp32")
    tok = pre.tokenizer
    scorers = {
        name: greedy_scorer(tok, items, fmt)
        for name, items in (("F", sets["removal"].forget), ("P", sets["P"]), ("retain", sets["retain"]))
    }
    trajectory: list[dict[str, Any]] = []

    def on_checkpoint(model: Any, point: Any) -> dict[str, bool]:
        row = {"epoch": round(point.epoch, 3), **{k: s(model) for k, s in scorers.items()}}
        trajectory.append(row)
        print("checkpoint", json.dumps(row), flush=True)
        f_k, f_n = row["F"]
        return {"stop": args.stop_at is not None and f_k / f_n <= args.stop_at}

    extra = json.loads(args.extra)
    params = {**states.record["recipe"]["npo"], "lr": args.lr, "epochs": args.epochs}
    if "lora_rank" not in extra:
        params["trainable"] = list(states.trainable)
    method = registry.create("method", "npo", {**params, **extra})
    marks = checkpoint_marks(args.every, args.epochs)
    t = time.perf_counter()
    post, removal = apply_removal(
        method,
        copy.deepcopy(pre.model),
        tok,
        sets["removal"],
        seed=states.record["recipe"]["seed"],
        fmt=fmt,
        overrides={"checkpoint_epochs": marks},
        on_checkpoint=on_checkpoint,
    )
    print(f"npo {removal.status} after {removal.outcome.steps} steps in {time.perf_counter() - t:.0f} s")
    if args.save is not None:
        save_model(post, tok, args.save)
    control = load_model(states.control_dir, dtype="fp32").model
    spec = relearn_spec(states, lr=args.relearn_lr)  # the procedure test_e2e_train.py runs
    if args.relearn_lora is not None:
        from dataclasses import replace

        from remnant.train.loop import LoraSpec

        spec = replace(spec, lora=LoraSpec(rank=args.relearn_lora), trainable=None)
    t = time.perf_counter()
    result = relearn_attack(post, control, tok, sets["R"], sets["P"], spec, fmt=fmt)
    print(
        f"relearn {time.perf_counter() - t:.0f} s; headline budget {result.headline_budget} "
        f"(Newcombe {result.headline_budget_newcombe})"
    )
    for b in result.budgets:
        post_curve = [(round(p.epoch, 2), f"{p.k}/{p.n}") for p in b.post_removal.points]
        control_curve = [f"{p.k}/{p.n}" for p in b.control.points]
        print(f"budget {b.budget}: post-removal {post_curve}; control {control_curve}; newcombe {b.newcombe}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
