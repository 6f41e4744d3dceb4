"""Install → NPO → relearn on SmolLM2-135M-Instruct (issue 4; R2, §4.2 C-W1–C-W6, Annex B.6).

A small Class D pack is installed into the control until capability on the installed canaries is high; NPO
suppresses the forget entities; relearning on R (other forget entities, disjoint from P at entity level: C-W6)
revives P in the NPO model far above the never-modified control relearned under the identical procedure (C-W5),
with both curves scored at every checkpoint, inside the first epoch included (C-W3).

Cost on 2 CPU cores: only decoder layers 15-29 are trained (the same selection for install, removal and both
relearning runs), which roughly halves a step against full fine-tuning; everything else is the real procedure.
Numbers and timings are printed (run with ``-s``) for the issue note.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fixtures_models import smollm2_dir  # noqa: F401

#: Opt-in until the NPO recipe is calibrated. With this recipe (about 2 min on 2 idle cores, 26 min when the
#: machine was loaded) install reaches κ=35/36 from 0/36 and relearning separates NPO from the control (budget 4:
#: P 2/9 → 6/9 against the control's 0/9 at every checkpoint; headline budget 4 by both rules), but NPO leaves P at
#: 2/9 (criterion < 0.1) with retain 16/18 (criterion ≥ 0.9·18/18). Stronger NPO (lr 1e-4) took P to 0/9 but retain
#: to 9/18 (α=1) or 11/18 (α=3). P has only 9 items here, so the two removal criteria barely fit between steps.
pytestmark = pytest.mark.skipif(
    os.environ.get("REMNANT_E2E_TRAIN") != "1",
    reason="install→NPO→relearn recipe not yet calibrated and ~26 min on 2 loaded cores; set REMNANT_E2E_TRAIN=1",
)

ATTRIBUTES = ("birth_year",)
ENTITIES = 12
TRAINABLE = (r"model\.layers\.(1[5-9]|2\d)\.",)


@pytest.fixture(scope="module")
def pipeline(smollm2_dir: Path) -> dict[str, Any]:  # noqa: F811
    from remnant import registry
    from remnant.models import load_model
    from remnant.models.prompts import PromptFormat
    from remnant.packs import ClassDSpec, mint_class_d
    from remnant.train.data import as_qa, removal_data, retain_training_qa, split_qa
    from remnant.train.install import InstallSpec, install
    from remnant.train.relearn import RelearnSpec, greedy_scorer, relearn_attack
    from remnant.train.removal import apply_removal

    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    state = load_model(smollm2_dir, dtype="fp32")
    tok, control = state.tokenizer, state.model
    fmt = PromptFormat("chat", system_prompt="")  # an empty system turn keeps sequences ~40 tokens
    pack = mint_class_d(ClassDSpec(entities=ENTITIES, controls=2, general=False, seed=7))
    p_entities = {e.id for e in pack.manifest.entities if e.role == "forget_probe"}
    sets = {
        "installed": split_qa(pack, "install", ATTRIBUTES),
        "P": as_qa([it for it in pack.split("install") if it.entity_id in p_entities], ATTRIBUTES),
        "P_heldout_phrasing": split_qa(pack, "probe", ATTRIBUTES),
        "retain": retain_training_qa(pack, ATTRIBUTES),
        "R": split_qa(pack, "relearn", ATTRIBUTES),
    }
    scorers = {name: greedy_scorer(tok, items, fmt) for name, items in sets.items() if name != "R"}

    def score(model: Any) -> dict[str, tuple[int, int]]:
        return {name: s(model) for name, s in scorers.items()}

    out: dict[str, Any] = {"sizes": {k: len(v) for k, v in sets.items()}, "control": score(control)}
    timings["load+score"] = time.perf_counter() - t0
    _log("control", out)

    t = time.perf_counter()
    spec = InstallSpec(target=0.95, max_epochs=8, lr=3e-4, batch_size=8, trainable=TRAINABLE)
    pre, inst = install(copy.deepcopy(control), tok, sets["installed"], spec, seed=0, fmt=fmt)
    timings["install"] = time.perf_counter() - t
    out["install"] = {"kappa": inst.kappa, "curve": inst.curve, "steps": inst.steps, "epochs": inst.epochs}
    out["pre"] = score(pre)
    _log("installed", out)

    t = time.perf_counter()
    npo = registry.create(
        "method",
        "npo",
        {
            "lr": 5e-5,
            "epochs": 2,
            "batch_size": 8,
            "grad_accum": 1,
            "warmup_epochs": 0.0,
            "trainable": TRAINABLE,
        },
    )
    post, removal = apply_removal(
        npo, copy.deepcopy(pre), tok, removal_data(pack, ATTRIBUTES), seed=0, fmt=fmt
    )
    timings["npo"] = time.perf_counter() - t
    out["npo"] = {"status": removal.status, "steps": removal.outcome.steps, "losses": removal.outcome.losses}
    out["post"] = score(post)
    _log("npo", out)

    t = time.perf_counter()
    rspec = RelearnSpec(
        budgets=(4, 9),
        lr=3e-4,
        epochs=3,
        checkpoint_epochs=(0.25, 0.5),
        batch_size=2,
        trainable=TRAINABLE,
        tau=0.5,
    )
    relearn = relearn_attack(post, control, tok, sets["R"], sets["P"], rspec, fmt=fmt)
    timings["relearn"] = time.perf_counter() - t
    out["relearn"] = relearn
    out["timings"] = timings
    summary = {k: v for k, v in out.items() if k != "relearn"}
    summary["relearn"] = {
        "headline_budget": relearn.headline_budget,
        "headline_budget_newcombe": relearn.headline_budget_newcombe,
        "curves": {
            b.budget: {
                "post_removal": [(p.step, p.k, p.n) for p in b.post_removal.points],
                "control": [(p.step, p.k, p.n) for p in b.control.points],
                "newcombe": b.newcombe,
            }
            for b in relearn.budgets
        },
    }
    print("\nE2E-TRAIN " + json.dumps(summary, default=str))
    return out


def _log(stage: str, out: dict[str, Any]) -> None:
    print(f"E2E-TRAIN {stage}: " + json.dumps(out, default=str), file=sys.stderr, flush=True)


def _rate(kn: tuple[int, int]) -> float:
    return kn[0] / kn[1]


@pytest.mark.slow
def test_install_reaches_the_declared_level_from_near_zero(pipeline: dict[str, Any]) -> None:
    assert _rate(pipeline["control"]["installed"]) <= 0.05  # R5: the control does not know the canaries
    assert pipeline["install"]["kappa"] >= 0.8  # R2: the target's presence is known before removal
    assert _rate(pipeline["pre"]["P"]) >= 0.8


@pytest.mark.slow
def test_npo_suppresses_p_and_keeps_retain(pipeline: dict[str, Any]) -> None:
    assert pipeline["npo"]["status"] == "completed"
    assert _rate(pipeline["post"]["P"]) < 0.1
    assert _rate(pipeline["post"]["retain"]) >= 0.9 * _rate(pipeline["pre"]["retain"])


@pytest.mark.slow
def test_relearning_revives_p_in_npo_model_not_in_control(pipeline: dict[str, Any]) -> None:
    relearn = pipeline["relearn"]
    assert [b.budget for b in relearn.budgets] == [4, 9]
    for b in relearn.budgets:  # C-W5: both curves at every checkpoint, C-W3: one inside the first epoch
        assert [p.step for p in b.post_removal.points] == [p.step for p in b.control.points]
        assert any(0 < p.epoch < 1 for p in b.post_removal.points)
        assert max(p.rate for p in b.control.points) <= 0.1  # P's facts cannot be learned from R's
    best = max(p.rate for b in relearn.budgets for p in b.post_removal.points)
    assert best >= 0.5  # NPO suppressed rather than removed (Annex B.6)
    assert relearn.headline_budget is not None
    assert relearn.headline_budget_newcombe is not None
