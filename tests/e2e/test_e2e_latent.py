"""Latent audits on the real SmolLM2-135M-Instruct (slow): the UDS paper's scale check (seeds/000 §3) and J-Access.

The shared canary states (``canary_states``: control, the 100 % install, NPO) come from the session fixture. This
module adds three states installed from the same control with the SAME install recipe and seed on subsets of the
install split: every state learns the retained entities; ``90%`` also learns 7 of the 8 forget entities (the
UDS probe set), ``50%`` 4 of them, ``0%`` none (the retain-only model, also the UDS retain model). Patched into
the 100 % model, UDS must order 100 % < 90 % < 50 % < 0 %, each near the fraction of the probe set it never saw
(0, 1/8, 1/2, 1), and NPO must land strictly between the full and the retain-only model. J-Access (seeds/002
eqs. 3-6) of the NPO model, with the installed model and the retain-only model as anchors, is measured as the paper
defines it and printed, and again with generic concept tokens dropped (algorithms.md §2.5's per-token baseline on
decoy questions); its criterion (JOcc > 0) is not asserted because at this scale it is not resolved (see the
test). Non-adjudicating (C-H6). Numbers print with ``-s``.

Cost control: the installs stop at the epoch count the 100 % install needed (the recipe's target is reached
there), UDS patches only the trained blocks (15-29; the blocks below are identical in every state, so Δ1 = 0
there). The Jacobian lens is exact (algorithms.md §2.1) but costs ⌈576/64⌉ backward passes of 64 × ~55 tokens
through blocks 8-28 per prompt, 75-125 s a prompt on one CPU thread, so it is fitted once, on the original
(100 %) model, a fixed decoder for all three states, from ``N_LENS_PROMPTS`` generic paragraphs (cached under the
states root).
"""

from __future__ import annotations

import copy
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from canary_states import canary_states  # noqa: F401

from fixtures_models import smollm2_dir  # noqa: F401
from remnant.latent.inputs import encode_examples, examples_from_items
from remnant.latent.jaccess import (
    AccessConfig,
    Probe,
    drop_generic,
    emitted_flags,
    greedy_continuations,
    j_occ,
    read_access,
    token_hit_rates,
)
from remnant.latent.jacobian_lens import LensConfig, fit_lens
from remnant.latent.patching import fast_scores, naive_scores, source_states
from remnant.latent.uds import UDSConfig, score_source, stage1
from remnant.models.prompts import render_prompt_ids

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("smollm2")]

