"""``remnant assess``'s summary: the smallest n it reports is the n behind the evidence (R0.2, R19, R21)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from remnant.assess.commands import _summary


def test_a_q_track_summary_counts_only_the_surfaces_q_admits() -> None:
    # R0.2, C2: relearning is inadmissible on the Q track, so its n = 5 is behind no evidence; the inference-time
    # attack's 40 (post-removal and control) is the smallest n that counts, as the tier reads it (R21)
    facts = {
        "track": "Q",
        "utility": {"removal_stage": 0.9},
        "attacks": [
            {"name": "relearning", "surface": "relearning", "status": "run", "k": 1, "n": 5},
            {
                "name": "prefill",
                "surface": "inference_time",
                "status": "run",
                "k": 0,
                "n": 40,
                "control_n": 40,
            },
        ],
    }
    verdict = SimpleNamespace(verdict="removed", g_star=0.0, g_star_ci95=None, decisive_attacks=())
    outcome = SimpleNamespace(
        verdict=verdict, tier=SimpleNamespace(display="Q2"), facts=facts, manifest_ref="sha256:0", files=[]
    )
    assert _summary(outcome, Path("run"))["smallest_n"] == 40
