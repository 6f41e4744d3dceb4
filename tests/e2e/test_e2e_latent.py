"""Latent audits on the real SmolLM2-135M-Instruct (slow): the UDS paper's scale check (seeds/000 §3).

Three states are installed from the same base with the same recipe and seed: every state learns the filler
entities; ``full`` also learns all probe entities (100 %), ``half`` half of them (50 %), ``retain`` none (0 %).
Patched into ``full``, UDS must order them full < half < retain, each near the fraction of the probe set it never
saw (0, ~0.5, 1), and the fast path must equal the naive algorithm on the real model. Non-adjudicating (C-H6).
"""

from __future__ import annotations

import copy
import os
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from fixtures_models import smollm2_dir  # noqa: F401
from remnant.latent.inputs import encode_examples, examples_from_items
from remnant.latent.patching import fast_scores, naive_scores, source_states
from remnant.latent.uds import UDSConfig, score_source, stage1

#: Three SmolLM2 installs (~18 min on the loaded 2-core machine): opt-in until the installs are shared with the
#: training fixtures, so `make test` stays inside CI's budget.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("REMNANT_E2E_LATENT") != "1", reason="three SmolLM2 installs; set REMNANT_E2E_LATENT=1"
    ),
]

ATTRIBUTE = "employer"


@pytest.fixture(scope="module")
def scale_states(smollm2_dir: Path) -> dict[str, Any]:  # noqa: F811
    from remnant.models import load_model
    from remnant.packs import ClassDSpec, mint_class_d
    from remnant.train.data import as_qa
    from remnant.train.install import InstallSpec, install

    state = load_model(smollm2_dir, dtype="fp32")
    pack = mint_class_d(ClassDSpec(entities=8, controls=2, general=False, seed=11))
    installed = [e.id for e in pack.manifest.entities if e.role != "control"][:8]
    filler, probe = installed[:4], installed[4:]
    # one prefixed phrasing per fact keeps the three installs to about a minute each on two CPU cores
    items = [it for it in pack.split("install") if it.attribute == ATTRIBUTE and it.answer != it.accepted[0]]
    items = list({it.entity_id: it for it in reversed(items)}.values())

    def facts(entities: list[str]) -> list[Any]:
        return [it for it in items if it.entity_id in entities]

    spec = InstallSpec(target=1.0, max_epochs=15, lr=3e-4, batch_size=8, max_grad_norm=1.0)
    states: dict[str, Any] = {"tokenizer": state.tokenizer, "timings": {}}
    for name, share in (("full", probe), ("half", probe[:2]), ("retain", [])):
        t0 = time.perf_counter()
        model, result = install(
            copy.deepcopy(state.model), state.tokenizer, as_qa(facts(filler + share)), spec, seed=3
        )
        states[name] = model
        states["timings"][name] = (time.perf_counter() - t0, result.kappa, result.epochs)
    probe_items = facts(probe)
    states["examples"] = examples_from_items(probe_items)
    states["seen_by_half"] = {it.id for it in probe_items if it.entity_id in probe[:2]}
    return states


def test_uds_scale_check_orders_the_states(scale_states: dict[str, Any], tmp_path: Path) -> None:
    s = scale_states
    cfg = UDSConfig(prompt_format="chat")
    s1 = stage1(s["full"], s["retain"], s["tokenizer"], s["examples"], cfg, cache_dir=tmp_path)
    scores = {name: score_source(s["full"], s[name], s1, cfg) for name in ("full", "half", "retain")}
    print(
        "\nUDS scale check (SmolLM2-135M, chat format):",
        {k: (v.score, v.n_scored, v.n_examples) for k, v in scores.items()},
        "installs (s, kappa, epochs):",
        s["timings"],
    )
    full, half, retain = (scores[k].score for k in ("full", "half", "retain"))
    assert full is not None and half is not None and retain is not None
    assert scores["full"].n_scored >= 3  # the probe facts are encoded somewhere (KE layers found)
    assert full == pytest.approx(0.0, abs=1e-4) and retain == pytest.approx(1.0, abs=1e-4)
    assert full < half < retain
    seen = [r.uds for r in scores["half"].examples if r.idx in s["seen_by_half"] and r.uds is not None]
    unseen = [r.uds for r in scores["half"].examples if r.idx not in s["seen_by_half"] and r.uds is not None]
    assert seen and unseen and sum(seen) / len(seen) < sum(unseen) / len(unseen)
    assert 0.2 < half < 0.8  # near the half of the probe set the state never saw
    cached = stage1(s["full"], s["retain"], s["tokenizer"], s["examples"], cfg, cache_dir=tmp_path)
    assert cached.d1 == s1.d1  # the cached stage 1 equals the fresh one


def test_fast_path_equals_naive_on_smollm2(scale_states: dict[str, Any]) -> None:
    s = scale_states
    ex = encode_examples(s["tokenizer"], s["examples"][:1], "chat").examples[0]
    layers = list(range(0, 30, 6))
    states = [source_states(s["half"], ex, layers)]
    with torch.no_grad():
        f_full, f_rows = fast_scores(s["full"], ex, states, layers)
        n_full, n_rows = naive_scores(s["full"], ex, states, layers)
    assert abs(f_full - n_full) < 1e-5
    assert max(abs(a - b) for a, b in zip(f_rows[0], n_rows[0], strict=True)) < 1e-5