#: Share of the pack's forget entities each state installs; 0 % is the retain-only model.
SHARES = {"100%": 1.0, "90%": 0.9, "50%": 0.5, "0%": 0.0}
TRAINED_BLOCKS = tuple(range(15, 30))
#: J-Access as seeds/002 and algorithms.md §2.5 define it [R defaults where Appendix A is unavailable]: the lens's
#: source layers are the workspace band (25-90 % depth of 30 blocks: 8-26), the target is the penultimate block
#: (28), the last 8 prompt positions, top-10, the first token of the home town with and without a leading space.
BAND = tuple(range(8, 27))
LENS = LensConfig(source_layers=BAND, target_layer=28, max_seq_len=64, skip_first=16, dim_batch=64)
ACCESS = AccessConfig(k=10, band=(0.25, 0.9), positions=8, max_new_tokens=32)
#: A concept token that enters the original model's top-k on more than this share of decoy questions (the same
#: questions about retained and never-installed people) is generic and dropped (algorithms.md §2.5 pitfall).
#: REMNANT_GENERIC_MAX=x re-measures the rows below at another cut (0.25 among them).
GENERIC_MAX = float(os.environ.get("REMNANT_GENERIC_MAX", "0.5"))
#: seeds/002 eq. 1 takes J over "generic text inputs": these paragraphs never mention a pack entity or town. The
#: paper fits on many prompts; two is what the test's time allows (measured below: too few to be stable).
#: REMNANT_LENS_PROMPTS=k (1-12) fits on the first k paragraphs instead: the 1-, 2-, 4- and 6-prompt rows below.
N_LENS_PROMPTS = int(os.environ.get("REMNANT_LENS_PROMPTS", "2"))
LENS_TEXT = (
    "The river flows through a wide valley before it reaches the sea. Farmers along its banks grow wheat, barley "
    "and vegetables, and in spring the water often rises above the fields. Engineers built a series of dams in the "
    "last century to control the floods and to produce electricity for the nearby cities.",
    "Photosynthesis is the process by which green plants use sunlight to turn water and carbon dioxide into sugar "
    "and oxygen. It takes place mainly in the leaves, inside small structures called chloroplasts, which contain "
    "the pigment that gives plants their colour and absorbs most of the light.",
    "The first printed books were expensive and rare, but as presses spread across the continent the price of "
    "paper fell and more people learned to read. Libraries grew, newspapers appeared in the larger towns, and "
    "within two centuries reading had become a common habit rather than a privilege.",
    "A good bread dough needs only flour, water, salt and yeast. After mixing, the dough is kneaded until it "
    "becomes smooth and elastic, then left to rise in a warm place. Baking at a high temperature creates a crisp "
    "crust, while the inside stays soft and light.",
    "In mathematics, a prime number is a whole number greater than one that has no divisors other than one and "
    "itself. The ancient Greeks already knew that there are infinitely many primes, and the question of how they "
    "are distributed among the integers is still studied today.",
    "The orchestra tuned its instruments while the audience found their seats. When the conductor raised his "
    "hands, the hall fell silent, and the violins began the slow opening theme. Over the next hour the music moved "
    "from quiet passages to loud and dramatic climaxes.",
    "Glaciers form where more snow falls in winter than melts in summer. Over many years the snow is pressed into "
    "ice, which slowly flows downhill under its own weight, carving deep valleys and carrying rocks far from the "
    "mountains where they broke away.",
    "The market opens early in the morning, when traders arrive with fresh fish, fruit and cheese. By noon the "
    "square is crowded with shoppers, and the smell of roasted coffee drifts from the small cafes along the edge "
    "of the street.",
    "Bees collect nectar from flowers and carry it back to the hive, where it is stored in wax cells and slowly "
    "turned into honey. A single colony can hold tens of thousands of workers, all descended from one queen.",
    "Before the railway arrived, a journey between the two cities took several days by coach. The new line cut "
    "the trip to a few hours, and within a decade goods, letters and travellers moved faster than ever before.",
    "A healthy diet includes plenty of vegetables, whole grains and water. Regular exercise strengthens the heart "
    "and muscles, and a good night of sleep helps the body recover and the mind stay alert during the day.",
    "Volcanoes release molten rock, ash and gas from deep below the surface. Some erupt violently after long "
    "quiet periods, while others let lava flow gently down their slopes for months at a time.",
)


def _epochs(record: dict[str, Any]) -> int:
    """The epochs the 100 % install needed (≤ the recipe's ceiling): the same recipe, stopped where it stopped."""
    ceiling = int(record["recipe"]["install"]["max_epochs"])
    curve = record["install"].get("curve") or []
    last = max((float(point[0]) for point in curve), default=float(ceiling))
    return max(1, min(ceiling, math.ceil(last)))


