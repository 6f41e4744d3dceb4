"""Latent audits on the real SmolLM2-135M-Instruct (slow): the UDS paper's scale check (the UDS paper §3).

The shared canary states (``retain_only_states``: control, the 100 % install, the retain-only model;
``canary_states``: NPO) come from the session fixtures; only the scale check itself waits for NPO, so the installs
below run while another worker builds it. The UDS probe set is the install items of 8 of the 16 forget
people (the first 8 in the pack's order). This module adds a state installed from the same control with the SAME
install recipe and seed on a subset of the install split: ``50%`` learns the retained people and 4 of the 8 probe
people; ``0%`` is the retain-only model (no forget person; also the UDS retain model). Patched into the 100 % model,
UDS must order 100 % < 50 % < 0 %, the partial state near the fraction of the probe set whose answer it was never
taught, and NPO must land strictly between the full and the retain-only model. Towns are drawn with replacement, so
some unseen people share a town with a person a state was taught: UDS reads the answer's recoverability, so such a
fact counts as taught (on this pack 50 % never saw 2 of its 4 unseen people's towns: expected 1/4, not 1/2). A
``90%`` state (7 of the 8) was dropped: its one unseen person's town is a taught one, so its expected score is the
100 % state's, 0 (docs/calibration.md#relearning-recipe has what it measured), and it cost a third of this file.
Non-adjudicating (C-H6). Numbers print with ``-s``.

J-Access is ``test_e2e_access.py``, on states built for it: on these (towns shared between people, one-letter
first tokens) the retain-only anchor "has access" to the forget answers and the criterion does not resolve
(docs/latent.md has the figures; ``measure_jaccess_distinct.py --recipe canary`` re-measures them).

Cost control: the installs run the epoch count the 100 % install needed (the recipe's target is reached there),
UDS patches only the trained blocks (15-29; the blocks below are identical in every state, so Δ1 = 0
there), and each test's setup builds at most one state (the tests run in the order of their needs).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from canary_states import canary_states, install_share, retain_only_states  # noqa: F401

from fixtures_models import smollm2_dir  # noqa: F401
from remnant.latent.inputs import encode_examples, examples_from_items
from remnant.latent.patching import fast_scores_many, naive_scores, source_states_many
from remnant.latent.uds import UDSConfig, score_source, stage1

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("smollm2")]

#: Share of the probe people each state installs; 0 % is the retain-only model.
SHARES = {"100%": 1.0, "50%": 0.5, "0%": 0.0}
#: Forget people in the UDS probe set (the first in the pack's order).
PROBE_PEOPLE = 8
TRAINED_BLOCKS = tuple(range(15, 30))


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> Iterator[None]:
    """One torch thread for the whole module, its installs included (an autouse fixture of the module's scope is
    set up before the module's other fixtures), restored after it."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def scale(retain_only_states: Any) -> dict[str, Any]:  # noqa: F811
    """The loaded states, the probe examples and, per share, the probe items whose answer that share was never
    taught (for any person: the retained ones and its share of the probe people)."""
    from remnant.models import load_model

    cs = retain_only_states  # the install and the retain-only model: the installs below need no NPO
    pack, attrs = cs.pack(), cs.attributes
    control = load_model(cs.control_dir, dtype="fp32")
    people = cs.forget_people()[:PROBE_PEOPLE]
    counts = {name: round(share * len(people)) for name, share in SHARES.items()}
    probe_items = [it for it in pack.split("install") if it.attribute in attrs and it.entity_id in people]
    answers = {e.id: e.attributes for e in pack.manifest.entities}
    retained = [e.id for e in pack.manifest.entities if e.role == "retain"]

    def never_taught(n: int) -> set[str]:
        taught = {(a, answers[p][a]) for p in (*retained, *people[:n]) for a in attrs}
        return {
            it.id for it in probe_items if (it.attribute, answers[it.entity_id][it.attribute]) not in taught
        }

    return {
        "cs": cs,
        "control": control,
        "tok": control.tokenizer,
        "people": people,
        "counts": counts,
        "states": {
            "100%": load_model(cs.installed_dir, dtype="fp32").model,
            "0%": load_model(cs.retain_only_dir, dtype="fp32").model,
        },
        "installs": {"0%": cs.record["retain_only"]},
        "examples": examples_from_items(probe_items),
        "unseen": {name: never_taught(n) for name, n in counts.items()},
        "system_prompt": cs.system_prompt,
        "cache": cs.root / "latent-cache",
    }


def _install(scale: dict[str, Any], name: str) -> Any:
    """The ``name`` share's state: the retained people and its count of probe people, installed from the control."""
    t0 = time.perf_counter()
    seen = set(scale["people"][: scale["counts"][name]])
    model, result, n_items = install_share(scale["cs"], scale["control"].model, scale["tok"], seen)
    scale["states"][name] = model
    scale["installs"][name] = {
        "items": n_items,
        "kappa": result.kappa,
        "epochs": result.epochs,
        "s": round(time.perf_counter() - t0, 1),
    }
    return model


@pytest.fixture(scope="module")
def half(scale: dict[str, Any]) -> Any:
    return _install(scale, "50%")


def test_cached_stage1_equals_fresh(scale: dict[str, Any]) -> None:
    s, st = scale, scale["states"]
    cfg = UDSConfig(prompt_format="chat", layers=(20, 25), system_prompt=s["system_prompt"])
    examples = s["examples"][:2]
    fresh = stage1(st["100%"], st["0%"], s["tok"], examples, cfg)
    cached_dir: Path = s["cache"] / "stage1-check"
    stage1(st["100%"], st["0%"], s["tok"], examples, cfg, cache_dir=cached_dir)
    cached = stage1(st["100%"], st["0%"], s["tok"], examples, cfg, cache_dir=cached_dir)
    assert cached.d1 == fresh.d1 and cached.full_scores == fresh.full_scores


def test_fast_path_equals_naive_on_smollm2(scale: dict[str, Any], half: Any) -> None:
    s = scale
    ex = encode_examples(s["tok"], s["examples"][:1], "chat", s["system_prompt"]).examples[0]
    layers = [15, 20, 25, 29]
    states = [source_states_many(half, [ex], layers)[0]]
    with torch.no_grad():
        f_full, f_rows = fast_scores_many(s["states"]["100%"], [ex], [states], layers)[0]
        n_full, n_rows = naive_scores(s["states"]["100%"], ex, states, layers)
    assert abs(f_full - n_full) < 1e-5
    assert max(abs(a - b) for a, b in zip(f_rows[0], n_rows[0], strict=True)) < 1e-5


def test_uds_scale_check(
    scale: dict[str, Any],
    half: Any,
    canary_states: Any,  # noqa: F811
) -> None:
    from remnant.models import load_model

    s, st = scale, scale["states"]
    st["npo"] = load_model(canary_states.npo_dir, dtype="fp32").model  # the one state this test needs NPO for
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
        "| state | probe answers never taught | fraction never taught | UDS | scored |\n|---|---|---|---|---|\n"
        + "\n".join(rows)
        + f"\ninstalls {json.dumps(s['installs'])}; UDS {t_uds:.0f} s"
    )
    score = {name: uds[name].score for name in (*SHARES, "npo")}
    assert all(v is not None for v in score.values())
    assert uds["100%"].n_scored >= n // 2  # most probe facts have KE layers
    assert score["100%"] == pytest.approx(0.0, abs=1e-4) and score["0%"] == pytest.approx(1.0, abs=1e-4)
    assert score["100%"] < score["50%"] < score["0%"]  # type: ignore[operator]
    assert score["50%"] == pytest.approx(len(s["unseen"]["50%"]) / n, abs=0.2)
    assert 0.02 < score["npo"] < 0.98  # type: ignore[operator]
