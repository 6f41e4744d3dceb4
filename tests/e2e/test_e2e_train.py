"""Install → NPO → relearn on SmolLM2-135M-Instruct (R2, §4.2 C-W1–C-W6, Annex B.6).

The shared states (``canary_states.RECIPE``) install a Class D pack of 24 people into the control (R2) and remove
the 16 forget people with NPO, stopped once κ on the forget set is at most 0.1. Here:
installation reached the declared level from the control's near zero; NPO took P below 0.1 while retained
capability stayed at 0.9 of the pre-removal model's or more; and relearning on R (12 other forget people, disjoint
from P's 4 at entity level: C-W6) revives P in the NPO model far above the never-modified control relearned under
the identical procedure (C-W5), with both curves scored at every checkpoint, inside the first epoch included
(C-W3).

Numbers and timings are printed (run with ``-s``). Each test's setup builds one stage (the install, NPO, the
relearning), so no test pays for more than one; this file runs first in ``make test`` (``tests/conftest.py``).
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

import pytest
from canary_states import CanaryStates, canary_states, installed_states, relearn_spec  # noqa: F401

from fixtures_models import smollm2_dir  # noqa: F401

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("smollm2")]

#: Two epochs per budget: P's revival peaks by the second; a third (the calibration script's) adds nothing to P
#: and took half the relearning time (docs/calibration.md#relearning-recipe).
RELEARN_EPOCHS = 2
#: The smallest budget and the whole of R: the calibration script's middle budget (12, where τ is first reached)
#: adds a curve, not a path.
SMALLEST_BUDGET = 4


def _rate(kn: Any) -> float:
    return kn[0] / kn[1]


@pytest.fixture(scope="module")
def relearned(canary_states: CanaryStates) -> Any:  # noqa: F811
    from remnant.models import load_model
    from remnant.studies.relearn_criterion import relearn_attack

    states = canary_states
    sets = states.sets()
    post = load_model(states.npo_dir, dtype="fp32")
    control = load_model(states.control_dir, dtype="fp32").model
    full = relearn_spec(states, epochs=RELEARN_EPOCHS)
    spec = replace(full, budgets=(SMALLEST_BUDGET, full.budgets[-1]))
    t = time.perf_counter()
    result = relearn_attack(post.model, control, post.tokenizer, sets["R"], sets["P"], spec, fmt=states.fmt())
    summary = {
        "seconds": round(time.perf_counter() - t, 1),
        "headline_budget": result.headline_budget,
        "headline_budget_newcombe": result.headline_budget_newcombe,
        "curves": {
            b.budget: {
                "post_removal": [(p.step, p.k, p.n) for p in b.post_removal.points],
                "control": [(p.step, p.k, p.n) for p in b.control.points],
                "newcombe": b.newcombe,
            }
            for b in result.budgets
        },
    }
    print("\nE2E-TRAIN relearn " + json.dumps(summary, default=str))
    return result


def test_install_reaches_the_declared_level_from_near_zero(installed_states: CanaryStates) -> None:  # noqa: F811
    rec = installed_states.record
    assert _rate(rec["control"]["installed"]) <= 0.05  # R5: the control does not know the canaries
    assert rec["install"]["reached"] and rec["install"]["kappa"] >= 0.8  # R2: presence known before removal
    assert _rate(rec["installed"]["P"]) >= 0.8


def test_npo_suppresses_p_and_keeps_retain(canary_states: CanaryStates) -> None:  # noqa: F811
    rec = canary_states.record
    assert rec["npo"]["status"] in ("completed", "stopped")  # stopped: at the declared forget level
    assert _rate(rec["npo_scores"]["P"]) < 0.1
    # retain-set capability: κ on the installed items of the retained people, the set the retain term keeps
    assert _rate(rec["npo_scores"]["retain"]) >= 0.9 * _rate(rec["installed"]["retain"])
    # their held-out phrasings (the pack's retain split, R9/R10) may lose one more item in ten
    pre, post = rec["installed"]["retain_heldout_phrasing"], rec["npo_scores"]["retain_heldout_phrasing"]
    assert _rate(post) >= 0.8 * _rate(pre)


def test_relearning_revives_p_in_npo_model_not_in_control(
    relearned: Any,
    canary_states: CanaryStates,  # noqa: F811
) -> None:
    n_r = canary_states.record["sizes"]["R"]
    assert [b.budget for b in relearned.budgets] == [SMALLEST_BUDGET, n_r]
    for b in relearned.budgets:  # C-W5: both curves at every checkpoint, C-W3: one inside the first epoch
        assert [p.step for p in b.post_removal.points] == [p.step for p in b.control.points]
        assert any(0 < p.epoch < 1 for p in b.post_removal.points)
    # C-W2's headline: the smallest budget at which the post-removal model's recovery exceeds the control's, by
    # the threshold rule and by the Newcombe lower bound (Annex F.9); what these states reach is in
    # docs/calibration.md#relearning-recipe. R shares two home towns with P, so the control can pick up a P
    # answer; that is what its curve is there to measure.
    # τ = 0.5 is first reached at budget 12, which this test does not run (the calibration script does)
    assert relearned.headline_budget_newcombe is not None
    largest = relearned.budgets[-1]
    best_post = max(p.rate for p in largest.post_removal.points)
    best_control = max(p.rate for p in largest.control.points)
    assert best_post >= 0.4 and best_post - best_control >= 0.25
    assert largest.newcombe is not None and largest.newcombe[1] > 0.0  # the difference interval excludes zero