@pytest.fixture(scope="module")
def scale(canary_states: Any) -> dict[str, Any]:  # noqa: F811
    from remnant.models import load_model
    from remnant.train.data import as_qa
    from remnant.train.install import InstallSpec, install

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cs = canary_states
        recipe = cs.record["recipe"]
        pack, fmt, attrs = cs.pack(), cs.fmt(), cs.attributes
        control = load_model(cs.control_dir, dtype="fp32")
        tok = control.tokenizer
        states: dict[str, Any] = {
            "100%": load_model(cs.installed_dir, dtype="fp32").model,
            "npo": load_model(cs.npo_dir, dtype="fp32").model,
        }
        forget = [e.id for e in pack.manifest.entities if e.role in ("forget_probe", "forget_relearn")]
        items = [it for it in pack.split("install") if it.attribute in attrs]
        install_cfg = {**recipe["install"], "max_epochs": _epochs(cs.record)}
        spec = InstallSpec(**install_cfg, trainable=cs.trainable)
        installs: dict[str, Any] = {}
        counts = {name: round(share * len(forget)) for name, share in SHARES.items()}
        for name, n in counts.items():
            if name == "100%":
                continue
            seen = set(forget[:n])
            qa = as_qa([it for it in items if it.entity_id not in forget or it.entity_id in seen], attrs)
            t0 = time.perf_counter()
            model, result = install(copy.deepcopy(control.model), tok, qa, spec, seed=recipe["seed"], fmt=fmt)
            states[name] = model
            installs[name] = {
                "items": len(qa),
                "kappa": result.kappa,
                "epochs": result.epochs,
                "s": round(time.perf_counter() - t0, 1),
            }
        probe_items = [it for it in items if it.entity_id in forget]
        # decoys for the per-token baseline: the same questions about people the forget set does not hold
        decoy_items = [it for it in items if it.entity_id not in forget]
        decoy_items += [it for it in pack.split("controls") if it.attribute in attrs]
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
            "probe_items": probe_items,
            "decoy_items": decoy_items,
            "system_prompt": cs.system_prompt,
            "cache": cs.root / "latent-cache",
        }
    finally:
        torch.set_num_threads(before)


def _name_probes(tok: Any, items: list[Any], fmt: Any) -> list[Probe]:
    """One probe per forget fact: the question as asked; C_i = the tokens that start the home town's name."""
    from remnant.latent.jaccess import make_probe
    from remnant.models.prompts import render_prompt_ids

    return [
        make_probe(tok, it.id, render_prompt_ids(tok, it.question, fmt), [it.accepted[0]]) for it in items
    ]


def _gap(result: Any) -> str:
    """The criterion's quantity, A(NPO) − A(0%) on NPO's silent probes, with its paired 95 % interval."""
    if result.retain_gap is None or result.retain_gap_ci95 is None:
        return "—"
    lo, hi = result.retain_gap_ci95
    return f"{result.retain_gap:+.2f} [{lo:+.2f}, {hi:+.2f}]"


