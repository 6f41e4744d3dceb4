"""Latent audits on the real SmolLM2-135M-Instruct (slow): the UDS paper's scale check (the UDS paper §3).

The shared canary states (``canary_states``: control, the 100 % install, NPO) come from the session fixture. This
module adds three states installed from the same control with the SAME install recipe and seed on subsets of the
install split: every state learns the retained entities; ``90%`` also learns 7 of the 8 forget entities (the
UDS probe set), ``50%`` 4 of them, ``0%`` none (the retain-only model, also the UDS retain model). Patched into
the 100 % model, UDS must order 100 % < 90 % < 50 % < 0 %, each near the fraction of the probe set it never saw
(0, 1/8, 1/2, 1), and NPO must land strictly between the full and the retain-only model. Non-adjudicating (C-H6).
Numbers print with ``-s``.

J-Access is ``test_e2e_access.py``, on states built for it: on these (towns shared between people, one-letter
first tokens) the retain-only anchor "has access" to the forget answers and the criterion does not resolve
(docs/latent.md has the figures; ``measure_jaccess_distinct.py --recipe canary`` re-measures them).

Cost control: the installs stop at the epoch count the 100 % install needed (the recipe's target is reached
there), UDS patches only the trained blocks (15-29; the blocks below are identical in every state, so Δ1 = 0
there).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from canary_states import canary_states, install_share  # noqa: F401

from fixtures_models import smollm2_dir  # noqa: F401
from remnant.latent.inputs import encode_examples, examples_from_items
from remnant.latent.patching import fast_scores_many, naive_scores, source_states_many
from remnant.latent.uds import UDSConfig, score_source, stage1

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("smollm2")]

#: Share of the pack's forget entities each state installs; 0 % is the retain-only model.
SHARES = {"100%": 1.0, "90%": 0.9, "50%": 0.5, "0%": 0.0}
TRAINED_BLOCKS = tuple(range(15, 30))


@pytest.fixture(scope="module")
def scale(canary_states: Any) -> dict[str, Any]:  # noqa: F811
    from remnant.models import load_model

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cs = canary_states
        pack, fmt, attrs = cs.pack(), cs.fmt(), cs.attributes
        control = load_model(cs.control_dir, dtype="fp32")
        tok = control.tokenizer
        states: dict[str, Any] = {
            "100%": load_model(cs.installed_dir, dtype="fp32").model,
            "npo": load_model(cs.npo_dir, dtype="fp32").model,
        }
        forget = [e.id for e in pack.manifest.entities if e.role in ("forget_probe", "forget_relearn")]
        items = [it for it in pack.split("install") if it.attribute in attrs]
        installs: dict[str, Any] = {}
        counts = {name: round(share * len(forget)) for name, share in SHARES.items()}
        for name, n in counts.items():
            if name == "100%":
                continue
            t0 = time.perf_counter()
            model, result, n_items = install_share(cs, control.model, tok, set(forget[:n]))
            states[name] = model
            installs[name] = {
                "items": n_items,
                "kappa": result.kappa,
                "epochs": result.epochs,
                "s": round(time.perf_counter() - t0, 1),
            }
        probe_items = [it for it in items if it.entity_id in forget]
        return {
            "tok": tok,
            "fmt": fmt,
            "states": states,
            "installs": installs,
            "examples": examples_from_items(probe_items),
            "unseen": {
                name: {it.id for it in probe_items if it.entity_id not in forget[:n]}
                for name, n in counts.items()
            },
            "system_prompt": cs.system_prompt,
            "cache": cs.root / "latent-cache",
        }
    finally:
        torch.set_num_threads(before)


def test_uds_scale_check(scale: dict[str, Any]) -> None:
    s, st = scale, scale["states"]
    torch.set_num_threads(1)
    cfg = UDSConfig(prompt_format="chat", layers=TRAINED_BLOCKS, system_prompt=s["system_prompt"])
    t0 = time.perf_counter()
    s1 = stage1(st["100%"], st["0%"], s["tok"], s["examples"], cfg, cache_dir=s["cache"])
    uds = {name: score_source(st["100%"], st[name], s1, cfg) for name in (*SHARES, "npo")}
    t_uds = time.perf_counter() - t0

    n = len(s1.encoded.examples)
    rows = [
        f"| {name} | {len(s['unseen'][name]) if name in SHARES else '—'}/{n} "
        f"| {(len(s['unseen'][name]) / n) if name in SHARES else float('nan'):.3f} "
        f"| {uds[name].score:.3f} | {uds[name].n_scored}/{uds[name].n_examples} |"
        for name in (*SHARES, "npo")
    ]
    print(
        "\nUDS scale check (SmolLM2-135M-Instruct, chat format, blocks 15-29, patched into the 100% state)\n"
        "| state | probe facts never seen | fraction never seen | UDS | scored |\n|---|---|---|---|---|\n"
        + "\n".join(rows)
        + f"\ninstalls {json.dumps(s['installs'])}; UDS {t_uds:.0f} s"
    )
    score = {name: uds[name].score for name in (*SHARES, "npo")}
    assert all(v is not None for v in score.values())
    assert uds["100%"].n_scored >= n // 2  # most probe facts have KE layers
    assert score["100%"] == pytest.approx(0.0, abs=1e-4) and score["0%"] == pytest.approx(1.0, abs=1e-4)
    assert score["100%"] < score["90%"] < score["50%"] < score["0%"]  # type: ignore[operator]
    for name in ("90%", "50%"):
        assert score[name] == pytest.approx(len(s["unseen"][name]) / n, abs=0.2)
    assert 0.02 < score["npo"] < 0.98  # type: ignore[operator]


def test_fast_path_equals_naive_on_smollm2(scale: dict[str, Any]) -> None:
    s = scale
    ex = encode_examples(s["tok"], s["examples"][:1], "chat", s["system_prompt"]).examples[0]
    layers = [15, 20, 25, 29]
    states = [source_states_many(s["states"]["50%"], [ex], layers)[0]]
    with torch.no_grad():
        f_full, f_rows = fast_scores_many(s["states"]["100%"], [ex], [states], layers)[0]
        n_full, n_rows = naive_scores(s["states"]["100%"], ex, states, layers)
    assert abs(f_full - n_full) < 1e-5
    assert max(abs(a - b) for a, b in zip(f_rows[0], n_rows[0], strict=True)) < 1e-5


def test_cached_stage1_equals_fresh(scale: dict[str, Any]) -> None:
    s, st = scale, scale["states"]
    cfg = UDSConfig(prompt_format="chat", layers=(20, 25), system_prompt=s["system_prompt"])
    examples = s["examples"][:2]
    fresh = stage1(st["100%"], st["0%"], s["tok"], examples, cfg)
    cached_dir: Path = s["cache"] / "stage1-check"
    stage1(st["100%"], st["0%"], s["tok"], examples, cfg, cache_dir=cached_dir)
    cached = stage1(st["100%"], st["0%"], s["tok"], examples, cfg, cache_dir=cached_dir)
    assert cached.d1 == fresh.d1 and cached.full_scores == fresh.full_scores