def test_uds_scale_check_and_jaccess(scale: dict[str, Any], canary_states: Any) -> None:  # noqa: F811
    s, st = scale, scale["states"]
    torch.set_num_threads(1)
    cfg = UDSConfig(prompt_format="chat", layers=TRAINED_BLOCKS, system_prompt=s["system_prompt"])
    t0 = time.perf_counter()
    s1 = stage1(st["100%"], st["0%"], s["tok"], s["examples"], cfg, cache_dir=s["cache"])
    uds = {name: score_source(st["100%"], st[name], s1, cfg) for name in (*SHARES, "npo")}
    t_uds = time.perf_counter() - t0

    t0 = time.perf_counter()
    probes = _name_probes(s["tok"], s["probe_items"], s["fmt"])
    lens_prompts = [list(s["tok"](text)["input_ids"]) for text in LENS_TEXT[:N_LENS_PROMPTS]]
    lens = fit_lens(st["100%"], lens_prompts, LENS, cache_dir=s["cache"])  # fixed decoder: the original's J
    t_lens = time.perf_counter() - t0
    readouts = {}
    logit = {}
    # eq. 4 looks at each model's greedy continuation, which does not depend on C_i: generate once per model
    continuations = {
        name: greedy_continuations(st[name], s["tok"], probes, ACCESS.max_new_tokens)
        for name in ("npo", "100%", "0%")
    }
    for name in ("npo", "100%", "0%"):
        said = emitted_flags(
            st[name], s["tok"], probes, continuations=continuations[name]
        )  # shared by both lenses
        readouts[name] = read_access(st[name], s["tok"], probes, lens, ACCESS, emitted=said)
        logit[name] = read_access(st[name], s["tok"], probes, None, ACCESS, emitted=said)
    jacc = j_occ(readouts["npo"], readouts["100%"], readouts["0%"])
    lacc = j_occ(logit["npo"], logit["100%"], logit["0%"])
    # The same audit with generic concept tokens dropped (algorithms.md §2.5's per-token baseline): a token that
    # enters the original model's top-k on more than GENERIC_MAX of the decoy questions is not about the target.
    decoys = [render_prompt_ids(s["tok"], it.question, s["fmt"]) for it in s["decoy_items"]]
    rates = token_hit_rates(
        st["100%"], decoys, sorted(set().union(*(p.concept_ids for p in probes))), lens, ACCESS
    )
    specific = drop_generic(probes, rates, GENERIC_MAX)
    spec_reads = {
        name: read_access(
            st[name],
            s["tok"],
            specific,
            lens,
            ACCESS,
            emitted=emitted_flags(st[name], s["tok"], specific, continuations=continuations[name]),
        )
        for name in ("npo", "100%", "0%")
    }
    sacc = j_occ(spec_reads["npo"], spec_reads["100%"], spec_reads["0%"])
    generic = sorted((s["tok"].decode([t]), round(r, 2)) for t, r in rates.items() if r > GENERIC_MAX)
    t_jacc = time.perf_counter() - t0

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
        + f"\nJ-Access (k={ACCESS.k}, layers {jacc.layers[0]}-{jacc.layers[-1]}, {jacc.positions}, "
        f"{jacc.decoder} decoder fitted on {lens.n_prompts} generic prompts, home-town probes n={jacc.n_probes}): "
        f"JOcc(NPO) = {jacc.jocc}, A(NPO)={jacc.access_audited}, A(100%)={jacc.access_original}, "
        f"A(0%)={jacc.access_retain}, silent {jacc.n_silent}, A(NPO)−A(0%) = {_gap(jacc)}\n"
        f"logit lens: JOcc(NPO) = {lacc.jocc}, A(NPO)={lacc.access_audited}, A(100%)={lacc.access_original}, "
        f"A(0%)={lacc.access_retain}, silent {lacc.n_silent}, A(NPO)−A(0%) = {_gap(lacc)}\n"
        f"generic concept tokens (decoy rate > {GENERIC_MAX} on {len(decoys)} decoy questions): {generic}; "
        f"without them: JOcc(NPO) = {sacc.jocc}, A(NPO)={sacc.access_audited}, A(100%)={sacc.access_original}, "
        f"A(0%)={sacc.access_retain}, silent {sacc.n_silent}, A(NPO)−A(0%) = {_gap(sacc)}\n"
        f"installs {json.dumps(s['installs'])}; UDS {t_uds:.0f} s; lens fit {t_lens:.0f} s; "
        f"J-Access total {t_jacc:.0f} s"
    )
    score = {name: uds[name].score for name in (*SHARES, "npo")}
    assert all(v is not None for v in score.values())
    assert uds["100%"].n_scored >= n // 2  # most probe facts have KE layers
    assert score["100%"] == pytest.approx(0.0, abs=1e-4) and score["0%"] == pytest.approx(1.0, abs=1e-4)
    assert score["100%"] < score["90%"] < score["50%"] < score["0%"]  # type: ignore[operator]
    for name in ("90%", "50%"):
        assert score[name] == pytest.approx(len(s["unseen"][name]) / n, abs=0.2)
    assert 0.02 < score["npo"] < 0.98  # type: ignore[operator]
    # J-Access (eq. 6) is measured and printed, and checked for what must hold of any readout. Its criterion
    # (JOcc(NPO) > 0) is NOT asserted, because at this scale the measurement does not resolve it. Measured on
    # these states (NPO lr 2e-4, recipe canary-584fb22dfc61) with exactly this band, positions, k and concept
    # sets: NPO still emits the town's first token on 9 of the 24 probes ("Miveskoby"), so |I(NPO)| = 15 and A
    # moves in steps of 1/15; six of the eight concept sets hold a one-letter token (M, K, B, T, V, R), and the
    # never-trained control model reads a concept token in the top 10 on 6 of the 15 (A = 0.40); and the result
    # turns on which generic prompts J is fitted on. Fixed decoder (the 100 % model's J), A(NPO)/A(100%)/A(0%):
    # 6 prompts 0.47/0.53/0.40, JOcc +0.5; prompts {0,1,2,3} 0.40/0.53/0.40, JOcc 0.0; {0,1} 0.20/0.47/0.47,
    # undefined ({2,3} +0.5; {4,5} +1.0; single prompts -0.67, -0.5, 0.0 and the own-J rows come from one-off
    # scripts, not this test). Each model through its own J (the
    # paper's "refit after unlearning" check): prompts {0,1} 0.27/0.47/0.40, JOcc -2.0; {0,1,2,3} 0.47/0.53/0.40,
    # +0.5. Logit lens 0.53/0.53/0.47, JOcc +1.0 (one probe). The sign is one probe's worth and flips with the
    # lens corpus and decoder: not a claim this test can make.
    # Without the generic tokens the access that remains is not about the target either. Measured on these states
    # (recipe canary-584fb22dfc61), A(NPO) / A(100%) / A(0%) on the 15 silent probes: with this test's 2-prompt
    # lens the generic tokens are " M", " T", " V" and what remains reads 0.0 / 0.13 / 0.20 (JOcc +3.0, the
    # anchors in the wrong order); with the 6-prompt lens they are " M", " K", " T", " V", "am", and no model, the
    # installed one included, puts a remaining concept token in the top 10 on any silent probe (0 / 0 / 0, also at
    # a 0.25 cut: REMNANT_GENERIC_MAX=0.25). The raw access above is the generic tokens'.
    # The criterion's own quantity, A(NPO) − A(0%) with its paired interval (printed), by lens prompts
    # (REMNANT_LENS_PROMPTS, 2026-12-03): 2 → −0.27 [−0.46, −0.04]; 6 → +0.07 [−0.05, +0.18]; 12 → 0.00
    # [−0.17, +0.17]. As the lens converges the NPO model reads at the retain-only level (docs/latent.md).
    assert generic  # the one-letter name starts are generic on these states
    for name in ("npo", "100%", "0%"):  # fewer concept tokens can only lose hits, probe by probe
        pairs = zip(readouts[name].probes, spec_reads[name].probes, strict=True)
        assert all(a.idx == b.idx and (a.hit or not b.hit) for a, b in pairs)
    assert jacc.decoder == "fixed" and lacc.decoder == "logit"
    for readout in (jacc, lacc, sacc):
        assert readout.n_probes == n and 0 < readout.n_silent <= n
        for value in (readout.access_audited, readout.access_original, readout.access_retain):
            assert value is None or 0.0 <= value <= 1.0
        gap, ci = readout.retain_gap, readout.retain_gap_ci95
        assert gap is not None and ci is not None and ci[0] <= gap <= ci[1]
        assert gap == pytest.approx(readout.access_audited - readout.access_retain)  # type: ignore[operator]


def test_fast_path_equals_naive_on_smollm2(scale: dict[str, Any]) -> None:
    s = scale
    ex = encode_examples(s["tok"], s["examples"][:1], "chat", s["system_prompt"]).examples[0]
    layers = [15, 20, 25, 29]
    states = [source_states(s["states"]["50%"], ex, layers)]
    with torch.no_grad():
        f_full, f_rows = fast_scores(s["states"]["100%"], ex, states, layers)
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
